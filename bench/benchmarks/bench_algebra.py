"""asv benchmarks of numtk.algebra on the problems of ``compare.py --algebra`` (``_algebra.py``): the Reisner
linearity check at n = 8 over Q and GF(2) beside the NumPy transcription of the definition, linear quotients at
m = 50 beside the colon-ideal definition, and generator-graph diameters beside networkx."""

import math

import numpy as np

from benchmarks._algebra import colon_ideal_lq, networkx_diameter, numpy_reisner


class ReisnerCheck:
    """has_linear_resolution(G, 8, method='reisner') on the Veronese (8, 3), (8, 4) and a random linear ideal
    of degree 3 with 30 generators."""

    params = [["veronese-8-3", "veronese-8-4", "random-linear-8-3"], ["Q", "GF2"]]
    param_names = ["ideal", "field"]
    timeout = 120

    def setup(self, ideal, field):
        from numtk.algebra import random_generators, squarefree_veronese

        if ideal == "random-linear-8-3":
            self.G = random_generators(8, 3, 30, linear=True, rng=30)
        else:
            self.G = squarefree_veronese(8, int(ideal[-1]))

    def time_has_linear_resolution(self, ideal, field):
        from numtk.algebra import has_linear_resolution

        has_linear_resolution(self.G, 8, field=field, method="reisner")

    def time_numpy_transcription(self, ideal, field):
        if field == "GF2":
            raise NotImplementedError("the NumPy transcription ranks over the reals only")
        numpy_reisner(self.G, 8)


class LinearQuotients:
    """has_linear_quotients on the first 50 generators of the Veronese (8, 3) in lex order (all pairs visited)."""

    def setup(self):
        from numtk.algebra import squarefree_veronese

        self.G = squarefree_veronese(8, 3)[:50]

    def time_has_linear_quotients(self):
        from numtk.algebra import has_linear_quotients

        has_linear_quotients(self.G)

    def time_colon_ideal_sets(self):
        colon_ideal_lq(self.G)


class Diameter:
    """dual_graph_diameter of random connected generator sets beside networkx.diameter."""

    params = [[50, 200]]
    param_names = ["m"]

    def setup(self, m):
        from numtk.algebra import dual_graph_diameter, random_generators

        g = np.random.default_rng(m)
        n, d = (8, 3) if m == 50 else (10, 4)
        while True:
            self.G = random_generators(n, d, m, rng=g)
            if dual_graph_diameter(self.G) < math.inf:
                break

    def time_dual_graph_diameter(self, m):
        from numtk.algebra import dual_graph_diameter

        dual_graph_diameter(self.G)

    def time_networkx_diameter(self, m):
        from numtk.algebra import generator_graph

        networkx_diameter(generator_graph(self.G))
