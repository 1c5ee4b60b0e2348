"""The HJB/BSDE solver behind the score-based sampler (spec §2.2-§2.5).

The target ``rho`` is noised by the Ornstein-Uhlenbeck process ``dY = -Y dtau + sqrt(2) dB`` towards
``N(0, I)``; the log-density of the noised marginals, written relative to the reference Gaussian,
``W(x, t) = log(rho_{T-t} / gamma)(x)``, solves the backward HJB equation

    dW/dt + Laplacian W - x . grad W + |grad W|^2 = 0,      W(., T) = log rho - log gamma,

whose gradient drives the generative SDE ``dY = [-Y + 2 grad W] dt + sqrt(2) dB``. It is solved backward in
time by BSDE regression: along the forward OU transition ``X_{n+1} = e^{-dt} X_n + sqrt(1 - e^{-2dt}) xi``,

    W(X_n, t_n) = E[ W(X_{n+1}, t_{n+1}) | X_n ] + dt |grad W(X_n, t_n)|^2        (implicit, theta = 1),

one least-squares fit of a :class:`numtk.ftt.FunctionalTT` per time step. The choices that make it stable
were measured (spec §2.5) and are the defaults here: the W form (no ``|x|^2``-size terms), the martingale
control variate ``grad W_{n+1}(mu) . (X_{n+1} - mu)`` subtracted from every target, the implicit scheme
solved by Newton-linearised regression (``|grad W|^2 ~ 2 g . grad W - |g|^2``, one directional-derivative
fit per iteration), a time grid graded towards the target, cubic B-splines with a curvature penalty on a
box equal to the design hull (linear extension outside), and per-step design marginals mixing noised pilot
samples, ``N(0, I)`` and a uniform layer. No exact target samples are needed: the first round uses a broad
Gaussian pilot, later rounds importance-resample the sampler's own paths.

This module holds the public entry point (:func:`solve_hjb`, its options, :func:`time_grid`); the regression
design lives in :mod:`numtk.sampling._bsde_design`, the backward time stepping in
:mod:`numtk.sampling._bsde_steps` and the value functions in :mod:`numtk.sampling._value_function`.
"""

from __future__ import annotations

import math
import time
import warnings
from typing import Any, Callable

import numpy as np

from numtk._lib import Result, normalize_rng
from numtk._lib._constraints import constraints
from numtk._lib._validation import (as_array, check_bool, check_callback, check_finite, check_int, check_option,
                                     check_options, check_real, check_size, per_coordinate)
from numtk._lib._warnings import NumtkWarning
from numtk._lib._workers import n_threads
from numtk.sampling._bsde_design import _box, _mcmc_pilot, _Preconditioned, _user_design
from numtk.sampling._bsde_steps import _bsde_pass
from numtk.sampling._hermite_ou import _MAX_HERMITE_DEGREE
from numtk.sampling._paths import simulate_paths, systematic_resample, trusted_gradient
from numtk.sampling._value_function import _value_log_Z, value_function

__all__ = ["solve_hjb", "time_grid"]

_MAX_T = 1e3          # horizon: e^{-T} is below double precision long before
_MAX_STEPS = 1 << 20  # time steps
_MAX_GRADING = 100.0
_MAX_DEGREE = 511     # as FunctionalTT (512 basis functions per coordinate)
_MAX_ITER = 10_000    # ALS sweeps, Newton iterations
_MAX_REFINE = 100
_MAX_PILOT_STEPS = 1_000_000


