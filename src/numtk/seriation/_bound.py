"""Finite-sample Kendall-tau recovery bound for STAGE (derived for numtk; not the bound of the STAGE paper)."""

from __future__ import annotations

import functools
import math

import numpy as np

from numtk._lib import Result
from numtk._lib._constraints import constraints
from numtk._lib._validation import as_array, check_finite, check_int, check_real

__all__ = ["recovery_bound"]

# Calibration of the heuristic ingredients (see docs/tutorial/seriation_bound.rst).
_LAMBDA_SAFETY = 1.5   # continuum Fiedler value (pi/ell)^2 S_2/n overestimates the random-graph one by ~1.2-1.35x
_EDGE_SPREAD = 1.5     # longest k-NN edge ~ 1.5 k/(n p_min) (one-sided ends, sampling gaps); measured 1.2-1.3


def _solve_term(p_max: float, R: float) -> float:
    """min over eps of 4 R^2/eps^2 + 8 p eps = 12 (p R)^(2/3) (Lemma K, mean-square form)."""
    return 12.0 * (p_max * R) ** (2.0 / 3.0)


def _fiedler(W) -> float:
    """Second-smallest eigenvalue of the graph Laplacian of the symmetric weight matrix ``W``."""
    import scipy.sparse as sp

    W = sp.csr_matrix(W)
    n = W.shape[0]
    deg = np.asarray(W.sum(axis=1)).ravel()
    L = sp.diags(deg) - W
    if n <= 600:
        return float(np.linalg.eigvalsh(L.toarray())[1])
    from scipy.sparse.linalg import eigsh

    shift = -1e-6 * float(deg.mean())  # L - shift I is positive definite: shift-invert without a singular factor
    vals = eigsh(L.tocsc(), k=2, sigma=shift, which="LM", return_eigenvectors=False)
    return float(np.sort(vals)[1])


_SCALES = ("length", "noise", "curvature", "bandwidth", "density_max", "density_min", "edge_error", "fiedler_value",
           "total_weight", "n_samples", "n_features")


