"""asv benchmarks of numtk.games: exploitability, PE, Nash solvers and PSRO (anchors in _games.py)."""

import numpy as np

from benchmarks._games import leduc_population, random_matrix


class Exploitability:
    params = ["kuhn", "leduc", "goofspiel4"]
    param_names = ["game"]

    def setup(self, name):
        from numtk.games import Goofspiel, KuhnPoker, LeducPoker, nash_conv

        self.game = {"kuhn": KuhnPoker, "leduc": LeducPoker, "goofspiel4": lambda: Goofspiel(4)}[name]()
        self.policy = self.game.random_policy(rng=np.random.default_rng(0))
        nash_conv(self.game, self.policy)       # builds and caches the sequence form

    def time_nash_conv(self, name):
        from numtk.games import nash_conv

        nash_conv(self.game, self.policy)


class PopulationExploitability:
    params = [5, 30, 100]
    param_names = ["k"]
    timeout = 120

    def setup(self, k):
        self.game, self.stack = leduc_population(k)

    def time_leduc_pe(self, k):
        from numtk.games import population_exploitability

        population_exploitability(self.game, self.stack)


class NashSolvers:
    """Random U[-1,1] games: the LP (numtk's HiGHS variant) against the first-order methods to gap 1e-6.

    ``prm+`` is RM+ with ``options={'predictive': True}``; ``cfr+`` on a matrix game runs the RM+ kernel.
    """

    params = ([100, 200, 500, 1000], ["lp", "rm+", "prm+", "cfr+"])
    param_names = ["n", "method"]
    timeout = 300

    def setup(self, n, method):
        from numtk.games import MatrixGame

        self.game = MatrixGame(random_matrix(n))

    def time_nash(self, n, method):
        from numtk.games import nash_equilibrium

        if method == "lp":
            nash_equilibrium(self.game, "lp")
        elif method == "prm+":
            nash_equilibrium(self.game, "rm+", tol=1e-6, options={"predictive": True})
        else:
            nash_equilibrium(self.game, method, tol=1e-6, max_iter=100_000)


class DoubleOracle:
    """The double oracle (it hands over to the LP on dense random games) against numtk's LP and HiGHS's
    own method choice, on random U[-1,1] games."""

    params = ([200, 500, 1000], ["lp", "highs", "double_oracle"])
    param_names = ["n", "method"]
    timeout = 600
    number = 1
    repeat = (1, 3, 120.0)

    def setup(self, n, method):
        from numtk.games import MatrixGame

        self.game = MatrixGame(random_matrix(n))

    def time_nash(self, n, method):
        from numtk.games import nash_equilibrium

        if method == "highs":
            nash_equilibrium(self.game, "lp", options={"highs_method": "highs"})
        else:
            nash_equilibrium(self.game, method)


class CFRPlus:
    timeout = 120

    def setup(self):
        from numtk.games import LeducPoker

        self.game = LeducPoker()
        self.game.sequence_form()

    def time_leduc_1000(self):
        from numtk.games import nash_equilibrium

        nash_equilibrium(self.game, "cfr+", max_iter=1000, tol=0.0)


class PSRO:
    params = ["psro", "global"]
    param_names = ["variant"]
    timeout = 600
    number = 1
    repeat = (1, 2, 120.0)

    def setup(self, variant):
        from numtk.games import LeducPoker

        self.game = LeducPoker()

    def time_leduc_30(self, variant):
        from numtk.games import psro

        psro(self.game, variant=variant, iterations=200, n_candidates=8, rng=0, options={"max_policies": 30})
