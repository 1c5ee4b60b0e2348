"""Single-cell simulation datasets shipped with numtk (krumsiek11, toggleswitch).

Both files are verbatim copies of the plain-text files that the ``scanpy`` wheel ships under
``scanpy/datasets/`` (BSD-3-Clause); ``data/LICENSES.md`` records their provenance, sha256 and
licence. They are parsed here with NumPy only: scanpy and anndata are not needed.

File format (written by ``scanpy.tl.sim``): optional leading comment lines ``# key = value`` (the
simulation parameters), then a comment line with the column names ``it <gene> <gene> ...``, then
whitespace-separated rows ``it x_1 ... x_g``. Column ``it`` is the index of the row within its
simulated trajectory (realization); it restarts at 0 at the first row of each new realization.
"""

from __future__ import annotations

import importlib.resources
import io

import numpy as np

from numtk._lib._constraints import constraints
from numtk._lib._result import Result

__all__ = ["load_krumsiek11", "load_toggleswitch"]

# scanpy.datasets.krumsiek11 labels rows 80:160 "Mo", 240:320 "Ery", 400:480 "Mk", 560:640 "Neu"
# and every other row "progenitor": the second half of each realization carries the fate that
# the realization reaches. The fates were checked against the end states of the trajectories
# (Mo: Pu.1, Cebpa, cJun, EgrNab high; Ery: Gata1, EKLF; Mk: Gata1, Fli1; Neu: Cebpa, Pu.1, Gfi1).
_KRUMSIEK11_FATES = ("Mo", "Ery", "Mk", "Neu")
_KRUMSIEK11_FIRST_LABELLED_STEP = 80
_PROGENITOR = "progenitor"


def _read_text(name: str) -> str:
    resource = importlib.resources.files("numtk.datasets") / "data" / name
    return resource.read_text(encoding="ascii")


def _parse_value(text: str):
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    if text in ("True", "False"):
        return text == "True"
    return text


