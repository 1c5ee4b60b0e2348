"""Pure-NumPy reference values of the mixture laws, written as loops from the formulas (independent of
numtk.mixture's vectorised code). Used as oracles by the mixture tests.

Every function takes a parameter dict laid out as ``MixtureLaw.params_`` (2-D ``theta``: (V, M)) and plain
arrays of sizes, mixtures (and tokens), and returns an (n, V) array.
"""

import math

import numpy as np


def camel(params, sizes, mixtures, reference_size, tokens=None, reference_tokens=None):
    """L_i = E_i + exp(sum_j r_j theta_ij - log(N/N0) sum_j r_j alpha_ij) [+ exp(zeta_i - beta_i log(D/D0))]."""
    E, theta, alpha = params["E"], params["theta"], params["alpha"]
    V, M = len(theta), len(theta[0])
    out = np.empty((len(sizes), V))
    for n in range(len(sizes)):
        ell = math.log(sizes[n] / reference_size)
        for i in range(V):
            expo = 0.0
            for j in range(M):
                expo += mixtures[n][j] * theta[i][j] - ell * mixtures[n][j] * alpha[i][j]
            out[n, i] = E[i] + math.exp(expo) + _data(params, i, tokens, n, reference_tokens)
    return out


def separable(params, sizes, mixtures, reference_size, tokens=None, reference_tokens=None):
    """L_i = E_i + exp(sum_j r_j theta_ij - alpha_i log(N/N0)) [+ data term]."""
    E, theta, alpha = params["E"], params["theta"], params["alpha"]
    V, M = len(theta), len(theta[0])
    out = np.empty((len(sizes), V))
    for n in range(len(sizes)):
        ell = math.log(sizes[n] / reference_size)
        for i in range(V):
            expo = -alpha[i] * ell
            for j in range(M):
                expo += mixtures[n][j] * theta[i][j]
            out[n, i] = E[i] + math.exp(expo) + _data(params, i, tokens, n, reference_tokens)
    return out


def additive(params, sizes, mixtures, reference_size, tokens=None, reference_tokens=None):
    """L_i = E_i + exp(kappa_i - alpha_i log(N/N0)) + exp(sum_j r_j theta_ij) [+ data term]."""
    E, kappa, alpha, theta = params["E"], params["kappa"], params["alpha"], params["theta"]
    V, M = len(theta), len(theta[0])
    out = np.empty((len(sizes), V))
    for n in range(len(sizes)):
        ell = math.log(sizes[n] / reference_size)
        for i in range(V):
            mix = 0.0
            for j in range(M):
                mix += mixtures[n][j] * theta[i][j]
            out[n, i] = (E[i] + math.exp(kappa[i] - alpha[i] * ell) + math.exp(mix)
                         + _data(params, i, tokens, n, reference_tokens))
    return out


def data_mixing(params, sizes, mixtures):
    """Per-size Data Mixing Law at the training sizes only: L_i = E_i^(s) + exp(sum_j r_j theta_ij^(s)),
    s the index of the run's size in ``params['sizes']`` (exact match required)."""
    table = list(params["sizes"])
    E, theta = params["E"], params["theta"]
    V, M = len(theta[0]), len(theta[0][0])
    out = np.empty((len(sizes), V))
    for n in range(len(sizes)):
        s = [k for k, size in enumerate(table) if abs(size - sizes[n]) <= 1e-9 * size]
        if not s:
            raise ValueError("the reference evaluates the per-size law only at its sizes")
        s = s[0]
        for i in range(V):
            expo = 0.0
            for j in range(M):
                expo += mixtures[n][j] * theta[s][i][j]
            out[n, i] = E[s][i] + math.exp(expo)
    return out


def value(form, params, sizes, mixtures, reference_size=None, tokens=None, reference_tokens=None):
    """Dispatch on ``form``: 'camel', 'separable', 'additive', 'data_mixing'."""
    if form == "data_mixing":
        return data_mixing(params, sizes, mixtures)
    fn = {"camel": camel, "separable": separable, "additive": additive}[form]
    return fn(params, sizes, mixtures, reference_size, tokens, reference_tokens)


def _data(params, i, tokens, n, reference_tokens):
    if "zeta" not in params:
        return 0.0
    return math.exp(params["zeta"][i] - params["beta"][i] * math.log(tokens[n] / reference_tokens))