@constraints(T="real>0", n_steps="count", grading="real")
def time_grid(T: float = 5.0, n_steps: int = 100, grading: float = 3.0) -> np.ndarray:
    """The sampler's time grid from 0 to T, graded towards the target end.

    The noising times ``tau_j = T (j / N)^grading`` are fine near the target (tau = 0), where
    ``log rho_tau`` has near-kinks; ``t_n = T - tau_{N-n}``.

    Parameters
    ----------
    T : float, default 5.0
        Horizon, in ``(0, 1000]``.
    n_steps : int, default 100
        Number of steps N, in ``[1, 2**20]``.
    grading : float, default 3.0
        Exponent kappa in ``[1, 100]`` (1 is uniform). A grid whose times coincide in floating point is
        refused.

    Returns
    -------
    ndarray of shape (n_steps + 1,)

    Examples
    --------
    >>> from numtk.sampling import time_grid
    >>> t = time_grid(T=1.0, n_steps=4, grading=2.0)
    >>> [round(float(v), 4) for v in t]
    [0.0, 0.4375, 0.75, 0.9375, 1.0]
    """
    T = check_real(T, "T", low=0.0, high=_MAX_T)
    if T <= 0:
        raise ValueError(f"`T` must be positive; got {T}")
    n_steps = check_int(n_steps, "n_steps", minimum=1, maximum=_MAX_STEPS)
    grading = check_real(grading, "grading", low=1.0, high=_MAX_GRADING)
    tau = T * (np.arange(n_steps + 1) / n_steps) ** grading
    t = np.ascontiguousarray(T - tau[::-1])
    if np.any(np.diff(t) <= 0):
        raise ValueError(f"`T` = {T}, `n_steps` = {n_steps} and `grading` = {grading} give a grid with "
                         "coinciding times (steps below the floating-point resolution); use a larger `T`, "
                         "fewer steps or a smaller `grading`")
    return t


def _check_time_grid(times: Any) -> np.ndarray:
    t = as_array(times, "times", ndim=1).astype(np.float64)
    check_finite(t, "times")
    if len(t) < 2 or t[0] != 0.0 or np.any(np.diff(t) <= 0):
        raise ValueError("`times` must increase strictly from 0 to T (at least two points)")
    return t


# ---------------------------------------------------------------------------------------------------------
# public entry point

#: solve_hjb's options: key -> (default, methods it applies to)
_BSDE = ("bsde",)
_OPTIONS: dict[str, tuple[Any, tuple[str, ...]]] = {
    "scheme": ("implicit", _BSDE), "theta": (1.0, _BSDE), "forward": ("ou", _BSDE),
    "implicit_solver": ("newton", _BSDE), "newton_iter": (1, _BSDE), "newton_tol": (1e-8, _BSDE),
    "ranks": (2, _BSDE), "max_rank": (8, _BSDE), "rank_tol": (1e-8, _BSDE), "regularization": (None, _BSDE),
    "sweeps": (1, _BSDE), "terminal": ("fit", _BSDE), "terminal_sweeps": (12, _BSDE),
    "design_mix": ((0.6, 0.3, 0.1), _BSDE), "pilot": ("mcmc", _BSDE), "pilot_steps": (200, _BSDE),
    "refine_paths": (10000, _BSDE), "control_variate": (True, _BSDE), "integrator": ("ou-exponential", _BSDE),
    "hermite_degree": (120, ("hermite",)), "hermite_tol": (1e-10, ("hermite",)),
}


def _o(key: str) -> str:
    return f"options['{key}']"