def _parse_sim_file(name: str) -> tuple[np.ndarray, np.ndarray, list[str] | None, dict]:
    """Return (step, X, column names of X or None, header parameters) of one scanpy.tl.sim file."""
    text = _read_text(name)
    comments = [line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")]
    comments = [c for c in comments if c]
    metadata = {}
    for c in comments[:-1] if comments else ():
        key, sep, value = c.partition("=")
        if sep:
            metadata[key.strip()] = _parse_value(value.strip())
    table = np.loadtxt(io.StringIO(text), comments="#", dtype=np.float64, ndmin=2)
    genes = None
    if comments and "=" not in comments[-1]:
        names = comments[-1].split()
        if len(names) != table.shape[1] or names[0] != "it":  # pragma: no cover - file is fixed
            raise RuntimeError(f"unexpected column header in {name}: {comments[-1]!r}")
        genes = names[1:]
    it = table[:, 0]
    step = it.astype(np.int64)
    if not np.array_equal(step, it):  # pragma: no cover - file is fixed
        raise RuntimeError(f"column 'it' of {name} is not integral")
    return step, np.ascontiguousarray(table[:, 1:]), genes, metadata


def _realizations(step: np.ndarray) -> np.ndarray:
    """Number each row's trajectory: a new one starts wherever ``step`` drops (restarts at 0)."""
    return np.concatenate([[0], np.cumsum(np.diff(step) < 0)]).astype(np.int64)


@constraints()
def load_krumsiek11() -> Result:
    """Simulated myeloid progenitors: 640 cells of 11 transcription factors (krumsiek11).

    The Boolean gene-regulatory network of Krumsiek et al. (2011) [1]_ for myeloid differentiation,
    turned into continuous Hill-type dynamics and simulated with ``scanpy.tl.sim`` [2]_. Four noisy
    trajectories (realizations) start from the same common-myeloid-progenitor state (Gata2, Pu.1
    and Cebpa at 0.8, the rest 0, plus noise of s.d. 0.001) and each ends in a different fate:
    monocyte (Mo), erythrocyte (Ery), megakaryocyte (Mk), neutrophil (Neu). Pooled, the cells form
    a tree with four branches, not a single curve. This is the file behind
    ``scanpy.datasets.krumsiek11()``, read without scanpy.

    Returns
    -------
    res : Result
        With fields

        X : ndarray of float64, shape (640, 11)
            Simulated expression, one row per cell (no observation noise was added: noiseObs 0).
        genes : list of str
            The 11 column names from the file's header: ``Gata2, Gata1, Fog1, EKLF, Fli1, SCL,
            Cebpa, Pu.1, cJun, EgrNab, Gfi1``.
        step : ndarray of int64, shape (640,)
            The file's first column ``it``: the index of the cell along its own trajectory, 0 to
            159. It is the exact ground-truth time order within a realization. ``scanpy.tl.sim``
            writes every 5th iterate of the simulation (its krumsiek11 settings: 800 iterations,
            step 5), so ``step`` counts written rows, not raw iterations.
        realization : ndarray of int64, shape (640,)
            Which of the four trajectories the cell belongs to (0 to 3): a new realization starts
            wherever ``step`` drops back to 0 (rows 0, 160, 320, 480).
        lineage : ndarray of str, shape (640,)
            scanpy's ``obs["cell_type"]``: ``"progenitor"`` for ``step < 80`` and the fate of the
            realization (``"Mo"``, ``"Ery"``, ``"Mk"``, ``"Neu"`` for realizations 0, 1, 2, 3)
            for ``step >= 80``; that is rows 80:160 Mo, 240:320 Ery, 400:480 Mk, 560:640 Neu.
            The cut at step 80 is scanpy's labelling convention, not an event of the simulation.
        fate : ndarray of str, shape (640,)
            The terminal fate of each cell's realization, for every cell (also the early ones):
            ``fate == ("Mo", "Ery", "Mk", "Neu")[realization]``.
        root : int
            Index of the root (stem) cell, 0, as scanpy's ``uns["iroot"]``.
        metadata : dict
            The simulation parameters from the file's comment header: ``model`` (the path of the
            model file on the author's machine), ``tmax`` (160 rows per realization),
            ``branching``, ``nrRealizations`` (4), ``noiseObs`` (0), ``noiseDyn`` (0.001),
            ``seed`` (0).
        description : str
            One line saying what the data are.

    Notes
    -----
    The data are a verbatim copy of ``scanpy/datasets/krumsiek11.txt`` from the scanpy 1.11.5
    wheel (BSD-3-Clause); provenance, checksum and licence are in
    ``numtk/datasets/data/LICENSES.md``.

    References
    ----------
    .. [1] J. Krumsiek, C. Marr, T. Schroeder, F. J. Theis, "Hierarchical differentiation of
       myeloid progenitors is encoded in the transcription factor network", PLoS ONE 6(8):
       e22649, 2011. doi:10.1371/journal.pone.0022649
    .. [2] F. A. Wolf, P. Angerer, F. J. Theis, "SCANPY: large-scale single-cell gene expression
       data analysis", Genome Biology 19:15, 2018. doi:10.1186/s13059-017-1382-0

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.datasets import load_krumsiek11
    >>> data = load_krumsiek11()
    >>> data.X.shape
    (640, 11)
    >>> data.genes[:4]
    ['Gata2', 'Gata1', 'Fog1', 'EKLF']
    >>> int(data.step.min()), int(data.step.max()), int(data.realization.max())
    (0, 159, 3)
    >>> labels, counts = np.unique(data.lineage, return_counts=True)
    >>> dict(zip(labels.tolist(), counts.tolist()))
    {'Ery': 80, 'Mk': 80, 'Mo': 80, 'Neu': 80, 'progenitor': 320}

    One realization, ordered by simulation step:

    >>> mo = data.X[data.realization == 0]
    >>> mo.shape
    (160, 11)
    """
    step, X, genes, metadata = _parse_sim_file("krumsiek11.txt")
    realization = _realizations(step)
    fate = np.array(_KRUMSIEK11_FATES, dtype=str)[realization]
    lineage = np.where(step >= _KRUMSIEK11_FIRST_LABELLED_STEP, fate, _PROGENITOR).astype(str)
    return Result(
        X=X,
        genes=genes,
        lineage=lineage,
        step=step,
        realization=realization,
        fate=fate,
        root=0,
        metadata=metadata,
        description=("krumsiek11: 4 simulated trajectories (160 steps each) of the 11-gene "
                     "myeloid network of Krumsiek et al. 2011, fates Mo, Ery, Mk, Neu "
                     "(from scanpy)"),
    )


@constraints()
def load_toggleswitch() -> Result:
    """Simulated two-gene toggle switch: 200 cells of 2 genes (toggleswitch).

    Two mutually repressing genes (the synthetic toggle switch of Gardner, Cantor and Collins,
    2000 [1]_), simulated with ``scanpy.tl.sim`` [2]_: two trajectories start near the unstable
    state (both genes at 0.8 plus noise of s.d. 0.01) and fall into opposite stable states, one
    with gene ``"0"`` high and one with gene ``"1"`` high. This is the file behind
    ``scanpy.datasets.toggleswitch()``, read without scanpy.

    Returns
    -------
    res : Result
        With fields

        X : ndarray of float64, shape (200, 2)
            Simulated expression, one row per cell (with observation noise, noiseObs 0.01, so a
            few values are slightly negative).
        genes : list of str
            ``["0", "1"]``: the file has no header; these are the variable names of scanpy's
            model file ``scanpy/sim_models/toggleswitch.txt`` and the names scanpy gives the
            columns.
        step : ndarray of int64, shape (200,)
            The file's first column ``it``: the index of the cell along its own trajectory, 0 to
            99 (every iterate written: scanpy's settings tmax 100, step 1).
        realization : ndarray of int64, shape (200,)
            Which of the two trajectories the cell belongs to (0 or 1): a new realization starts
            wherever ``step`` drops back to 0 (rows 0 and 100). Realization 0 ends with gene
            ``"0"`` high, realization 1 with gene ``"1"`` high.
        lineage : None
            The data carry no lineage or cell-type labels (scanpy gives none either).
        fate : None
            No labels; see ``realization``.
        root : int
            Index of the root cell, 0, as scanpy's ``uns["iroot"]``.
        metadata : dict
            Empty: this file has no comment header.
        description : str
            One line saying what the data are.

    Notes
    -----
    The data are a verbatim copy of ``scanpy/datasets/toggleswitch.txt`` from the scanpy 1.11.5
    wheel (BSD-3-Clause); provenance, checksum and licence are in
    ``numtk/datasets/data/LICENSES.md``.

    References
    ----------
    .. [1] T. S. Gardner, C. R. Cantor, J. J. Collins, "Construction of a genetic toggle switch
       in Escherichia coli", Nature 403:339-342, 2000. doi:10.1038/35002131
    .. [2] F. A. Wolf, P. Angerer, F. J. Theis, "SCANPY: large-scale single-cell gene expression
       data analysis", Genome Biology 19:15, 2018. doi:10.1186/s13059-017-1382-0

    Examples
    --------
    >>> from numtk.datasets import load_toggleswitch
    >>> data = load_toggleswitch()
    >>> data.X.shape
    (200, 2)
    >>> data.genes
    ['0', '1']
    >>> int(data.step.max()), int(data.realization.max())
    (99, 1)
    >>> print(data.lineage)
    None
    """
    step, X, genes, metadata = _parse_sim_file("toggleswitch.txt")
    if genes is None:
        genes = [str(j) for j in range(X.shape[1])]
    return Result(
        X=X,
        genes=genes,
        lineage=None,
        step=step,
        realization=_realizations(step),
        fate=None,
        root=0,
        metadata=metadata,
        description=("toggleswitch: 2 simulated trajectories (100 steps each) of a two-gene "
                     "toggle switch (Gardner et al. 2000), one per stable state (from scanpy)"),
    )
