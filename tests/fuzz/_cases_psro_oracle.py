"""Fuzz cases of numtk.torch.psro_oracle (collected by cases_torch.py; see _harness.py for the catalogue).

The valid calls are tiny: rock-paper-scissors or Kuhn poker, one-layer networks of width 8, a few hundred
environment steps. ``ConditionalBROracle.candidates`` is fuzzed on an oracle trained once on rock-paper-scissors with
two members, whose mixtures are (k, 2) arrays (the catalogue's (6, 3) arrays have the wrong length and must be
refused naming ``sigmas``). ``RolloutEnv.rollout`` plays 6 Kuhn episodes.
"""

from _harness import Case


def _m():
    import numtk.torch.psro_oracle as m

    return m


def _trained():
    from numtk.games import rock_paper_scissors

    oracle = _m().ConditionalBROracle(latent_size=3, hidden=(8,), steps=200, episodes=16, rng=0)
    oracle(rock_paper_scissors(), [0, 1], [[0.5, 0.5], [1.0, 0.0]])
    return oracle


def _rollout():
    import numpy as np

    from numtk.games import KuhnPoker

    game = KuhnPoker()
    env = _m().RolloutEnv(game)
    u = game.uniform_policy()
    return env.rollout, ([u], u, np.zeros(6, int), np.array([0, 1, 0, 1, 0, 1]), np.zeros(6, int)), {"rng": 0}


_SMALL = dict(hidden=(8,), steps=200, episodes=16, rng=0)

PSRO_ORACLE: list = [
    Case("numtk.torch.psro_oracle.RLBestResponseOracle", lambda: (_m().RLBestResponseOracle, (), dict(_SMALL)),
         {"hidden": ("int>=1",)}),
    Case("numtk.torch.psro_oracle.ConditionalBROracle",
         lambda: (_m().ConditionalBROracle, (), dict(_SMALL, latent_size=4)), {"hidden": ("int>=1",)}),
    Case("numtk.torch.psro_oracle.ConditionalBROracle.candidates", lambda: (_trained().candidates, ([[0.2, 0.8]],), {}),
         {}, positional={"sigmas": 0}, timeout=60.0),
    Case("numtk.torch.psro_oracle.RolloutEnv", lambda: (_m().RolloutEnv, (_m_game(),), {}), {},
         positional={"game": 0}),
    Case("numtk.torch.psro_oracle.RolloutEnv.rollout", _rollout, {"opponents": "option", "learner_policy": "option"},
         positional={"opponents": 0, "learner_policy": 1, "member": 2, "seat": 3, "context": 4},
         skip={"learner_policy": ("None",)}),
    Case("numtk.torch.psro_oracle.demo",
         lambda: (_m().demo, (), dict(steps=200, members=2, hidden=(8,), rng=0, progress=False)), {},
         timeout=120.0),
]


def _m_game():
    from numtk.games import KuhnPoker

    return KuhnPoker()
