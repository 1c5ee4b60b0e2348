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
    params = ([100, 300, 1000], ["rm+", "lp"])
    param_names = ["n", "method"]
    timeout = 300

    def setup(self, n, method):
        from numtk.games import MatrixGame

        self.game = MatrixGame(random_matrix(n))

    def time_nash(self, n, method):
        from numtk.games import nash_equilibrium

        nash_equilibrium(self.game, method, tol=1e-6 if method == "rm+" else None)


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