def _check_solver_options(options: Any, method: str) -> dict[str, Any]:
    """The validated ``options`` of :func:`solve_hjb`, with defaults filled in. Every key is checked whatever
    the method; a key of the other method is then refused."""
    given = check_options(options)
    unknown = sorted(k for k in given if k not in _OPTIONS)
    if unknown:
        raise ValueError(f"`options`: unknown keys {unknown}; known: {sorted(_OPTIONS)}")
    o = {k: given.get(k, default) for k, (default, _) in _OPTIONS.items()}
    o["scheme"] = check_option(o["scheme"], _o("scheme"), ("implicit", "explicit"))
    o["forward"] = check_option(o["forward"], _o("forward"), ("ou", "policy"))
    o["implicit_solver"] = check_option(o["implicit_solver"], _o("implicit_solver"), ("newton", "picard"))
    o["integrator"] = check_option(o["integrator"], _o("integrator"), ("ou-exponential", "euler"))
    o["theta"] = check_real(o["theta"], _o("theta"), low=0.0, high=1.0)
    if o["theta"] <= 0:
        raise ValueError(f"`{_o('theta')}` must be in (0, 1]; use the scheme 'explicit' for theta = 0")
    o["newton_iter"] = check_int(o["newton_iter"], _o("newton_iter"), minimum=1, maximum=_MAX_ITER)
    o["newton_tol"] = check_real(o["newton_tol"], _o("newton_tol"), low=0.0)
    o["ranks"] = check_int(o["ranks"], _o("ranks"), minimum=1, maximum=64)
    o["max_rank"] = check_int(o["max_rank"], _o("max_rank"), minimum=1, maximum=64)
    o["rank_tol"] = check_real(o["rank_tol"], _o("rank_tol"), low=0.0)
    o["sweeps"] = check_int(o["sweeps"], _o("sweeps"), minimum=1, maximum=_MAX_ITER)
    o["terminal_sweeps"] = check_int(o["terminal_sweeps"], _o("terminal_sweeps"), minimum=1, maximum=_MAX_ITER)
    o["terminal"] = check_option(o["terminal"], _o("terminal"), ("fit", "cross"))
    o["refine_paths"] = check_int(o["refine_paths"], _o("refine_paths"), minimum=10)
    o["control_variate"] = check_bool(o["control_variate"], _o("control_variate"))
    o["pilot"] = check_option(o["pilot"], _o("pilot"), ("mcmc", "broad"))
    o["pilot_steps"] = check_int(o["pilot_steps"], _o("pilot_steps"), minimum=0, maximum=_MAX_PILOT_STEPS)
    o["hermite_degree"] = check_int(o["hermite_degree"], _o("hermite_degree"), minimum=0,
                                    maximum=_MAX_HERMITE_DEGREE)
    o["hermite_tol"] = check_real(o["hermite_tol"], _o("hermite_tol"), low=0.0, high=1.0, low_open=True,
                                  high_open=True)
    reg = o["regularization"]
    if reg is not None and not isinstance(reg, dict):
        o["regularization"] = check_real(reg, _o("regularization"), low=0.0)
    mix = as_array(o["design_mix"], _o("design_mix"), ndim=1).astype(np.float64)
    check_finite(mix, _o("design_mix"))
    if mix.shape != (3,) or np.any(mix < 0) or not np.isclose(mix.sum(), 1.0):
        raise ValueError(f"`{_o('design_mix')}` must be three non-negative fractions summing to 1; got "
                         f"{o['design_mix']}")
    o["design_mix"] = tuple(mix)
    foreign = sorted(k for k in given if method not in _OPTIONS[k][1])
    if foreign:
        raise ValueError(f"`options`: {foreign} do not apply to method={method!r}")
    return o


@constraints(target="callable", T="real>0", n_steps="count", grading="real", times="array1d", method="option",
             basis="option", degree="int>=1", n_paths="count", refine="int>=0", design_samples="array2d",
             design="callable", loc="real", scale="real>0", rng="rng", workers="workers", progress="bool",
             callback="callable", options="mapping",
             **{"options.scheme": "option", "options.theta": "prob", "options.forward": "option",
                "options.implicit_solver": "option", "options.newton_iter": "count",
                "options.newton_tol": "real>=0", "options.ranks": "int>=1", "options.max_rank": "int>=1",
                "options.rank_tol": "real>=0", "options.regularization": "real>=0", "options.sweeps": "count",
                "options.terminal": "option", "options.terminal_sweeps": "count", "options.design_mix": "array1d",
                "options.pilot": "option", "options.pilot_steps": "int>=0", "options.refine_paths": "count",
                "options.control_variate": "bool", "options.integrator": "option",
                "options.hermite_degree": "int>=0", "options.hermite_tol": "prob_open"})
