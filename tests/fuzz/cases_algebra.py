"""Fuzz cases of numtk.algebra (see _harness.py for the catalogue and the outcomes).

Generator sets are small (n <= 7), so that every call, the Reisner check included, takes milliseconds.
"""

from _harness import Case


def _a():
    import numtk.algebra as a
    return a


def _veronese(n=5, d=2):
    return _a().squarefree_veronese(n, d)


def _call(name, *args, **kwargs):
    def make():
        return getattr(_a(), name), args, kwargs
    return make


_G = "array1d"  # a sequence (or 1-D integer array) of int bitmasks
CASES = {c.name: c for c in [
    Case("numtk.algebra.generator_graph", lambda: (_a().generator_graph, (_veronese(),), {"d": 2}),
         {"G": _G, "d": "int>=1"}, positional={"G": 0}),
    Case("numtk.algebra.dual_graph_diameter", lambda: (_a().dual_graph_diameter, (_veronese(),), {"d": 2}),
         {"G": _G, "d": "int>=1"}, positional={"G": 0}),
    Case("numtk.algebra.has_linear_quotients", lambda: (_a().has_linear_quotients, (_veronese(),), {"d": 2}),
         {"G_ordered": _G, "d": "int>=1"}, positional={"G_ordered": 0}),
    Case("numtk.algebra.linear_quotient_order",
         lambda: (_a().linear_quotient_order, (_veronese()[::-1],), {"d": 2, "max_starts": 3}),
         {"G": _G, "d": "int>=1", "max_starts": "cap"}, positional={"G": 0}),
    Case("numtk.algebra.has_linear_resolution",
         lambda: (_a().has_linear_resolution, (_veronese(6, 3), 6), {"field": "Q", "d": 3, "method": "reisner"}),
         {"G": _G, "n": "int>=1", "field": "option", "d": "int>=1", "method": "option"},
         positional={"G": 0, "n": 1}),
    Case("numtk.algebra.is_cohen_macaulay",
         lambda: (_a().is_cohen_macaulay, (_veronese(5, 3), 5), {"field": "GF2"}),
         {"facets": _G, "n": "int>=1", "field": "option"}, positional={"facets": 0, "n": 1},
         skip={"n": ("None",)}),
    Case("numtk.algebra.reduced_betti_numbers",
         lambda: (_a().reduced_betti_numbers, (_veronese(5, 4), 5), {"field": "Q"}),
         {"facets": _G, "n": "int>=1", "field": "option"}, positional={"facets": 0, "n": 1}),
    Case("numtk.algebra.dual_complex_facets", lambda: (_a().dual_complex_facets, (_veronese(), 5), {}),
         {"G": _G, "n": "int>=1"}, positional={"G": 0, "n": 1}),
    Case("numtk.algebra.squarefree_veronese", _call("squarefree_veronese", 6, 3), {"n": "int>=1", "d": "int>=1"},
         positional={"n": 0, "d": 1}),
    Case("numtk.algebra.random_generators",
         _call("random_generators", 6, 2, 5, linear=False, field="Q", rng=0, max_tries=50),
         {"n": "int>=1", "d": "int>=1", "m": "count", "linear": "bool", "field": "option", "rng": "rng",
          "max_tries": "cap"}, positional={"n": 0, "d": 1, "m": 2}),
    Case("numtk.algebra.random_generators[linear]",
         _call("random_generators", 6, 2, 14, linear=True, field="GF2", rng=0, max_tries=50),
         {"field": "option", "rng": "rng", "max_tries": "cap"}),
    Case("numtk.algebra.subsets_to_masks", _call("subsets_to_masks", [(0, 1), (1, 2)], 4),
         {"subsets": "array2d", "n": "int>=1"}, positional={"subsets": 0, "n": 1}),
    Case("numtk.algebra.masks_to_subsets", _call("masks_to_subsets", [3, 6, 5]), {"G": _G}, positional={"G": 0}),
]}
