"""The score-based sampler: generative SDE paths, importance weights and log Z (spec §2.3, §3.4).

Paths start at ``y_0 ~ N(0, I)`` and follow ``dY = [-Y + 2 grad W(Y, t)] dt + sqrt(2) dB`` with the
OU-exponential integrator (``grad W`` frozen over a step, the linear part integrated exactly):

    q_n(y' | y) = N(y'; e^{-dt} y + 2 (1 - e^{-dt}) grad W_n(y), (1 - e^{-2 dt}) I).

Each step's drift displacement is capped at ``1 + |y|`` (a tamed scheme: frozen steep gradients would
overshoot); the weights use the kernel actually sampled, so the estimators below stay exact. The reference
(noising) kernel is ``p_n(y | y') = N(y; e^{-dt} y', (1 - e^{-2 dt}) I)`` and the path weight

    log w = log rho(y_N) - log gamma(y_0) + sum_n [log p_n(y_n | y_{n+1}) - log q_n(y_{n+1} | y_n)]

has ``E_q[w] = Z`` exactly, whatever ``W``, ``T`` and the grid: ``rho(y_N) prod p_n`` is an unnormalised
path density of mass Z. So ``log Z^ = logsumexp(log w) - log K`` is unbiased in Z (biased low in log Z),
``mean(log w)`` is an ELBO, and ``(sum w)^2 / (K sum w^2)`` the normalised effective sample size.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from numtk._lib import Result, normalize_rng
from numtk._lib._estimator import check_is_fitted
from numtk._lib._validation import check_bool, check_int, check_option
from numtk._lib._workers import as_map, n_threads
from numtk.sampling._paths import simulate_paths, trusted_gradient
from numtk._lib._validation import check_size

__all__ = ["ScoreBasedSampler"]

_LOG_2PI = math.log(2.0 * math.pi)


class _Control:
    """``grad W`` at grid index k in preconditioned coordinates, for the BSDE or the Hermite solution."""

    def __init__(self, solution, pre):
        self.solution = solution
        self.pre = pre
        self.dim = pre.dim
        self.n_fallback = 0
        times = solution.times
        self.tau = float(times[-1]) - times
        self.exact_score = None
        # per-step guards (trust box, gradient bound; see trusted_gradient): the BSDE diagnostics
        self.guards = list(getattr(solution, "diagnostics", None) or [None] * len(times))
        if solution.method == "hermite":
            self.tau_min = float(solution.tau_min)
            target = pre.target
            if getattr(target, "has_grad", True):
                self.exact_score = pre.grad_log_density

    def __call__(self, y, k):
        g = self._grad(y, k)
        # a truncated series or an extrapolated fit can overflow far out; count those rows here, the path
        # step (_tame) replaces them by the reference drift (grad W = 0)
        self.n_fallback += int(np.sum(~np.all(np.isfinite(g), axis=1)))
        return g

    def _grad(self, y, k):
        s = self.solution
        if s.method == "bsde":
            return trusted_gradient(s.W[k], y, self.guards[k])
        tau = self.tau[k]
        if tau < self.tau_min and self.exact_score is not None:
            # below tau_min the truncated series is useless: use the target's own score (grad W = grad log
            # rho~ + y at tau = 0); the importance weights correct the O(tau_min) bias
            try:
                with np.errstate(all="ignore"):
                    return self.exact_score(np.where(np.isfinite(y), y, 0.0)) + y
            except NotImplementedError:
                self.exact_score = None
        _, g, nf = s.phi.log_f_and_grad(y, tau)
        self.n_fallback += int(nf)
        return g


class ScoreBasedSampler:
    """Sample an unnormalised density with the HJB/BSDE value function in functional-TT format.

    ``fit`` solves the HJB equation of the OU-noised log-density (:func:`solve_hjb`); ``sample`` runs the
    generative SDE with the fitted score (outside each step's trust box the control is held at the box's
    face and its norm is capped at the largest the fit has on its design; see :func:`solve_hjb`); ``log_Z`` returns the importance-weighted estimate of the
    log-normalising constant (unbiased in Z for any fitted value function), with its standard error,
    the ELBO and the effective sample size.

    Parameters
    ----------
    target : Target or callable
        The unnormalised target (see :func:`solve_hjb`).
    solver : {'auto', 'bsde', 'hermite'}, default 'auto'
        'auto' is BSDE regression (any target). 'hermite' drives the sampler with the exact Cole-Hopf/OU
        propagation of a target's Hermite coefficients (``has_hermite``); its truncated series needs a high
        degree for narrow or far-out modes and is, as a sampler, not yet robust: the many-well d=4 reached
        ESS 0.46 and the 25-GMM ESS < 0.02 at degree 120 (it remains exact as an oracle for ``W``).
    integrator : {'ou-exponential', 'euler'}, default 'ou-exponential'
        Euler-Maruyama needs far more steps for the same accuracy (spec pitfall 6); kept for comparison.
    transform : Transform, optional
        Sample ``rho`` through a coordinate-wise bijection ``x = T(u)`` (:class:`SinhTransform`,
        :class:`ExpTransform`, or a :class:`Transform` subclass): the HJB equation is solved for the density
        of ``u`` (:func:`transform_target`; same ``log Z``), and :meth:`sample` returns ``x``. For coordinates
        whose scale varies over orders of magnitude across the mass, as the funnel's. ``design_samples`` and
        a ``design`` callable stay in the target's coordinates; ``loc``, ``scale``, ``solution_`` and its
        value functions are in ``u``.
    **solve_hjb_kwargs
        Passed to :func:`solve_hjb` (``T``, ``n_steps``, ``degree``, ``rng``, ``progress``, ...).

    Attributes
    ----------
    solution_ : Result
        The :func:`solve_hjb` result.
    times_ : ndarray
        The time grid.
    n_features_in_ : int
        The dimension.

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.sampling import ScoreBasedSampler, gaussian
    >>> target = gaussian(mean=[1.0, -1.0], cov=[0.5, 2.0])
    >>> sampler = ScoreBasedSampler(target, solver="bsde", n_steps=30, degree=15, refine=0, rng=0).fit()
    >>> est = sampler.log_Z(n=20000, rng=1)
    >>> abs(est.value - target.log_Z) < 5 * est.stderr + 0.01
    True
    >>> sampler.sample(5, rng=2).shape
    (5, 2)
    """

    def __init__(self, target: Any, *, solver: str = "auto", integrator: str = "ou-exponential",
                 transform: Any = None, **solve_hjb_kwargs: Any) -> None:
        from numtk.sampling._target import Target
        from numtk.sampling._transforms import Transform

        if not isinstance(target, Target) and not callable(target):
            raise TypeError(f"`target` must be a numtk Target or a callable log-density; got {type(target).__name__}")
        check_option(solver, "solver", ("auto", "bsde", "hermite"))
        check_option(integrator, "integrator", ("ou-exponential", "euler"))
        if transform is not None and not isinstance(transform, Transform):
            raise TypeError(f"`transform` must be None or a numtk.sampling.Transform; got {type(transform).__name__}")
        self.target = target
        self.solver = solver
        self.integrator = integrator
        self.transform = transform
        self.solve_hjb_kwargs = solve_hjb_kwargs

    def fit(self) -> "ScoreBasedSampler":
        """Solve the HJB equation; returns ``self``."""
        from numtk.sampling._hjb_bsde import _Preconditioned, solve_hjb
        from numtk.sampling._target import as_target

        target = as_target(self.target)
        solver = check_option(self.solver, "solver", ("auto", "bsde", "hermite"))
        integrator = check_option(self.integrator, "integrator", ("ou-exponential", "euler"))
        if solver == "auto":
            solver = "bsde"
        kwargs = dict(self.solve_hjb_kwargs)
        if self.transform is not None:
            from numtk.sampling._transforms import Transform, transform_target

            if not isinstance(self.transform, Transform):
                raise TypeError("`transform` must be None or a numtk.sampling.Transform; got "
                                f"{type(self.transform).__name__}")
            target = transform_target(target, self.transform)
            T = self.transform
            if kwargs.get("design_samples") is not None:
                kwargs["design_samples"] = T.inverse(kwargs["design_samples"])
            if callable(kwargs.get("design")):
                user_design = kwargs["design"]
                kwargs["design"] = lambda tau, n, rng: T.inverse(user_design(tau, n, rng))
        sol = solve_hjb(target, method=solver, integrator=integrator, **kwargs)
        self._target = target
        self._transform = self.transform  # as fitted (a later set of `transform` needs a refit)
        # sampling spreads whole paths over `workers` (see _paths); the target is evaluated serially in each
        self._pre = _Preconditioned(target, np.asarray(sol.loc), np.asarray(sol.scale))
        self._control = _Control(sol, self._pre)
        self._integrator = integrator
        self.solution_ = sol
        self.times_ = sol.times
        self.n_features_in_ = target.dim
        return self

    def _paths(self, n, rng, workers):
        check_is_fitted(self, "solution_")
        n = check_int(n, "n", minimum=1)
        # the end points (n, d) and the log-weights, plus the per-chunk temporaries of simulate_paths
        check_size(n, 8 * (self.n_features_in_ + 1) * 3, "n")
        rng = normalize_rng(rng)
        if workers is not None and not callable(workers):
            n_threads(workers)  # validates an int `workers` (bounded) before any path is simulated
        if workers in (None, 1) or n < 2000:
            return simulate_paths(self._control, self.times_, self._pre.log_density, n, rng,
                                  dim=self.n_features_in_, integrator=self._integrator)
        # independent chunks with spawned streams, carried by `workers`
        from numtk._lib import spawn_rngs

        with as_map(workers) as mapper:
            n_chunks = max(2, min(64, n // 1000))
            sizes = [n // n_chunks + (i < n % n_chunks) for i in range(n_chunks)]
            rngs = spawn_rngs(rng, n_chunks)
            out = list(mapper(_PathJob(self._control, self.times_, self._pre.log_density, self._integrator),
                              list(zip(sizes, rngs))))
        return np.concatenate([o[0] for o in out]), np.concatenate([o[1] for o in out])

    def sample(self, n: int, rng: Any = None, *, return_log_weights: bool = False, workers: Any = None):
        """Draw ``n`` samples (the unweighted path endpoints, in the target's coordinates).

        Parameters
        ----------
        n : int
            Number of samples.
        rng : {None, int, numpy.random.Generator}, optional
            Randomness of the paths.
        return_log_weights : bool, default False
            Also return the path log-weights (``log w``; self-normalise them to reweight the samples).
        workers : int or map-like callable, optional
            Spread the paths over workers.

        Returns
        -------
        samples : ndarray of shape (n, d)
        log_weights : ndarray of shape (n,), only with ``return_log_weights``
        """
        return_log_weights = check_bool(return_log_weights, "return_log_weights")
        Y, logw = self._paths(n, rng, workers)
        X = self._pre.to_x(Y)
        if self._transform is not None:
            X = self._transform._forward(X)
        if return_log_weights:
            return X, logw + float(np.sum(np.log(self._pre.scale)))
        return X

    def log_Z(self, n: int = 10000, rng: Any = None, *, workers: Any = None) -> Result:
        """Importance-weighted estimate of ``log Z`` from ``n`` paths.

        Returns
        -------
        Result
            ``value`` (``logsumexp(log w) - log n``), ``stderr`` (delta method,
            ``sqrt((1/ESS - 1) / n)``), ``elbo`` (``mean(log w)`` <= log Z) and ``elbo_stderr``, ``ess``
            (normalised, in (0, 1]), ``n``. Warns when ESS < 0.01 (the estimate is then unreliable).
        """
        _, logw = self._paths(n, rng, workers)
        return _log_Z_estimate(logw, float(np.sum(np.log(self._pre.scale))))

    def ess(self, n: int = 10000, rng: Any = None) -> float:
        """Normalised effective sample size of ``n`` paths' importance weights, in (0, 1]."""
        return float(self.log_Z(n, rng).ess)


class _PathJob:
    def __init__(self, control, times, log_rho, integrator):
        self.control, self.times, self.log_rho, self.integrator = control, times, log_rho, integrator

    def __call__(self, job):
        size, rng = job
        return simulate_paths(self.control, self.times, self.log_rho, size, rng, dim=self.control.dim,
                              integrator=self.integrator)


def _log_Z_estimate(logw: np.ndarray, shift: float = 0.0) -> Result:
    n = len(logw)
    finite = np.isfinite(logw)
    m = float(np.max(logw[finite])) if np.any(finite) else 0.0
    w = np.exp(np.where(finite, logw - m, -np.inf))
    s = float(w.sum())
    ess = s * s / (n * float(np.sum(w * w))) if s > 0 else 0.0
    value = m + math.log(s / n) + shift if s > 0 else -math.inf
    stderr = math.sqrt(max(1.0 / ess - 1.0, 0.0) / n) if ess > 0 else math.inf
    lw = logw[finite]
    elbo = float(np.mean(logw)) + shift if np.all(finite) else -math.inf
    elbo_se = float(np.std(lw) / math.sqrt(max(len(lw), 1)))
    if ess < 0.01:
        warnings.warn(f"effective sample size {ess:.2e} < 0.01: the log Z estimate is unreliable",
                      RuntimeWarning, stacklevel=3)
    return Result(value=value, stderr=stderr, elbo=elbo, elbo_stderr=elbo_se, ess=ess, n=n)
