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
from typing import Any, Callable

import numpy as np

from numtk._lib import Result, normalize_rng
from numtk._lib._constraints import constraints
from numtk._lib._estimator import Estimator, check_is_fitted
from numtk._lib._validation import check_bool, check_int, check_option, check_options, check_size
from numtk._lib._workers import as_map, n_threads
from numtk.sampling._paths import simulate_paths, trusted_gradient

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


_SOLVERS = ("auto", "bsde", "hermite")
_INTEGRATORS = ("ou-exponential", "euler")


@constraints(target="callable", solver="option", integrator="option", warp="callable", T="real>0",
             n_steps="count", grading="real", times="array1d", basis="option", degree="int>=1", n_paths="count",
             refine="int>=0", design_samples="array2d", design="callable", loc="real", scale="real>0",
             options="mapping", rng="rng", workers="workers", progress="bool", callback="callable")
class ScoreBasedSampler(Estimator):
    """Sample an unnormalised density with the HJB/BSDE value function in functional-TT format.

    ``fit`` solves the HJB equation of the OU-noised log-density (:func:`solve_hjb`); ``sample`` runs the
    generative SDE with the fitted score (outside each step's trust box the control is held at the box's
    face and its norm is capped at the largest the fit has on its design; see :func:`solve_hjb`);
    ``log_Z`` returns the importance-weighted estimate of the log-normalising constant (unbiased in Z for
    any fitted value function), with its standard error, the ELBO and the effective sample size.

    A scikit-learn style estimator: the parameters below are stored unchanged and checked by ``fit``;
    ``get_params``, ``set_params`` and :func:`sklearn.base.clone` work. ``fit`` takes no data (the target
    density is the problem), and with an int ``rng`` it is reproducible.

    Parameters
    ----------
    target : Target or callable
        The unnormalised target (see :func:`solve_hjb`).
    solver : {'auto', 'bsde', 'hermite'}, default 'auto'
        'auto' is BSDE regression (any target). 'hermite' drives the sampler with the exact Cole-Hopf/OU
        propagation of a target's Hermite coefficients (``has_hermite``); its truncated series needs a high
        degree for narrow or far-out modes and is, as a sampler, not yet robust (see the sampling tutorial;
        it remains exact as an oracle for ``W``).
    integrator : {'ou-exponential', 'euler'}, default 'ou-exponential'
        Integrator of the generative paths (of :meth:`sample` and :meth:`log_Z`, and of the solver's
        refinement rounds). Euler-Maruyama needs far more steps for the same accuracy; kept for comparison.
    warp : Transform, optional
        Sample ``rho`` through a coordinate-wise bijection ``x = T(u)`` (:class:`SinhTransform`,
        :class:`ExpTransform`, or a :class:`Transform` subclass): the HJB equation is solved for the density
        of ``u`` (:func:`transform_target`; same ``log Z``), and :meth:`sample` returns ``x``. For coordinates
        whose scale varies over orders of magnitude across the mass, as the funnel's. ``design_samples`` and
        a ``design`` callable stay in the target's coordinates; ``loc``, ``scale``, ``solution_`` and its
        value functions are in ``u``. (Not called ``transform``: scikit-learn takes an estimator with a
        ``transform`` attribute for a transformer.)
    T, n_steps, grading, times, basis, degree, n_paths, refine, design_samples, design, loc, scale
        As in :func:`solve_hjb` (same defaults).
    options : dict, optional
        The solver knobs of :func:`solve_hjb` (its ``options``), except ``'integrator'``, which is the
        parameter above.
    rng : {None, int, numpy.random.Generator}, optional
        Randomness of :meth:`fit` (an int makes it reproducible). :meth:`sample` and :meth:`log_Z` take
        their own ``rng``.
    workers : int or map-like callable, default 1
        Parallelism of :meth:`fit` (see :func:`solve_hjb`).
    progress : bool, default False
        A progress bar over the time steps of :meth:`fit`.
    callback : callable, optional
        ``callback(intermediate_result)`` after each time step of :meth:`fit` (see :func:`solve_hjb`);
        raise ``StopIteration`` to stop: ``fit`` then returns with ``solution_.status == 'callback'``,
        and the sampler cannot sample (the steps not reached have no value function).

    Attributes
    ----------
    solution_ : Result
        The :func:`solve_hjb` result.
    times_ : ndarray of shape (n_steps + 1,)
        The time grid.
    n_features_in_ : int
        The dimension d.

    See Also
    --------
    solve_hjb : the solver behind :meth:`fit`.

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
                 warp: Any = None, T: float = 5.0, n_steps: int = 100, grading: float = 3.0,
                 times: Any = None, basis: str = "bspline", degree: int = 31, n_paths: int | None = None,
                 refine: int = 1, design_samples: Any = None, design: Callable | None = None, loc: Any = None,
                 scale: Any = None, options: dict | None = None, rng: Any = None, workers: Any = 1,
                 progress: bool = False, callback: Callable | None = None) -> None:
        self.target = target
        self.solver = solver
        self.integrator = integrator
        self.warp = warp
        self.T = T
        self.n_steps = n_steps
        self.grading = grading
        self.times = times
        self.basis = basis
        self.degree = degree
        self.n_paths = n_paths
        self.refine = refine
        self.design_samples = design_samples
        self.design = design
        self.loc = loc
        self.scale = scale
        self.options = options
        self.rng = rng
        self.workers = workers
        self.progress = progress
        self.callback = callback

    @constraints(X="option", y="option")
    def fit(self, X: None = None, y: None = None) -> "ScoreBasedSampler":
        """Solve the HJB equation of the target; returns ``self``.

        Parameters
        ----------
        X, y : None
            Not used (the target density given to the constructor is the problem); present for the
            estimator API, and must be None.

        Returns
        -------
        self : ScoreBasedSampler
        """
        from numtk.sampling._bsde_design import _Preconditioned
        from numtk.sampling._hjb_bsde import solve_hjb
        from numtk.sampling._target import Target, as_target
        from numtk.sampling._transforms import Transform, transform_target

        for name, value in (("X", X), ("y", y)):
            if value is not None:
                raise ValueError(f"`{name}` must be None: ScoreBasedSampler takes no data, it fits the target "
                                 "given to the constructor")
        if not isinstance(self.target, Target) and not callable(self.target):
            raise TypeError("`target` must be a numtk Target or a callable log-density; got "
                            f"{type(self.target).__name__}")
        target = as_target(self.target)
        solver = check_option(self.solver, "solver", _SOLVERS)
        integrator = check_option(self.integrator, "integrator", _INTEGRATORS)
        if self.warp is not None and not isinstance(self.warp, Transform):
            raise TypeError(f"`warp` must be None or a numtk.sampling.Transform; got {type(self.warp).__name__}")
        method = "bsde" if solver == "auto" else solver
        options = check_options(self.options)
        if "integrator" in options:
            raise ValueError("`options['integrator']`: give the integrator as ScoreBasedSampler(integrator=...)")
        if method == "bsde":
            options["integrator"] = integrator
        design_samples, design = self.design_samples, self.design
        if self.warp is not None:
            tr = self.warp
            target = transform_target(target, tr)
            if design_samples is not None:
                design_samples = tr.inverse(design_samples)
            if callable(design):
                user_design = design
                design = lambda tau, n, rng: tr.inverse(user_design(tau, n, rng))  # noqa: E731
        sol = solve_hjb(target, T=self.T, n_steps=self.n_steps, grading=self.grading, times=self.times,
                        method=method, basis=self.basis, degree=self.degree, n_paths=self.n_paths,
                        refine=self.refine, design_samples=design_samples, design=design, loc=self.loc,
                        scale=self.scale, rng=self.rng, workers=self.workers, progress=self.progress,
                        callback=self.callback, options=options)
        self._warp = self.warp  # as fitted (a later set of `warp` needs a refit)
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
        if self.solution_.status == "callback":
            raise RuntimeError("the fit was stopped by its callback before every time step was solved; fit "
                               "again to sample")
        n = check_int(n, "n", minimum=1)
        # the end points (n, d) and the log-weights, plus the per-chunk temporaries of simulate_paths
        check_size(n, 8 * (self.n_features_in_ + 1) * 3, "n")
        rng = normalize_rng(rng)
        if not callable(workers):
            n_threads(workers)  # validates an int `workers` (bounded) before any path is simulated
        if workers == 1 or n < 2000:
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

    @constraints(n="count", rng="rng", return_log_weights="bool", workers="workers")
    def sample(self, n: int, *, rng: Any = None, return_log_weights: bool = False, workers: Any = 1):
        """Draw ``n`` samples (the unweighted path endpoints, in the target's coordinates).

        Parameters
        ----------
        n : int
            Number of samples.
        rng : {None, int, numpy.random.Generator}, optional
            Randomness of the paths.
        return_log_weights : bool, default False
            Also return the path log-weights (``log w``; self-normalise them to reweight the samples).
        workers : int or map-like callable, default 1
            Spread the paths over workers (independent chunks with spawned random streams, from 2000
            paths on).

        Returns
        -------
        samples : ndarray of shape (n, d)
        log_weights : ndarray of shape (n,), only with ``return_log_weights``
        """
        return_log_weights = check_bool(return_log_weights, "return_log_weights")
        Y, logw = self._paths(n, rng, workers)
        X = self._pre.to_x(Y)
        if self._warp is not None:
            X = self._warp._forward(X)
        if return_log_weights:
            return X, logw + float(np.sum(np.log(self._pre.scale)))
        return X

    @constraints(n="count", rng="rng", workers="workers")
    def log_Z(self, n: int = 10000, *, rng: Any = None, workers: Any = 1) -> Result:
        """Importance-weighted estimate of ``log Z`` from ``n`` paths.

        Parameters
        ----------
        n : int, default 10000
            Number of paths.
        rng : {None, int, numpy.random.Generator}, optional
            Randomness of the paths.
        workers : int or map-like callable, default 1
            Spread the paths over workers (as :meth:`sample`).

        Returns
        -------
        res : Result
            value : float
                ``logsumexp(log w) - log n``: unbiased in Z, biased low in log Z.
            stderr : float
                Delta-method standard error of ``value``, ``sqrt((1/ess - 1) / n)``.
            elbo : float
                ``mean(log w)``, a lower bound on log Z (``-inf`` if a path has weight 0).
            elbo_stderr : float
                Standard error of ``elbo``.
            ess : float
                Normalised effective sample size ``(sum w)^2 / (n sum w^2)``, in (0, 1]. Below 0.01 a
                RuntimeWarning says the estimate is unreliable.
            n : int
                The number of paths.
        """
        _, logw = self._paths(n, rng, workers)
        return _log_Z_estimate(logw, float(np.sum(np.log(self._pre.scale))))

    @constraints(n="count", rng="rng")
    def ess(self, n: int = 10000, *, rng: Any = None) -> float:
        """Normalised effective sample size of ``n`` paths' importance weights, in (0, 1].

        Parameters
        ----------
        n : int, default 10000
            Number of paths.
        rng : {None, int, numpy.random.Generator}, optional
            Randomness of the paths.

        Returns
        -------
        ess : float
            ``log_Z(n, rng=rng).ess``.
        """
        return float(self.log_Z(n, rng=rng).ess)


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
