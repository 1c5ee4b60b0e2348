"""Planted worlds: a capacity-aware mixture law whose best mixture moves with model size, and noisy proxy runs
drawn from any law (the oracle of the area's tests, the demo and the tutorial)."""

from __future__ import annotations

from typing import Any

import numpy as np

from numtk._lib._constraints import constraints
from numtk._lib._rng import normalize_rng
from numtk._lib._validation import C_INT_MAX, as_array, check_int, check_real, check_size
from numtk.mixture._mixture_law import _as_mixtures

__all__ = ["planted_law", "simulate_runs"]

#: The constants of :func:`planted_law`'s construction (documented in its Notes).
_E_RANGE = (1.6, 2.2)          # irreducible losses E_i ~ U(1.6, 2.2)
_ALPHA_RANGE = (0.26, 0.34)    # base size exponents a_i ~ U(0.26, 0.34)
_ALPHA_SPREAD = 0.25           # log alpha_ij - log a_i = drift * (0.25 c_j + 0.05 z_ij)
_ALPHA_JITTER = 0.05
_GAIN = 2.0                    # a model trained without set i's own domain has e^2 times its reducible loss
_SCALE_RANGE = (0.8, 1.3)      # reducible loss of set i at the reference size, uniform mixture, about U(0.8, 1.3)
_THETA_JITTER = 0.1            # cross-domain transfer: N(0, 0.1^2) on every theta_ij


@constraints(n_domains="int>=2", n_outputs="count", reference_size="real>0", drift="real>=0", rng="rng")
def planted_law(n_domains: int = 5, n_outputs: int = 5, *, reference_size: float = 1e8, drift: float = 1.0,
                rng: Any = None):
    r"""A planted ``'camel'`` law whose best mixture moves with model size.

    Parameters
    ----------
    n_domains : int, optional
        M, the training domains (>= 2). Default 5.
    n_outputs : int, optional
        V, the validation sets (>= 1). Validation set i draws most benefit from training domain
        ``i % M``. Default 5.
    reference_size : float, optional
        N0 (> 0), the model size at which ``theta`` is the log reducible loss. Default 1e8.
    drift : float, optional
        The spread of the size exponents across domains (>= 0): 1 (default) is the world the demo and the
        tutorial use, larger values make the best mixture move faster with size, and 0 gives a separable law
        (``alpha[i, j]`` equal for every domain j, the ``'separable'`` form written as ``'camel'``).
    rng : {None, int, numpy.random.Generator}, optional
        Source of the parameters' randomness; an int gives the same law every time (and the same ``E``
        and ``theta`` for every ``drift``).

    Returns
    -------
    law : MixtureLaw
        A fitted ``'camel'`` law (from :meth:`MixtureLaw.from_params`) with ``params_`` ``E`` (V,),
        ``theta`` (V, M) and ``alpha`` (V, M), and ``reference_size_ = reference_size``.

    Raises
    ------
    ValueError
        A count out of range, a non-finite or non-positive ``reference_size``, a negative ``drift`` (or one so
        large that the exponents overflow).
    TypeError
        A non-integer count, an ``rng`` of the wrong type.

    See Also
    --------
    simulate_runs : noisy proxy runs drawn from the law.
    MixtureLaw.from_params : any planted law, parameters given.

    Notes
    -----
    The law is :math:`L_i(N, r) = E_i + \exp(\sum_j r_j\theta_{ij} - \ell\sum_j r_j\alpha_{ij})`,
    :math:`\ell = \log(N/N_0)`. With :math:`c_j` equally spaced in [-1, 1] (domain 0 has the smallest size
    exponent, domain M - 1 the largest) and independent standard normal :math:`z_{ij}, z'_{ij}`:

    - :math:`E_i \sim U(1.6, 2.2)`;
    - :math:`\alpha_{ij} = a_i \exp(\mathrm{drift}\,(0.25\,c_j + 0.05\,z_{ij}))`, :math:`a_i \sim U(0.26, 0.34)`:
      with ``drift = 1`` the exponents of domain M - 1 are about 1.6 times those of domain 0;
    - :math:`\theta_{ij} = \log s_i - g(M - 1)/M + g\,[j \ne i \bmod M] + 0.1\,z'_{ij}`, :math:`g = 2`,
      :math:`s_i \sim U(0.8, 1.3)`: validation set i is served best by its own domain (a model trained
      without it has :math:`e^2` times the reducible loss), so the best mixture of the average loss is
      interior (a law with one output would put it on a vertex), and the reducible loss of the uniform
      mixture at :math:`N_0` is about :math:`s_i`.

    The best mixture then moves with size as property P3 of the area's specification says: at an interior
    optimum the weighted derivatives :math:`\sum_i w_i e^{\varphi_i}(\theta_{ij} - \ell\alpha_{ij})` agree over
    the domains in use, so as :math:`\ell` grows the domains with a large exponent gain weight, and small
    models (negative :math:`\ell`) favour the domains with a small exponent. With the defaults (M = V = 5,
    ``rng=0``) the average loss is best at (0.42, 0.31, 0.15, 0.13, 0) for N = 1.2e7, at
    (0.17, 0.22, 0.13, 0.26, 0.22) for N = 1.5e8 and at (0, 0.08, 0.03, 0.31, 0.59) for N = 1.2e9. The constants are choices of numtk, made so that the effect
    is of the size seen in practice (a few per cent of the loss at an 8x extrapolation); CAMEL's own fits are
    not published.

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.mixture import planted_law
    >>> law = planted_law(rng=0)
    >>> law.n_domains_, law.n_outputs_, law.params_["alpha"].shape
    (5, 5, (5, 5))
    >>> a = law.params_["alpha"]
    >>> bool(np.all(a[:, -1] > a[:, 0]))          # the last domain's loss falls fastest with size
    True
    >>> a0 = planted_law(rng=0, drift=0.0).params_["alpha"]
    >>> bool(np.allclose(a0, a0[:, :1]))          # drift 0: one exponent per validation set (separable)
    True
    """
    M = check_int(n_domains, "n_domains", minimum=2, maximum=C_INT_MAX)
    V = check_int(n_outputs, "n_outputs", minimum=1, maximum=C_INT_MAX)
    check_size(M, 16.0, "n_domains")
    check_size(V, 16.0, "n_outputs")
    check_size(M * V, 64.0, "n_outputs")  # theta, alpha, their draws and the law's copies
    N0 = check_real(reference_size, "reference_size", low=0.0, low_open=True)
    drift = check_real(drift, "drift", low=0.0)
    gen = normalize_rng(rng)

    c = np.linspace(-1.0, 1.0, M)
    E = gen.uniform(*_E_RANGE, size=V)
    a = gen.uniform(*_ALPHA_RANGE, size=V)
    z = gen.standard_normal((V, M))
    s = gen.uniform(*_SCALE_RANGE, size=V)
    z2 = gen.standard_normal((V, M))

    own = np.zeros((V, M))
    own[np.arange(V), np.arange(V) % M] = 1.0
    theta = (np.log(s) - _GAIN * (M - 1) / M)[:, None] + _GAIN * (1.0 - own) + _THETA_JITTER * z2
    with np.errstate(over="ignore", under="ignore"):
        alpha = a[:, None] * np.exp(drift * (_ALPHA_SPREAD * c[None, :] + _ALPHA_JITTER * z))
    if not (np.all(np.isfinite(alpha)) and np.all(alpha > 0)):
        raise ValueError(f"`drift` = {drift!r} is too large: the size exponents leave the floating-point range")

    from numtk.mixture._mixture_law import MixtureLaw

    return MixtureLaw.from_params("camel", {"E": E, "theta": theta, "alpha": alpha}, reference_size=N0)


