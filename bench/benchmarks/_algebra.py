"""Side-by-side runs of numtk.algebra for ``bench/compare.py --algebra``: the Reisner linearity check at n = 8,
linear quotients at m = 50 and generator-graph diameters, against the time targets of the specification
(deep.md section 4: Reisner check <= 50 ms for n = 8, linear quotients <= 1 ms for m <= 50) and against plain
anchors written here:

- **Reisner, NumPy transcription**: the definition as one would first write it, every face sigma of the
  Alexander dual complex, its link as tuples, signed boundary matrices in float64 and
  :func:`numpy.linalg.matrix_rank` (SVD) for the ranks; rational ranks only up to floating point, which is
  exact enough at these sizes (the table checks that both answers agree).
- **linear quotients, colon ideals**: the definition with Python sets: the minimal generators of each colon
  ideal ``(S_1..S_{i-1}) : S_i`` must all be variables.
- **numtk's criterion in Python alone**: the same algorithm without the compiled kernel (``_cm_python``, the
  kernel's reference in the tests).
- **diameter, networkx**: :func:`networkx.diameter` of the graph built from numtk's adjacency matrix.

Problems: the squarefree Veronese ideals (8, 3) and (8, 4) (Johnson graphs, linear), random linear ideals of
degree 3 in 8 variables (rejection-sampled, seeded), a random connected non-linear one, the
field-dependent ideal whose Alexander dual is the 6-vertex real projective plane (Q: linear; GF2: not), and
the Veronese (10, 5) beyond the target's size, and in the full run the Veronese (12, 6) and a random linear
ideal with n = 12.
"""

from __future__ import annotations

import math
import os
from itertools import combinations

import numpy as np

from benchmarks._timing import interleaved

__all__ = ["compare", "problems", "grown_linear", "numpy_reisner", "colon_ideal_lq", "networkx_diameter", "TARGETS",
           "RP2"]

#: deep.md section 4, seconds on one core
TARGETS = {"reisner": 0.05, "lq": 1e-3}
#: the 6-vertex real projective plane
RP2 = [(0, 1, 2), (0, 2, 3), (0, 3, 4), (0, 4, 5), (0, 5, 1), (1, 2, 4), (2, 3, 5), (3, 4, 1), (4, 5, 2), (5, 1, 3)]


# ------------------------------------------------------------------------------------------------------------
# anchors
# ------------------------------------------------------------------------------------------------------------
def _homology_float(faces: set[tuple]) -> dict[int, int]:
    top = max(len(f) for f in faces)
    by = {k: sorted(f for f in faces if len(f) == k) for k in range(top + 1)}
    ranks = {}
    for k in range(1, top + 1):
        idx = {f: i for i, f in enumerate(by[k - 1])}
        M = np.zeros((len(by[k - 1]), len(by[k])))
        for j, f in enumerate(by[k]):
            for pos in range(len(f)):
                M[idx[f[:pos] + f[pos + 1:]], j] = (-1) ** pos
        ranks[k] = int(np.linalg.matrix_rank(M)) if M.size else 0
    return {k - 1: len(by[k]) - ranks.get(k, 0) - ranks.get(k + 1, 0) for k in range(top + 1)}


def numpy_reisner(G: list[int], n: int) -> bool:
    """Reisner's criterion on the Alexander dual, transcribed with tuples and NumPy SVD ranks."""
    facets = [tuple(v for v in range(n) if not S >> v & 1) for S in G]
    faces = {f for F in facets for k in range(len(F) + 1) for f in combinations(F, k)}
    for s in faces:
        link = {tuple(v for v in f if v not in s) for f in faces if set(s) <= set(f)}
        dim = max(len(f) for f in link) - 1
        h = _homology_float(link)
        if any(h[i] for i in h if i < dim):
            return False
    return True


def colon_ideal_lq(G: list[int]) -> bool:
    """Linear quotients from the colon ideals' minimal generators (Python sets)."""
    sets = [frozenset(v for v in range(x.bit_length()) if x >> v & 1) for x in G]
    for i in range(1, len(sets)):
        quot = {S - sets[i] for S in sets[:i]}
        if any(len(q) != 1 for q in quot if not any(p < q for p in quot)):
            return False
    return True


