"""Tables behind the sampling benchmarks (shipped in ``data/``)."""

from __future__ import annotations

import importlib.resources

import numpy as np

from numtk._lib import Result
from numtk._lib._constraints import constraints

__all__ = ["load_gmm40"]

_GMM40_STD = 1.3132616875182228  # softplus(1) in float64


@constraints()
def load_gmm40() -> Result:
    """The 40-component Gaussian mixture of the diffusion-sampler benchmarks (GMM-40, d = 2).

    The means are those of ``sde_sampler``'s ``gmm_params(name="fab")``: ``(U(0, 1) - 0.5) * 80`` drawn
    by ``torch.rand((40, 2))`` after ``manual_seed(42)``, generated once with CPU PyTorch 2.13.0 and
    shipped as the float64 values of those float32 numbers (``data/gmm40_means.txt`` documents the
    file and its checksum). :func:`numtk.sampling.gaussian_mixture` with ``name="gmm40"`` builds the
    target from this table.

    Returns
    -------
    res : Result
        With fields

        means : ndarray of float64, shape (40, 2)
            The component means.
        std : float
            The per-coordinate standard deviation of every component, softplus(1).
        weights : ndarray of float64, shape (40,)
            The mixture weights, all 1/40.
        metadata : dict
            ``source``, ``licence`` and ``file`` (the shipped table).

    References
    ----------
    .. [1] L. Richter, J. Berner, "Improved sampling via learned diffusions", ICLR 2024
       (``juliusberner/sde_sampler``, MIT licence: the definition, not the code).

    Examples
    --------
    >>> from numtk.datasets import load_gmm40
    >>> g = load_gmm40()
    >>> g.means.shape, round(g.std, 6), float(g.weights.sum())
    ((40, 2), 1.313262, 1.0)
    """
    resource = importlib.resources.files("numtk.datasets") / "data" / "gmm40_means.csv"
    with resource.open("r", encoding="ascii") as fh:
        table = np.loadtxt(fh, delimiter=",", comments="#", skiprows=2, dtype=np.float64)
    means = table.reshape(40, 2)
    return Result(means=means, std=_GMM40_STD, weights=np.full(40, 1.0 / 40),
                  metadata={"source": "sde_sampler gmm_params(name='fab'), torch 2.13.0 seed 42",
                            "licence": "definition from MIT-licensed sde_sampler; numbers generated for numtk",
                            "file": "data/gmm40_means.csv"})