def _check_law(law: Any) -> tuple[int, bool]:
    """The law's M and whether it reads tokens; a TypeError naming `law` if it is no fitted mixture law."""
    M = getattr(law, "n_domains_", None)
    if not callable(getattr(law, "predict", None)) or M is None:
        raise TypeError("`law` must be a fitted mixture law (a MixtureLaw after fit, or from "
                        f"MixtureLaw.from_params / planted_law); got {type(law).__name__}")
    return int(M), bool(getattr(law, "uses_tokens_", False))


def _n_outputs(law: Any) -> int:
    """The law's number of validation sets (1 when it does not say)."""
    try:
        return max(1, int(getattr(law, "n_outputs_", 1)))
    except (TypeError, ValueError):
        return 1


def _bytes_per_row(M: int, V: int) -> float:
    """Peak bytes per simulated run: the X row (M + 2), y and its noise (rows x V), the law's temporaries.

    Measured with tracemalloc on planted laws: 184 (M = V = 5), 492 (M = 17, V = 13), 1005 (M = 3, V = 40)
    and 1048 (M = 40, V = 2) bytes per run; this bound is 1.3 to 2 times those.
    """
    return 8.0 * (4 * M + 4 * V + 8)


@constraints(law="option", model_sizes=("real>0", "array1d"), mixtures=("count", "array2d"), noise="real>=0",
             tokens=("real>0", "array1d"), rng="rng")
