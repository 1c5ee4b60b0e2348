"""asv benchmarks of numtk.torch.hirsch: environment steps (a recorded random trajectory replayed on HirschEnv and
on the same environment written directly over numtk.algebra), the equivariant GNN's forward for a batch of states,
and one episode of the options agent (``_torch_hirsch.py`` has the side-by-side tables of ``compare.py --hirsch``).
Skipped (NotImplementedError in setup) where torch or gymnasium is missing."""

from benchmarks._torch_hirsch import DirectEnv, make_states, record_actions, replay


def _need():
    try:
        import gymnasium  # noqa: F401
        import torch  # noqa: F401
    except ImportError:  # pragma: no cover - asv skips the benchmark
        raise NotImplementedError("torch and gymnasium are needed")


class EnvSteps:
    """40 recorded episodes of random legal actions on n = 7, d = 3 (shaped reward), replayed."""

    timeout = 300

    def setup(self):
        _need()
        self.traj = record_actions(7, 3, 40)

    def time_hirsch_env_fresh(self):
        from numtk.torch.hirsch import HirschEnv

        replay(HirschEnv(7, 3, max_steps=40, reward="shaped"), self.traj)

    def time_direct_over_algebra(self):
        replay(DirectEnv(7, 3), self.traj)


class PolicyForward:
    """EquivariantGNNPolicy (width 64, 3 layers) on B states of 12 generators, n = 7, d = 3."""

    params = [[1, 16, 128]]
    param_names = ["batch"]

    def setup(self, B):
        _need()
        import torch

        from numtk.torch.hirsch import EquivariantGNNPolicy

        torch.set_num_threads(1)
        self.policy = EquivariantGNNPolicy(64, 3, rng=0)
        self.states = make_states(7, 3, B)

    def time_forward(self, B):
        import torch

        with torch.no_grad():
            self.policy(self.states, 7, 3)


class OptionsEpisode:
    """One episode of the options agent (width 32, 2 layers) on n = 7, d = 3."""

    timeout = 300

    def setup(self):
        _need()
        import torch

        from numtk.torch.hirsch import EquivariantGNNPolicy, HirschEnv, OptionsAgent

        torch.set_num_threads(1)
        self.agent = OptionsAgent(EquivariantGNNPolicy(32, 2, rng=0), EquivariantGNNPolicy(32, 2, rng=1))
        self.env = HirschEnv(7, 3, max_steps=40, reward="shaped")
        self.seed = 0

    def time_run_episode(self):
        self.seed += 1
        self.agent.run_episode(self.env, rng=self.seed)