def _finite_or_refused(func):
    """Turn an overflow of the closed-form evaluation (OverflowError, ZeroDivisionError, or an infinite or NaN
    value in the result) into a ValueError that lists the scale parameters given."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        def refuse():
            given = ", ".join(f"`{k}`={kwargs[k]!r}" for k in _SCALES if kwargs.get(k) is not None)
            return ValueError(f"recovery_bound: the bound is not representable in float64 at these scales ({given}); "
                              "it is unchanged by a common change of the unit of length (length, noise, bandwidth, "
                              "edge_error times c; curvature, density_max, density_min divided by c): choose one "
                              "in which the values are moderate")

        try:
            res = func(*args, **kwargs)
        except (OverflowError, ZeroDivisionError):
            raise refuse() from None
        values = [res[k] for k in ("tau_lower", "tau_lower_unclipped", "bound", "R", "edge_error", "tangent_error",
                                   "tangent_error_max", "bandwidth", "edge_length")] + list(res["terms"].values())
        values += [res[k] for k in ("fiedler_value", "total_weight") if res[k] is not None]
        if not all(math.isfinite(v) for v in values):
            raise refuse()
        return res

    return wrapper


@constraints(result="option", X="array2d", length="real>0", noise="real>=0", curvature="real>=0",
             n_samples="int>=2", n_features="int>=1", n_neighbors="int>=1", tangent_neighbors="int>=2",
             bandwidth="real>0", density_max="real>0", density_min="real>0", tangent_error="real>=0",
             edge_error="real>=0", fiedler_value="real>0", total_weight="real>0", confidence="prob_open")
@_finite_or_refused
def recovery_bound(result=None, X=None, *, length, noise, curvature, n_samples=None, n_features=None,
                   n_neighbors=None, tangent_neighbors=None, bandwidth=None, density_max=None,
                   density_min=None, tangent_error=None, edge_error=None, fiedler_value=None,
                   total_weight=None, confidence=None) -> Result:
    r"""Lower bound on the expected Kendall agreement of STAGE with the true order.

    Evaluates an upper bound on :math:`E[1 - |\tau|]` (equivalently a lower bound on :math:`E|\tau|`)
    for :func:`stage` on points :math:`x_i = \gamma(s_i) + \varepsilon_i` near a curve of length
    :math:`\ell` and curvature at most :math:`\kappa`, with arc-length positions i.i.d. of density at most
    :math:`p_{\max}` and isotropic Gaussian noise :math:`N(0, \sigma^2 I_d)`. The bound is
    **derived for numtk; it is not the bound of the STAGE paper** (which was not available). It is a sum
    of three terms,

    .. math::

        E[1 - |\tau|] \le \underbrace{\frac{4 p_{\max}\sigma}{\sqrt\pi}}_{\text{noise}}
        + \underbrace{12\,(p_{\max} R)^{2/3}}_{\text{solve}}
        + \underbrace{2\,P(\text{sync fails})}_{\text{sync}},
        \qquad R = \eta\,\sqrt{\frac{W}{n\,\lambda_2}},

    where :math:`\eta` is the root-mean-square non-gradient error of the signed increments on the graph
    edges, :math:`W` the total edge weight and :math:`\lambda_2` the algebraic connectivity of the graph.

    Parameters
    ----------
    result : Result, optional
        A fitted :func:`stage` result (a Result with a ``graph``; other objects raise TypeError). Its graph supplies ``n_samples`` (distinct rows), ``total_weight``
        and ``fiedler_value`` (computed by a shift-invert eigensolver), and its ``tangent_neighbors`` the
        local-PCA size, unless given explicitly.
    X : array_like, shape (n_samples, n_features), optional
        The data ``result`` was fitted on (only with ``result``): gives ``n_features`` and, from the
        lengths of the graph edges (noise-corrected), the edge scales ``bandwidth`` and the rms edge length.
    length : float
        Curve length :math:`\ell` (> 0).
    noise : float
        Noise standard deviation per coordinate :math:`\sigma` (>= 0).
    curvature : float
        Upper bound :math:`\kappa` on the curvature (>= 0; 0 for a straight segment).
    n_samples : int, optional
        Number of points n (>= 3). Required without ``result``. Only enters the formulas: any size
        is accepted (nothing is allocated). Inputs at scales where the bound overflows float64 are
        refused with a ValueError (the bound is invariant to the unit of length).
    n_features : int, optional
        Ambient dimension d (>= 1). Required without ``X`` unless both ``tangent_error`` and ``edge_error``
        are given.
    n_neighbors : int, optional
        k of the k-NN graph; sets the edge scales when neither ``bandwidth`` nor ``X`` is given:
        longest edge :math:`h = 1.5\,k/(n p_{\min})`, rms edge length :math:`k/(2\sqrt3\,n p_{\max})`.
    tangent_neighbors : int, optional
        Local-PCA neighbourhood size :math:`k_p` (half-length :math:`r = k_p/(2 n p)` in arc length).
        Required unless ``tangent_error`` is given or ``result`` holds it.
    bandwidth : float, optional
        Longest arc length h of a graph edge (overrides the value derived from ``n_neighbors``/``X``).
    density_max, density_min : float, optional
        Bounds on the sampling density per unit arc length; default :math:`1/\ell` (uniform). Must satisfy
        ``density_min <= 1/length <= density_max``.
    tangent_error : float, optional
        A bound :math:`\theta` (radians, in [0, pi/2)) on the tangent angle errors, replacing the local-PCA
        heuristic (then it also replaces the maximal error in the synchronisation check).
    edge_error : float, optional
        The rms non-gradient edge error :math:`\eta`, replacing the heuristic of the Notes.
    fiedler_value : float, optional
        :math:`\lambda_2` of the graph Laplacian (> 0); requires ``total_weight``. Default: computed from
        ``result``, else the continuum model :math:`(\pi/\ell)^2 (W/n)\bar\Delta^2 / 1.5`.
    total_weight : float, optional
        Sum of the edge weights W (each undirected edge once).
    confidence : float, optional
        In (0, 1): return a high-probability bound (on :math:`1 - |\tau|` itself, holding with at least
        this probability) instead of the bound on the expectation.

    Returns
    -------
    res : Result
        With fields

        tau_lower : float
            The lower bound on :math:`E|\tau|` (with ``confidence``: on :math:`|\tau|` with that
            probability), clipped to [0, 1].
        tau_lower_unclipped : float
            :math:`1 -` ``bound``.
        bound : float
            The upper bound on :math:`E[1 - |\tau|]`, unclipped.
        terms : dict
            Its terms: ``'noise'``, ``'solve'``, ``'sync'`` and, with ``confidence``,
            ``'deviation'``.
        R : float
            The embedding-error scale.
        edge_error : float
            :math:`\eta`, the rms non-gradient edge error used.
        tangent_error : float
            The rms tangent error :math:`\theta` used.
        tangent_error_max : float
            The maximal tangent error used in the synchronisation check.
        fiedler_value : float or None
            :math:`\lambda_2` used (given, or computed from ``result``); None when the continuum
            model was used instead.
        total_weight : float or None
            The total edge weight W used; None with the continuum model.
        bandwidth : float
            The longest edge h used, in arc length.
        edge_length : float
            The rms edge length used, in arc length.
        valid : bool
            False when the synchronisation or the tangent-detection condition fails: then
            ``terms['sync']`` is 2 and the bound is vacuous.
        confidence : float or None
            The ``confidence`` given (None: a bound on the expectation).
        assumptions : tuple of str
            The heuristic steps used, as text.

    Notes
    -----
    The derivation (full text in the tutorial "A recovery bound for STAGE") has rigorous and heuristic
    steps.

    *Rigorous.* (K) Writing :math:`f = s + u + e'` with :math:`u_i = \langle \tau(s_i), \varepsilon_i\rangle`
    (independent of :math:`s_i`, :math:`N(0, \sigma^2)`), a discordant pair with both embedding errors
    :math:`|e'| \le \epsilon` needs :math:`|s_i - s_j| < U_{ij} + 2\epsilon` with :math:`U_{ij}` a
    symmetric :math:`N(0, 2\sigma^2)` independent of the positions, which has probability at most
    :math:`2 p_{\max}(\sigma/\sqrt\pi + 2\epsilon)`; at most :math:`n\,\mathrm{rms}(e')^2/\epsilon^2`
    points have :math:`|e'_i| > \epsilon`. Optimising :math:`\epsilon` gives the noise and solve terms
    with :math:`R^2 = E[\mathrm{rms}(e')^2]`. (L) The along-tangent noise is an exact gradient and passes
    the Laplacian solve unchanged; the rest satisfies
    :math:`\mathrm{rms}(e') \le \|W_E^{1/2}\eta'\| / \sqrt{n \lambda_2}`. (S) If every edge has
    :math:`\theta_i + \theta_j + \kappa\,\Delta_{ij} < \pi/2` the synchronised signs are exact.
    (E, geometric part) for exact tangents the increment error is at most :math:`\kappa^2\Delta^3/6`;
    a tangent error :math:`\theta` adds at most :math:`\Delta\theta^2/2 + \theta\kappa\Delta^2/2` plus a
    noise cross term.

    *Heuristic.* The size of the tangent errors (local-PCA perturbation:
    :math:`\theta \approx \sqrt3\,(\sigma/r)\sqrt{d/k_p}` plus a curvature bias), the noise cross term
    :math:`\theta\sigma\sqrt{2d}` (treated as if :math:`\theta` were independent of the noise), the
    synchronisation check (a Gaussian maximum over the n tangents), the edge scales of a random k-NN
    graph and, without a graph, the continuum model of :math:`\lambda_2`; the graph is treated as
    fixed when taking expectations. The bound is conservative (the noise term is the exact first-order
    noise floor :math:`4\sigma/(\ell\sqrt\pi)` for uniform sampling; the solve term is loose by one to
    two orders of magnitude) and vacuous at moderate noise.

    References
    ----------
    .. [1] X. Jiang, L.-H. Lim, Y. Yao, Y. Ye, "Statistical ranking and combinatorial Hodge theory",
       Math. Program. 127, 203-244, 2011.
    .. [2] D. N. Kaslovsky, F. G. Meyer, "Non-asymptotic analysis of tangent space perturbation",
       Information and Inference 3, 134-187, 2014.
    .. [3] A. Singer, H.-T. Wu, "Vector diffusion maps and the connection Laplacian", Comm. Pure Appl.
       Math. 65, 1067-1144, 2012.
    .. [4] W. Hoeffding, "Probability inequalities for sums of bounded random variables", J. Amer.
       Statist. Assoc. 58, 13-30, 1963.

    Examples
    --------
    A unit segment in 3-D, 1000 points, noise 0.001, k = 15 and 45-point tangent neighbourhoods:

    >>> from numtk.seriation import recovery_bound
    >>> res = recovery_bound(n_samples=1000, length=1.0, noise=0.001, curvature=0.0, n_features=3,
    ...                      n_neighbors=15, tangent_neighbors=45)
    >>> res.valid, round(res.tau_lower, 3), round(res.terms["noise"], 5)
    (True, 0.673, 0.00226)

    From a fitted :func:`stage` result (graph quantities computed from its graph):

    >>> from numtk.seriation import make_curve, order_agreement, stage
    >>> X, t = make_curve("line", n_samples=1000, n_features=3, noise=0.001, rng=0)
    >>> fit = stage(X, n_neighbors=15, tangent_neighbors=45)
    >>> res = recovery_bound(fit, X, length=1.0, noise=0.001, curvature=0.0)
    >>> bool(order_agreement(fit.order, t) >= res.tau_lower > 0.5)
    True
    """
    ell = check_real(length, "length", low=0.0, low_open=True)
    sigma = check_real(noise, "noise", low=0.0)
    kappa = check_real(curvature, "curvature", low=0.0)
    uniform = 1.0 / ell
    p_max = uniform if density_max is None else check_real(density_max, "density_max", low=0.0, low_open=True)
    p_min = uniform if density_min is None else check_real(density_min, "density_min", low=0.0, low_open=True)
    if p_max < uniform * (1 - 1e-12):
        raise ValueError(f"`density_max` must be at least 1/length = {uniform}; got {p_max}")
    if p_min > uniform * (1 + 1e-12):
        raise ValueError(f"`density_min` must be at most 1/length = {uniform}; got {p_min}")
    delta = None
    if confidence is not None:
        delta = 1.0 - check_real(confidence, "confidence", low=0.0, high=1.0, low_open=True, high_open=True)
    if tangent_error is not None:
        tangent_error = check_real(tangent_error, "tangent_error", low=0.0, high=math.pi / 2, high_open=True)
    if edge_error is not None:
        edge_error = check_real(edge_error, "edge_error", low=0.0)
    if fiedler_value is not None:
        fiedler_value = check_real(fiedler_value, "fiedler_value", low=0.0, low_open=True)
        if total_weight is None:
            raise ValueError("`total_weight` is required with `fiedler_value`")
    if total_weight is not None:
        total_weight = check_real(total_weight, "total_weight", low=0.0, low_open=True)
    if bandwidth is not None:
        bandwidth = check_real(bandwidth, "bandwidth", low=0.0, low_open=True)
    if n_neighbors is not None:
        n_neighbors = check_int(n_neighbors, "n_neighbors", minimum=1)
    if tangent_neighbors is not None:
        tangent_neighbors = check_int(tangent_neighbors, "tangent_neighbors", minimum=2)
    if n_features is not None:
        n_features = check_int(n_features, "n_features", minimum=1)

    edge_rms = None  # rms arc length of the edges (weighted), measured from X when given
    fit_points = None
    if result is not None:
        graph = getattr(result, "graph", None)
        if graph is None or not hasattr(graph, "shape"):
            raise TypeError("`result` must be a Result of numtk.seriation.stage (with a `graph`)")
        m = graph.shape[0]
        if n_samples is None:
            n_samples = m
        if tangent_neighbors is None and getattr(result, "tangent_neighbors", 0):
            tangent_neighbors = int(result.tangent_neighbors)
            # large inputs fit each tangent to fewer points of a thinned cloud spanning the same scale
            fit_points = int(getattr(result, "tangent_fit_points", 0) or tangent_neighbors)
        import scipy.sparse as sp

        upper = sp.triu(sp.csr_matrix(graph), k=1).tocoo()
        if fiedler_value is None:
            total_weight = float(upper.data.sum())
            fiedler_value = _fiedler(graph)
            if not fiedler_value > 0:
                raise ValueError("the graph of `result` is disconnected (fiedler value 0)")
        if X is not None:
            X = as_array(X, "X", ndim=2, kinds="iuf").astype(np.float64, copy=False)
            check_finite(X, "X")
            inverse = np.asarray(result.inverse)
            if X.shape[0] != inverse.size:
                raise ValueError(f"`X` must have the {inverse.size} rows `result` was fitted on; got {X.shape[0]}")
            if n_features is None:
                n_features = X.shape[1]
            first = np.empty(m, dtype=np.int64)
            first[inverse[::-1]] = np.arange(inverse.size)[::-1]
            U = X[first]
            chord2 = np.einsum("ed,ed->e", U[upper.col] - U[upper.row], U[upper.col] - U[upper.row])
            arc2 = np.maximum(chord2 - 2.0 * X.shape[1] * sigma ** 2, 0.0)  # remove the noise's share
            if upper.nnz:
                edge_rms = float(math.sqrt(np.sum(upper.data * arc2) / np.sum(upper.data)))
                if bandwidth is None:
                    bandwidth = float(math.sqrt(arc2.max()))
    elif X is not None:
        raise ValueError("`X` is only used together with `result`")
    if n_samples is None:
        raise ValueError("`n_samples` is required without `result`")
    n = check_int(n_samples, "n_samples", minimum=3)
    if n_neighbors is not None and n_neighbors > n - 1:
        raise ValueError(f"`n_neighbors` must be at most n_samples - 1 = {n - 1}; got {n_neighbors}")
    if tangent_neighbors is not None and tangent_neighbors > n:
        raise ValueError(f"`tangent_neighbors` must be at most n_samples = {n}; got {tangent_neighbors}")

    # Edge scales: longest edge h and rms edge length (both in arc length).
    if edge_rms is None or edge_rms <= 0:
        if n_neighbors is not None:
            edge_rms = n_neighbors / (2.0 * math.sqrt(3.0) * n * p_max)
        elif bandwidth is not None:
            edge_rms = bandwidth / (3.0 * math.sqrt(3.0)) * (p_min / p_max)
        else:
            raise ValueError("one of `n_neighbors`, `bandwidth` or (`result` and `X`) is required")
    if bandwidth is None:
        bandwidth = (_EDGE_SPREAD * n_neighbors / (n * p_min)) if n_neighbors is not None else 3 * math.sqrt(3) * edge_rms
    h = bandwidth
    d = n_features
    assumptions = []

    # Tangent errors (ingredient E, heuristic local-PCA perturbation) unless given.
    valid = True
    if tangent_error is None:
        if tangent_neighbors is None:
            raise ValueError("`tangent_neighbors` (or `tangent_error`) is required")
        if d is None:
            raise ValueError("`n_features` is required (or give `X` with `result`)")
        kp = tangent_neighbors
        kf = min(kp, fit_points) if fit_points else kp  # points the tangent is fitted to
        r_noise = kp / (2.0 * n * p_max)   # shortest neighbourhood half-length: the noisiest slope
        r_bias = kp / (2.0 * n * p_min)    # longest: the largest curvature bias
        spread = sigma * math.sqrt(3.0) / (r_noise * math.sqrt(kf))
        theta = spread * math.sqrt(d) + kappa * r_bias * min(1.0, math.sqrt(4.0 * r_bias * p_max + 1.0 / kf))
        theta_max = spread * (math.sqrt(d) + math.sqrt(2.0 * math.log(n))) + kappa * r_bias
        assumptions.append("tangent errors from the local-PCA perturbation heuristic "
                           "theta ~ sqrt(3) (sigma/r) sqrt(d/k_p) + curvature bias")
        if sigma > 0 and r_noise ** 2 / (3.0 * sigma ** 2) <= math.sqrt(d / kf):
            valid = False
            assumptions.append("tangent detection threshold r^2/(3 sigma^2) > sqrt(d/k_p) FAILS")
    else:
        theta = theta_max = tangent_error
        assumptions.append("tangent errors bounded by the given `tangent_error`")

    # Neighbours chosen partly by noise: edges up to |Delta gamma|^2 ~ sigma^2 sqrt(8 d) (pitfall B10.8).
    h_eff = math.sqrt(h ** 2 + (sigma ** 2 * math.sqrt(8.0 * d) if d is not None else 0.0))

    # Synchronisation (Lemma S): exact signs if theta_i + theta_j + kappa Delta < pi/2 on every edge.
    if 2.0 * theta_max + kappa * h_eff >= math.pi / 2:
        valid = False
        assumptions.append("synchronisation condition 2 theta_max + kappa h < pi/2 FAILS: sign errors possible")
    else:
        assumptions.append("synchronisation condition 2 theta_max + kappa h < pi/2 holds (heuristic theta_max)")

    # Edge error (ingredient E): rms of the non-gradient part of the increments.
    if edge_error is None:
        if d is None:
            raise ValueError("`n_features` is required (or give `X` with `result`, or `edge_error`)")
        geometric = kappa ** 2 * h_eff ** 2 / 6.0 + theta ** 2 / 2.0 + theta * kappa * h_eff / 2.0
        eta = edge_rms * (geometric + kappa * sigma / math.sqrt(2.0)) + theta * sigma * math.sqrt(2.0 * d)
        assumptions.append("edge error eta from Delta (kappa^2 h^2/6 + theta^2/2 + theta kappa h/2 + kappa sigma/sqrt2)"
                           " + theta sigma sqrt(2d), theta treated as independent of the noise")
    else:
        eta = edge_error
        assumptions.append("edge error given as `edge_error`")

    # Laplacian solve (Lemma L): rms(e') <= eta sqrt(W / (n lambda_2)).
    if fiedler_value is None:
        amplification = math.sqrt(_LAMBDA_SAFETY * p_max / p_min) * ell / (math.pi * edge_rms)
        assumptions.append("lambda_2 from the continuum model (pi/ell)^2 S_2/n, divided by 1.5 and p_min/p_max")
    else:
        amplification = math.sqrt(total_weight / (n * fiedler_value))
    R = eta * amplification
    assumptions.append("graph treated as fixed when taking expectations")

    terms = {"noise": 4.0 * p_max * sigma / math.sqrt(math.pi)}
    if delta is None:
        terms["solve"] = _solve_term(p_max, R)
    else:  # Markov on rms^2 (prob delta/2) and Hoeffding for the close-pair U-statistic (prob delta/2)
        terms["solve"] = _solve_term(p_max, R * math.sqrt(2.0 / delta))
        terms["deviation"] = 2.0 * math.sqrt(math.log(2.0 / delta) / (2 * (n // 2)))
    terms["sync"] = 0.0 if valid else 2.0
    bound = float(sum(terms.values()))
    return Result(tau_lower=float(min(1.0, max(0.0, 1.0 - bound))), tau_lower_unclipped=1.0 - bound,
                  bound=bound, terms=terms, R=float(R), edge_error=float(eta), tangent_error=float(theta),
                  tangent_error_max=float(theta_max), fiedler_value=fiedler_value, total_weight=total_weight,
                  bandwidth=float(h), edge_length=float(edge_rms), valid=valid, confidence=confidence,
                  assumptions=tuple(assumptions))
