"""asv benchmarks of numtk.torch.psro_oracle: uniform-random rollouts of Kuhn and Leduc poker with numtk's vectorised
RolloutEnv beside OpenSpiel's Python RL environment (``_torch_psro_oracle.py``), and one RL oracle call. Skipped
(NotImplementedError in setup) where torch or open_spiel is missing."""

from benchmarks._torch_psro_oracle import numtk_rollouts, openspiel_rollouts


def _game(name):
    from numtk.games import KuhnPoker, LeducPoker

    return {"kuhn_poker": KuhnPoker, "leduc_poker": LeducPoker}[name]()


class Rollouts:
    """1024 uniform-random episodes (numtk: at once; OpenSpiel: one step at a time)."""

    params = [["kuhn_poker", "leduc_poker"]]
    param_names = ["game"]
    timeout = 300

    def setup(self, name):
        try:
            import open_spiel  # noqa: F401
            import torch  # noqa: F401
        except ImportError:  # pragma: no cover - asv skips the benchmark
            raise NotImplementedError("torch and open_spiel are needed")
        self.ours = numtk_rollouts(_game(name), 1024)
        self.theirs = openspiel_rollouts(name, 1024)

    def time_numtk_rollout_env(self, name):
        self.ours()

    def time_openspiel_rl_environment(self, name):
        self.theirs()


class OracleCall:
    """One RLBestResponseOracle call (3 x 128 network, 5000 environment steps) against the uniform policy."""

    params = [["kuhn_poker", "leduc_poker"]]
    param_names = ["game"]
    timeout = 300

    def setup(self, name):
        try:
            import torch  # noqa: F401
        except ImportError:  # pragma: no cover
            raise NotImplementedError("torch is needed")
        self.game = _game(name)
        self.u = self.game.uniform_policy()

    def time_rl_best_response(self, name):
        import numpy as np

        from numtk.torch._common import torch_threads
        from numtk.torch.psro_oracle import RLBestResponseOracle

        with torch_threads(1):
            RLBestResponseOracle(steps=5000, lr=1e-3, rng=0)(self.game, self.u[None], [np.ones(1)])