def networkx_diameter(A: np.ndarray) -> float:
    import networkx as nx

    H = nx.from_numpy_array(A.astype(np.int8))
    return nx.diameter(H) if nx.is_connected(H) else math.inf


# ------------------------------------------------------------------------------------------------------------
# problems
# ------------------------------------------------------------------------------------------------------------
def problems(quick: bool = False) -> list[tuple[str, list[int], int, str, bool]]:
    """(label, G, n, field, numpy anchor?) of the Reisner rows."""
    from numtk.algebra import (dual_graph_diameter, has_linear_resolution, random_generators, squarefree_veronese,
                               subsets_to_masks)

    out = [("Veronese (8, 3), Q", squarefree_veronese(8, 3), 8, "Q", True),
           ("Veronese (8, 4), Q", squarefree_veronese(8, 4), 8, "Q", True),
           ("Veronese (8, 4), GF2", squarefree_veronese(8, 4), 8, "GF2", False)]
    for m in (20, 35):
        G = random_generators(8, 3, m, linear=True, rng=m)
        out.append((f"random linear, n = 8, d = 3, m = {m}, Q", G, 8, "Q", True))
    g = np.random.default_rng(1)
    while True:  # connected, so that the quick rejection of 'auto' does not apply
        G = random_generators(8, 3, 30, rng=g)
        if dual_graph_diameter(G) < math.inf and not has_linear_resolution(G, 8):
            break
    out.append(("random connected non-linear, n = 8, d = 3, m = 30, Q", G, 8, "Q", True))
    full = (1 << 6) - 1
    rp2 = [full ^ F for F in subsets_to_masks(RP2, 6)]
    out.append(("dual of RP^2 (n = 6, d = 3), Q: linear", rp2, 6, "Q", True))
    out.append(("dual of RP^2 (n = 6, d = 3), GF2: not linear", rp2, 6, "GF2", False))
    out.append(("Veronese (10, 5), Q", squarefree_veronese(10, 5), 10, "Q", False))
    if not quick:
        out.append(("Veronese (12, 6), Q", squarefree_veronese(12, 6), 12, "Q", False))
        out.append(("grown with linear quotients, n = 12, d = 3, m = 60, Q", grown_linear(12, 3, 60), 12, "Q", False))
    return out


def grown_linear(n: int, d: int, m: int, rng: int = 0) -> list[int]:
    """m d-subsets of [n] appended in random order whenever they keep linear quotients (so the ideal is linear;
    random linear sets of this size are far too rare to rejection-sample)."""
    from numtk.algebra import has_linear_quotients, squarefree_veronese

    V = squarefree_veronese(n, d)
    g = np.random.default_rng(rng)
    G = [V[int(g.integers(len(V)))]]
    for i in g.permutation(len(V)).tolist():
        if len(G) == m:
            break
        if V[i] not in G and has_linear_quotients(G + [V[i]]):
            G.append(V[i])
    return G


def _fmt(t: float | None) -> str:
    if t is None:
        return "-"
    if t < 1e-3:
        return f"{t * 1e6:.0f} us"
    if t < 1:
        return f"{t * 1e3:.2f} ms"
    return f"{t:.2f} s"


def _row(case, ours, other, kind, note=""):
    w = 58
    mark = ""
    if kind == "target":
        mark = "ok" if ours <= other else f"MISS by {ours / other:.2f}x"
    label = f"{kind} {_fmt(other)}" if other is not None else "-"
    ratio = f"{other / ours:8.1f}x" if other is not None else "-"
    text = "; ".join(s for s in (mark, note) if s)
    print(f"  {case:<{w}} {_fmt(ours):>9} {label:>22} {ratio:>9}  {text}")