def solve_hjb(target: Any, *, T: float = 5.0, n_steps: int = 100, grading: float = 3.0, times: Any = None,
              method: str = "bsde", basis: str = "bspline", degree: int = 31, n_paths: int | None = None,
              refine: int = 1, design_samples: Any = None, design: Callable | None = None, loc: Any = None,
              scale: Any = None, rng: Any = None, workers: Any = 1, progress: bool = False,
              callback: Callable | None = None, options: dict | None = None) -> Result:
    """Solve the HJB equation of the OU-noised log-density of ``target`` backward in time.

    ``W_n(y) = log(rho~_{T - t_n} / gamma)(y)`` is computed on the time grid, one
    :class:`~numtk.ftt.FunctionalTT` per step, in the preconditioned coordinates ``y = (x - loc) / scale``
    (``rho~(y) = rho(loc + scale * y)``). Its gradient is the control of the generative SDE
    (:class:`ScoreBasedSampler`).

    Parameters
    ----------
    target : Target or callable
        A :class:`Target` (see :func:`gaussian`, :func:`funnel`, ...) or a vectorised ``log_density``
        callable ``(n, d) -> (n,)``; a callable needs ``Target.from_callable(f, dim)`` or a target with
        ``dim``.
    T, n_steps, grading : float, int, float
        Horizon, number of steps and the grading exponent of :func:`time_grid` (defaults 5, 100, 3).
    times : array_like, optional
        Explicit time grid ``0 = t_0 < ... < t_N = T``; overrides the three above.
    method : {'bsde', 'hermite'}, default 'bsde'
        BSDE regression (any target), or the exact Cole-Hopf/OU propagation in a Hermite basis
        (targets with ``has_hermite``; see :func:`hermite_solution`).
    basis : {'bspline', 'legendre', 'hermite'}, default 'bspline'
        The basis of the FunctionalTT ansatz ('bsde').
    degree : int, default 31
        Degree per coordinate ('bsde'; cubic B-splines get ``degree + 1`` functions).
    n_paths : int, optional
        Design points per step ('bsde'); default ``max(4000, 20 * ranks**2 * (degree + 1))``.
    refine : int, default 1
        Rounds of refinement ('bsde'): sample ``options['refine_paths']`` paths from the current solution,
        importance-resample them into a new pilot, and solve again; the solution with the higher ESS is
        kept.
    design_samples : array_like of shape (n, d), optional
        Approximate target samples for the design law of the first round ('bsde'; tests may pass exact
        samples; without them the first round uses ``options['pilot']``).
    design : callable, optional
        ``design(tau, n, rng) -> (n, d)``: the regression points at noising time ``tau`` (in the target's
        coordinates), replacing the pilot, ``design_samples`` and ``options['design_mix']``; for problems
        where it is known where the value function is needed, such as the Han-Jentzen-E HJB equation (see
        the sampling tutorial) whose value is wanted at one point. The basis box is the design's hull;
        needs ``refine=0``.
    loc, scale : float or array_like of shape (d,), optional
        Preconditioning ``x = loc + scale * y``; default 0 and 1 (``'hermite'``: from ``target.bounds`` so
        the mass lies within about +-2.5).
    rng : {None, int, numpy.random.Generator}, optional
        Randomness of the designs, transitions, refinement paths and ALS.
    workers : int or map-like callable, default 1
        An int is the number of native threads of the FTT fits and evaluations (``-1``: every core). A
        map-like callable (``multiprocessing.Pool(k).map``, a dask client's map) instead spreads the
        target's log-density evaluations (design points, pilot chains, refinement paths) over chunks of
        8192 points: worth it for expensive targets only (each call ships the chunks to the workers).
    progress : bool, default False
        A tqdm bar over the time steps.
    callback : callable, optional
        ``callback(intermediate_result)`` after each time step ('bsde'), with a ``Result``
        holding ``n_iter`` (time steps fitted so far, over all rounds), ``round``, ``step`` (n), ``t``,
        ``W`` (the step's fit ``W_n``), ``rmse`` (its regression RMSE) and ``diagnostics`` (the step's
        entry). Raise ``StopIteration`` to stop: the pass ends, the steps not reached are ``None``,
        ``log_Z_value`` is NaN and ``status`` is ``'callback'``.
    options : dict, optional
        Solver knobs; every key is checked whatever the method, and a key of the other method is refused.
        'bsde':

        - ``scheme`` ({'implicit', 'explicit'}, 'implicit'): implicit theta-scheme (stable where the
          explicit one has a CFL-like limit) or explicit.
        - ``theta`` (float in (0, 1], 1.0): implicitness; 1/2 halves the O(dt) value bias but was less
          stable.
        - ``forward`` ({'ou', 'policy'}, 'ou'): forward process of the BSDE (the one-step law behind each
          regression target); see Notes.
        - ``implicit_solver`` ({'newton', 'picard'}, 'newton'): Newton-linearised regression, or Picard
          fixed-point iterations (they diverge where ``dt * Lip`` is not small; kept for comparison).
        - ``newton_iter`` (int, 1), ``newton_tol`` (float, 1e-8): iterations per step; they stop when the
          design-RMS change is below ``newton_tol`` times the targets' standard deviation. One iteration
          linearises around the previous step's solution.
        - ``ranks`` (int, 2), ``max_rank`` (int, 8), ``rank_tol`` (float, 1e-8): initial ranks, rank cap and
          truncation threshold of the FunctionalTT's rank adaptation.
        - ``regularization`` (float or dict): the FunctionalTT's penalty; default
          ``{'ridge': 1e-8, 'h2': 1e-4}`` for B-splines (the terminal fit uses a tenth of the curvature
          penalty) and ridge 1e-8 for the other bases.
        - ``sweeps`` (int, 1): ALS sweeps per regression (warm-started from the previous step); the rank
          enrichment runs only after a sweep that stalled, so with one sweep every step keeps the terminal
          condition's ranks.
        - ``terminal`` ({'fit', 'cross'}, 'fit'): the terminal condition ``W_N = log rho~ - log gamma`` is
          fitted by ALS on the tau = 0 design, or interpolated by :func:`numtk.ftt.tt_cross` on the basis
          box (a few thousand evaluations of the log-density, which must be finite there; otherwise it
          warns and fits).
        - ``terminal_sweeps`` (int, 12): largest number of ALS sweeps of the terminal fit (it stops earlier
          when the validation error stops improving; the rank adaptation adds at most one rank per sweep).
        - ``design_mix`` (3 floats, (0.6, 0.3, 0.1)): fractions of noised pilot samples, N(0, I) points and
          the uniform layer (bulk points with two coordinates redrawn uniformly on the box); ``(1, 0, 0)``
          for steep targets in many dimensions.
        - ``pilot`` ({'mcmc', 'broad'}, 'mcmc'), ``pilot_steps`` (int, 200): the design law of the first
          round without ``design_samples``: the end points of ``refine_paths`` short MCMC chains (MALA if
          the target has a gradient, random-walk Metropolis otherwise, started from a broad Gaussian over
          the box), or that broad Gaussian itself.
        - ``refine_paths`` (int, 10000): paths per refinement round (and pilot chains).
        - ``control_variate`` (bool, True): subtract the martingale term
          ``grad W_{n+1}(mu) . (X_{n+1} - mu)`` from the targets; turning it off reproduces the divergence
          near the target end and warns.
        - ``integrator`` ({'ou-exponential', 'euler'}, 'ou-exponential'): integrator of the refinement
          paths (see :class:`ScoreBasedSampler`).

        'hermite': ``hermite_degree`` (int, 120) and ``hermite_tol`` (float in (0, 1), 1e-10), the degree
        per coordinate and the tail-energy tolerance of :func:`hermite_solution`.

    Returns
    -------
    res : Result
        The same fields whatever the method:

        times : ndarray of shape (N + 1,)
            The time grid.
        W : list of FunctionalTT or None
            ``W_n`` per step, in preconditioned coordinates; ``None`` for 'hermite' (see ``phi``) and for
            the steps a callback did not let the solve reach.
        V : list of FunctionalTT or None
            The same steps in the original coordinates, ``V_n(x) = W_n(y) + log gamma(y)`` (see
            :func:`value_function`; ``V_N`` is ``log rho`` on the box); ``None`` where ``W`` is, and for
            ``degree < 2``.
        phi : HermiteOUSolution or None
            The exact propagation ('hermite'); None for 'bsde'.
        log_Z_value : float
            The value estimator ``log E exp W_0(xi)`` plus ``sum log scale`` ('bsde': O(dt)-biased, a
            diagnostic; 'hermite': the exact ``log a_0`` of the truncated series); NaN when a callback
            stopped the solve.
        log_Z_value_stderr : float
            Its Monte Carlo standard error (0 for 'hermite').
        loc, scale : ndarray of shape (d,)
            The preconditioning.
        box : ndarray of shape (d, 2) or None
            The basis box ('bsde'); None for 'hermite'.
        tau_min : float or None
            The noising time below which the truncated Hermite series is not trusted ('hermite'); None
            for 'bsde'.
        ess : float or None
            ESS of the refinement paths of the returned round; None without refinement and for 'hermite'.
        diagnostics : list of dict
            Per step ('bsde'; empty for 'hermite'): ``step``, ``t``, ``ranks``, ``newton_iter``,
            ``rmse`` (regression RMSE), ``time``, the trust box ``trust`` (the design's 0.1%-99.9%
            range per coordinate) and ``grad_bound`` (the largest gradient norm of the fit on its
            design), which guard the sampler's control; the terminal step also ``terminal_residual``.
        rounds : list of dict
            ``{'round', 'ess'}`` per refinement round ('bsde'; empty for 'hermite').
        method : str
            'bsde' or 'hermite'.
        n_iter : int
            Time steps fitted, over every round ('bsde'); 0 for 'hermite' (closed form, no iteration).
        success : bool
            True unless a callback stopped the solve.
        status : str
            ``'complete'`` (every step of every round ran; always for 'hermite') or ``'callback'``
            (stopped by ``StopIteration`` from the callback).
        message : str
            A sentence saying the same.
        wall_time : float
            Seconds.

    Notes
    -----
    The defaults are the choices that made the BSDE solve stable in the measurements recorded in the
    sampling tutorial ("What makes the BSDE solve stable", with the numbers behind each default). A
    few of them, in short:

    - ``newton_iter``: on a 2-D Gaussian, 3 iterations of 2 sweeps gave the same score error (1.2e-2 at
      N = 50, dominated by the O(dt) time error) as one iteration, at 4 times the cost.
    - ``sweeps``: on the funnel the ranks stayed 2 with two sweeps (an enriched model must validate 1%
      better at once) and grew to 4 with three, at four times the cost.
    - ``terminal_sweeps``: targets of high rank need more; GMM-40 gave +0.04 +- 0.15 (ESS 0.004) with 12
      and -0.02 +- 0.03 (ESS 0.085) with 30 (seed 0).
    - ``terminal='cross'`` resolves all of the box, where a fit sees only the design: the funnel
      (d = 10) gave about -0.57 with it and failed with ``'fit'``; the many-well (d = 32) 0.001 +- 0.05 in
      135 s (``'fit'``: 0.014 +- 0.063, 138 s), the double well (d = 50) 0.013 +- 0.016 in 168 s (``'fit'``:
      -0.018 +- 0.016, 280 s); but GMM-40, whose log-density is not of low rank on the whole box,
      0.09 +- 0.10 (``'fit'``: -0.02 +- 0.03).
    - ``design_mix=(1, 0, 0)``: on the many-well target (d = 8 and 32) the N(0, I) and uniform layers
      ruined the fit, and the funnel (d = 10) with ``terminal='cross'`` failed with them (-98) but not
      without.
    - ``pilot='broad'`` is fine in a few dimensions; in d = 32 it puts the design where the target has
      no mass and the many-well solve failed.
    - ``forward='policy'`` (semi-Lagrangian, experimental): the drift ``-x + 2 q`` with the policy
      ``q = grad W_{n+1}(X_n)`` (guarded by the trust box and gradient bound of step n + 1, as in the
      sampler), so the transition follows the generative dynamics; the driver becomes
      ``|grad W|^2 - 2 q . grad W`` and, since ``q`` is close to ``grad W_n``, the Newton step's
      directional term ``2 (g - q) . grad W`` is small. It doubled the ESS on multimodal targets and
      diverged on steep targets in many dimensions (the tutorial's "The forward process").
    - The penalty ``regularization`` means the same in every dimension (the other cores are orthonormal
      under the uniform probability on the box).

    References
    ----------
    .. [1] "Leveraging Low-Rank Structures for High-Dimensional Score-Based Sampling", ICML 2026.
    .. [2] L. Richter, L. Sallandt, N. Nuesken, "Solving high-dimensional parabolic PDEs using the
           tensor train format", ICML 2021.

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.sampling import gaussian, solve_hjb
    >>> target = gaussian(mean=[1.0], cov=[[0.5]])
    >>> sol = solve_hjb(target, n_steps=20, degree=15, refine=0, rng=0)
    >>> len(sol.W), sol.W[0].ranks_, sol.status, sol.n_iter
    (21, (1, 1), 'complete', 20)
    >>> abs(sol.log_Z_value - target.log_Z) < 0.2   # the value estimator's O(dt) bias; see ScoreBasedSampler
    True

    Solver knobs go into ``options``; a callback can stop the solve:

    >>> def stop_after_five(res):
    ...     if res.n_iter == 5:
    ...         raise StopIteration
    >>> sol = solve_hjb(target, n_steps=20, degree=15, refine=0, rng=0, callback=stop_after_five,
    ...                 options={"terminal": "cross", "sweeps": 2})
    >>> sol.status, sol.success, sol.n_iter, sol.W[0] is None
    ('callback', False, 5, True)
    """
    from numtk.sampling._target import as_target

    start = time.perf_counter()
    target = as_target(target)
    d = target.dim
    method = check_option(method, "method", ("bsde", "hermite"))
    o = _check_solver_options(options, method)
    grid = _check_time_grid(times) if times is not None else time_grid(T, n_steps, grading)
    basis = check_option(basis, "basis", ("legendre", "hermite", "bspline"))
    degree = check_int(degree, "degree", minimum=1, maximum=_MAX_DEGREE)
    refine = check_int(refine, "refine", minimum=0, maximum=_MAX_REFINE)
    progress = check_bool(progress, "progress")
    check_callback(callback)
    if not callable(workers):
        n_threads(workers)
    ranks, refine_paths = o["ranks"], o["refine_paths"]
    regularization = o["regularization"]
    if regularization is None:
        regularization = {"ridge": 1e-8, "h2": 1e-4} if basis == "bspline" else 1e-8
    if n_paths is None:
        n_paths = max(4000, 20 * ranks * ranks * (degree + 1))
    n_paths = check_int(n_paths, "n_paths", minimum=50)
    # the design's basis values (n_paths, d, degree + 1) and the regression's temporaries, per step
    check_size(n_paths, 8 * d * (degree + 2) * 4, "n_paths")
    # refinement paths and pilot chains: (refine_paths, d) points and their temporaries
    check_size(refine_paths, 8 * (d + 1) * 8, "options['refine_paths']")
    rng = normalize_rng(rng)

    loc_a = np.zeros(d) if loc is None else per_coordinate(loc, d, "loc")
    scale_a = np.ones(d) if scale is None else per_coordinate(scale, d, "scale")
    if np.any(scale_a <= 0):
        raise ValueError("`scale` must be positive")
    with np.errstate(over="ignore", invalid="ignore"):
        reach = np.abs(loc_a) + 1e3 * scale_a  # the preconditioned box and the paths stay well within +-1e3
    if not np.all(np.isfinite(reach)):
        raise ValueError("`loc` and `scale` are so large that x = loc + scale * y overflows for the "
                         "preconditioned points |y| <= 1e3")

    if method == "hermite":
        from numtk.sampling._hermite_ou import hermite_solution

        sol = hermite_solution(target, degree=o["hermite_degree"], loc=None if loc is None else loc_a,
                               scale=None if scale is None else scale_a, hermite_tol=o["hermite_tol"],
                               times=grid, T=float(grid[-1]))
        n = len(grid)
        return Result(times=grid, W=[None] * n, V=[None] * n, phi=sol, log_Z_value=float(sol.log_Z),
                      log_Z_value_stderr=0.0, loc=np.asarray(sol.loc), scale=np.asarray(sol.scale), box=None,
                      tau_min=float(sol.tau_min(criterion="coordinate")), ess=None, diagnostics=[], rounds=[],
                      method="hermite", n_iter=0, success=True, status="complete",
                      message="the exact Cole-Hopf/OU propagation of the Hermite coefficients (no iteration)",
                      wall_time=time.perf_counter() - start)

    if not o["control_variate"]:
        warnings.warn("options['control_variate']=False: without the martingale control variate the regression "
                      "is known to diverge near the target end", NumtkWarning, stacklevel=2)
    # an int sets native threads (FTT kernels); a map-like callable carries the target's evaluations
    threads = 1 if callable(workers) else n_threads(workers)
    pre = _Preconditioned(target, loc_a, scale_a, workers if callable(workers) else None)
    bounds = getattr(target, "bounds", None)
    bounds_y = None if bounds is None else (np.asarray(bounds, dtype=np.float64) - loc_a[:, None]) / scale_a[:, None]
    pilot = None
    design_box = None
    if design is not None:
        if not callable(design):
            raise TypeError(f"`design` must be a callable design(tau, n, rng); got {type(design).__name__}")
        if design_samples is not None:
            raise ValueError("give either `design` or `design_samples`, not both")
        if refine:
            raise ValueError("`design` fixes the regression points of every step: use refine=0")
        # the basis box: the hull of the design over the horizon
        taus = float(grid[-1]) - np.linspace(grid[0], grid[-1], 5)
        pooled = np.concatenate([(_user_design(design, tau, n_paths, rng, d) - loc_a) / scale_a for tau in taus])
        design_box = _box(None, pooled, d)
    elif design_samples is not None:
        ds = as_array(design_samples, "design_samples", ndim=2).astype(np.float64)
        check_finite(ds, "design_samples")
        if ds.shape[1] != d or len(ds) < 2:
            raise ValueError(f"`design_samples` must have shape (n >= 2, {d}); got {ds.shape}")
        pilot = (ds - loc_a) / scale_a
    elif o["pilot"] == "mcmc" and o["pilot_steps"] > 0:
        pilot = _mcmc_pilot(pre, d, _box(bounds_y, None, d), refine_paths, o["pilot_steps"], rng,
                            bool(getattr(target, "has_grad", False)))
        if len(pilot) < 2:
            pilot = None  # every chain sits where the density is zero: fall back to the broad Gaussian
    opts = dict(n_paths=n_paths, sweeps=o["sweeps"], terminal_sweeps=o["terminal_sweeps"], terminal=o["terminal"],
                regularization=regularization, max_rank=o["max_rank"], rank_tol=o["rank_tol"], basis=basis,
                degree=degree, ranks=ranks, design_mix=o["design_mix"], scheme=o["scheme"], theta=o["theta"],
                forward=o["forward"], newton_iter=o["newton_iter"], newton_tol=o["newton_tol"],
                implicit_solver=o["implicit_solver"], control_variate=o["control_variate"], threads=threads,
                design=design, loc=loc_a, scale=scale_a)

    # the callback protocol of _bsde_pass: step_done(n, W_n, diagnostics) returns True to stop
    count = {"n_iter": 0, "round": 0}

    def step_done(n, Wn, diag):
        count["n_iter"] += 1
        if callback is None:
            return False
        try:
            callback(Result(n_iter=count["n_iter"], round=count["round"], step=n, t=diag["t"], W=Wn,
                            rmse=diag["rmse"], diagnostics=diag))
        except StopIteration:
            return True
        return False

    best = None
    rounds = []
    stopped = False
    for r in range(refine + 1):
        count["round"] = r
        box = design_box if design_box is not None else _box(bounds_y, pilot, d)
        W, diags, stopped = _bsde_pass(pre.log_density, d, grid, pilot, box, opts, rng, progress, step_done)
        info = {"round": r, "box": box, "W": W, "diagnostics": diags, "ess": None}
        if stopped or refine == 0:
            rounds.append(info)
            best = info
            break

        Y, logw = simulate_paths(lambda y, n: trusted_gradient(W[n], y, diags[n]), grid, pre.log_density,
                                 refine_paths, rng, dim=d, integrator=o["integrator"])
        wn = np.exp(logw - np.max(logw))
        ess = float(wn.sum() ** 2 / (len(wn) * np.sum(wn ** 2)))
        info["ess"] = ess
        rounds.append(info)
        if best is not None and ess <= best["ess"]:
            break  # no improvement: stop refining
        best = info
        if r < refine:
            pilot = Y[systematic_resample(wn / wn.sum(), len(Y), rng)]
    W = best["W"]
    lz, lz_se = (math.nan, math.nan) if W[0] is None else _value_log_Z(W[0], d, rng)
    shift = float(np.sum(np.log(scale_a)))
    # V needs the quadratic log gamma in the basis (degree >= 2)
    V = [None if w is None or degree < 2 else value_function(w, loc_a, scale_a) for w in W]
    status, message = (("callback", "stopped by the callback") if stopped else
                       ("complete", f"every time step of {len(rounds)} round(s) solved"))
    return Result(times=grid, W=W, V=V, phi=None, log_Z_value=lz + shift, log_Z_value_stderr=lz_se, loc=loc_a,
                  scale=scale_a, box=best["box"], tau_min=None, ess=best["ess"], diagnostics=best["diagnostics"],
                  rounds=[{"round": i["round"], "ess": i["ess"]} for i in rounds], method="bsde",
                  n_iter=count["n_iter"], success=not stopped, status=status, message=message,
                  wall_time=time.perf_counter() - start)