def simulate_runs(law, model_sizes, mixtures, *, noise: float = 1e-3, tokens=None, rng: Any = None):
    r"""Proxy runs of a mixture law: every mixture at every size, each loss with log-normal noise.

    Parameters
    ----------
    law : MixtureLaw
        A fitted law (for a planted world, :func:`planted_law` or :meth:`MixtureLaw.from_params`).
    model_sizes : float or array_like, shape (S,)
        The sizes of the runs (finite, > 0).
    mixtures : int or array_like, shape (m, M)
        The mixtures run at every size: rows of M = ``law.n_domains_`` non-negative weights summing to 1
        (within 1e-6; renormalised), or an int m for m mixtures drawn from Dirichlet(1, ..., 1) with ``rng``.
    noise : float, optional
        The standard deviation of the noise on each log loss (>= 0): a run's loss is the law's times
        ``exp(noise * z)``, z standard normal, independently per run and validation set. Default 1e-3.
    tokens : float or array_like, shape (S,), optional
        The training tokens of the runs, one value for all or one per size (finite, > 0); required when
        the law reads tokens (``'capacity_kkt'``, or ``data_term=True``), refused otherwise.
    rng : {None, int, numpy.random.Generator}, optional
        Source of the Dirichlet mixtures (drawn first) and of the noise.

    Returns
    -------
    X : ndarray, shape (S * m, n_features)
        The runs in the layout the laws read (:func:`mixture_features`): size-major (the m mixtures at the
        first size, then at the second, ...); column 0 the size, then the tokens when the law reads them,
        then the mixture.
    y : ndarray, shape (S * m,) or (S * m, V)
        The noisy losses, shaped as ``law.predict(X)``.

    Raises
    ------
    ValueError
        Non-positive or non-finite sizes or tokens, mixtures of the wrong width, negative or not summing to
        1, a negative ``noise`` (or one so large that the losses overflow), ``tokens`` missing for a law
        that reads them (or given to one that does not).
    TypeError
        A ``law`` that is no fitted mixture law, a non-numeric argument, an ``rng`` of the wrong type.

    See Also
    --------
    planted_law : a capacity-aware law whose best mixture moves with size.

    Notes
    -----
    Log-normal noise keeps every loss positive, and its standard deviation ``noise`` is the scale the laws'
    default residual (Huber on log losses, threshold 1e-3) is set for: a relative error of ``noise``.

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.mixture import planted_law, simulate_runs
    >>> law = planted_law(rng=0)
    >>> X, y = simulate_runs(law, [1.2e7, 4e7, 1.5e8], 4, noise=0.0, rng=1)
    >>> X.shape, y.shape                          # 3 sizes x 4 mixtures; size, then 5 weights
    ((12, 6), (12, 5))
    >>> bool(np.allclose(X[:4, 1:], X[4:8, 1:]))  # the same mixtures at every size
    True
    >>> bool(np.allclose(y, law.predict(X)))      # noise=0: the law itself
    True
    """
    M, uses_tokens = _check_law(law)
    V = _n_outputs(law)
    sizes = as_array(model_sizes, "model_sizes")
    if sizes.ndim > 1:
        raise ValueError(f"`model_sizes` must be a number or 1-D; got an array of shape {sizes.shape}")
    sizes = np.atleast_1d(sizes).astype(np.float64)
    if sizes.size == 0:
        raise ValueError("`model_sizes` must hold at least one size")
    if not np.all(np.isfinite(sizes)) or np.any(sizes <= 0):
        raise ValueError("`model_sizes` must be finite and > 0")
    S = sizes.size
    noise = check_real(noise, "noise", low=0.0)
    gen = normalize_rng(rng)

    if isinstance(mixtures, (int, np.integer)) and not isinstance(mixtures, (bool, np.bool_)):
        m = check_int(mixtures, "mixtures", minimum=1, maximum=C_INT_MAX)
        check_size(m * S, _bytes_per_row(M, V), "mixtures")
        R = gen.dirichlet(np.ones(M), size=m)
    else:
        if isinstance(mixtures, (bool, np.bool_)):
            raise TypeError("`mixtures` must be an int or a 2-D array of mixture weights; got a bool")
        R = _as_mixtures(mixtures, "mixtures", M)
        m = R.shape[0]
        check_size(m * S, _bytes_per_row(M, V), "mixtures")

    tok = None
    if tokens is not None:
        if not uses_tokens:
            raise ValueError("`tokens` was given, but the law does not read tokens (only 'capacity_kkt' and "
                             "laws with data_term=True do); leave it None")
        tok = as_array(tokens, "tokens")
        if tok.ndim > 1 or tok.size not in (1, S):
            raise ValueError(f"`tokens` must be a number or hold one value per size ({S}); got shape {tok.shape}")
        tok = np.broadcast_to(np.ravel(tok).astype(np.float64), (S,))
        if not np.all(np.isfinite(tok)) or np.any(tok <= 0):
            raise ValueError("`tokens` must be finite and > 0")
    elif uses_tokens:
        raise ValueError("`tokens` is required: the law reads the training tokens of each run")

    from numtk.mixture._mixture_law import mixture_features

    X = mixture_features(np.repeat(sizes, m), np.tile(R, (S, 1)),
                         tokens=None if tok is None else np.repeat(tok, m))
    y = np.asarray(law.predict(X), dtype=np.float64)
    if noise > 0:
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            y = y * np.exp(noise * gen.standard_normal(y.shape))
        if not (np.all(np.isfinite(y)) and np.all(y > 0)):
            raise ValueError(f"`noise` = {noise!r} is too large: the noisy losses leave the floating-point range")
    return X, y