def compare(quick: bool = False, options=None) -> None:
    """Print one table: numtk's median beside the target or the anchor, ratio = other / numtk (> 1: numtk
    within the target, or faster)."""
    from numtk.algebra import (dual_graph_diameter, generator_graph, has_linear_quotients, has_linear_resolution,
                               random_generators, squarefree_veronese)
    from numtk.algebra._reisner import _cm_python

    repeat = 5 if quick else 15
    if options is not None and getattr(options, "repeat", None):
        repeat = min(options.repeat, repeat)
    print("== algebra ==")
    print(f"Targets: deep.md section 4 (Reisner check <= 50 ms at n = 8, linear quotients <= 1 ms at m <= 50), one "
          f"core (numtk.algebra is single-threaded: Python around a compiled GF(2) kernel). Here: {os.cpu_count()} "
          "cores, load average "
          f"{os.getloadavg()[0]:.1f}. Medians of {repeat} interleaved repetitions (the slow NumPy anchor: at most "
          "3, 5 s each); ratio = target or anchor time / numtk time.")
    print(f"  {'case':<58} {'numtk':>9} {'target/anchor':>22} {'ratio':>9}  note")
    print("  -- has_linear_resolution(G, n, field=..., method='reisner') --")
    for label, G, n, field, anchor in problems(quick):
        support = 0
        for S in G:
            support |= S
        F = [support ^ S for S in G]
        calls = {"numtk": lambda G=G, n=n, f=field: has_linear_resolution(G, n, field=f, method="reisner"),
                 "python": lambda F=F, f=field: _cm_python(F, f)}
        if anchor:
            calls["numpy"] = lambda G=G, n=n: numpy_reisner(G, n)
        T = interleaved(calls, {"numtk": repeat, "python": min(repeat, 5), "numpy": min(repeat, 3)}, min_time=0.02,
                        max_single=5.0)
        ans = T.results["numtk"]
        note = f"linear: {ans}"
        target = TARGETS["reisner"] if n <= 8 else None
        if target is not None:
            _row(label, T.medians["numtk"], target, "target", note)
        else:
            _row(label, T.medians["numtk"], None, "", note + "; beyond the target's n = 8")
        _row("  numtk's criterion in Python alone (the kernel's reference)", T.medians["numtk"], T.medians["python"],
             "python", "same answer" if T.results["python"] == ans else "ANSWERS DIFFER")
        if anchor:
            agree = T.results["numpy"] == ans
            _row("  anchor: Reisner in NumPy (tuples, SVD ranks)", T.medians["numtk"], T.medians["numpy"], "numpy",
                 "same answer" if agree else "ANSWERS DIFFER")
        auto = interleaved({"auto": lambda G=G, n=n, f=field: has_linear_resolution(G, n, field=f)}, repeat,
                           min_time=0.02)
        _row("  method='auto' (connectivity, given-order linear quotients)", auto.medians["auto"], None, "")
    print("  -- has_linear_quotients(G) --")
    lex = squarefree_veronese(8, 3)[:50]  # a lex segment: linear quotients hold, so every pair is visited
    for label, G in (("Veronese (8, 3) lex segment, m = 50 (true)", lex),
                     ("random, n = 12, d = 3, m = 50 (false early)", random_generators(12, 3, 50, rng=0))):
        T = interleaved({"numtk": lambda G=G: has_linear_quotients(G), "sets": lambda G=G: colon_ideal_lq(G)},
                        repeat, min_time=0.02)
        assert T.results["numtk"] == T.results["sets"]
        _row(label, T.medians["numtk"], TARGETS["lq"], "target", f"linear quotients: {T.results['numtk']}")
        _row("  anchor: colon ideals with Python sets", T.medians["numtk"], T.medians["sets"], "sets")
    print("  -- dual_graph_diameter(G) --")
    for n, d, m in ((8, 3, 50), (10, 4, 200), (11, 4, 330)):
        g = np.random.default_rng(m)
        while True:
            G = random_generators(n, d, m, rng=g)
            if dual_graph_diameter(G) < math.inf:
                break
        T = interleaved({"numtk": lambda G=G: dual_graph_diameter(G),
                         "networkx": lambda G=G: networkx_diameter(generator_graph(G))}, repeat, min_time=0.02)
        assert T.results["numtk"] == T.results["networkx"]
        _row(f"random connected, n = {n}, d = {d}, m = {m}", T.medians["numtk"], T.medians["networkx"], "networkx",
             f"diameter {T.results['numtk']}" + ("; scipy BFS above m = 256" if m > 256 else ""))
    print("  -- random_generators(7, 3, m, linear=True) --")
    for m in (8, 15):
        T = interleaved({"numtk": lambda m=m: random_generators(7, 3, m, linear=True, rng=None)}, repeat,
                        min_time=0.02)
        _row(f"rejection sampling, n = 7, d = 3, m = {m}", T.medians["numtk"], None, "", "fresh seed each call")
