"""Fuzz cases of numtk.torch.hirsch (collected by cases_torch.py; see _harness.py for the catalogue).

The valid calls are small: n = 5 variables, degree d = 2 (C(5, 2) = 10 candidates), tiny policies (width 8, one
layer), training runs of a few dozen environment steps. The environment's methods are fuzzed on an environment
that starts from the connected generators {0, 1}, {1, 2}. The value 3 is a valid n for ``env=`` (which takes a
HirschEnv or n) and is skipped there. The functions re-exported from numtk.algebra are fuzzed under their
numtk.torch.hirsch names with the valid calls of cases_algebra.py.
"""

from _harness import Case


def _m():
    import numtk.torch.hirsch as h

    return h


def _policy(seed=0):
    return _m().EquivariantGNNPolicy(8, 1, rng=seed)


def _env():
    env = _m().HirschEnv(5, 2, max_steps=8)
    env.reset(seed=0, options={"generators": [0b00011, 0b00110]})
    return env


def _agent():
    return _m().OptionsAgent(_policy(0), _policy(1), spine_length=3, max_spine=5)


_TRAIN = {"steps": 30, "rng": 0, "batch_episodes": 2, "lr": 1e-3}


def _algebra_cases() -> list:
    """cases_algebra.py's cases of the re-exported functions, renamed."""
    from cases_algebra import CASES

    names = ("generator_graph", "dual_graph_diameter", "has_linear_quotients", "linear_quotient_order",
             "has_linear_resolution", "random_generators", "squarefree_veronese")
    out = []
    for full, case in CASES.items():
        base = full.split("[")[0].removeprefix("numtk.algebra.")
        if base in names:
            out.append(Case(full.replace("numtk.algebra.", "numtk.torch.hirsch."), case.make, case.params,
                            positional=case.positional, skip=case.skip, timeout=case.timeout))
    return out


HIRSCH: list = [
    Case("numtk.torch.hirsch.HirschEnv",
         lambda: (_m().HirschEnv, (5, 2), dict(max_steps=8, field="Q", reward="shaped", step_cost=0.01, rng=0,
                                               render_mode="ansi")),
         {}, positional={"n": 0, "d": 1}, skip={"render_mode": ("None",)}),
    Case("numtk.torch.hirsch.HirschEnv.reset",
         lambda: (_env().reset, (), {"seed": 0, "options": {"generators": [0b00011, 0b00110]}}), {}),
    Case("numtk.torch.hirsch.HirschEnv.step", lambda: (_env().step, (7,), {}), {}, positional={"action": 0}),
    Case("numtk.torch.hirsch.EquivariantGNNPolicy", lambda: (_m().EquivariantGNNPolicy, (8, 1), {"rng": 0}), {},
         positional={"hidden": 0, "layers": 1}),
    Case("numtk.torch.hirsch.EquivariantGNNPolicy.forward",
         lambda: (_policy().forward, ([[0b00011, 0b00110]], 5, 2), {}), {}, positional={"states": 0, "n": 1, "d": 2}),
    Case("numtk.torch.hirsch.candidate_subsets", lambda: (_m().candidate_subsets, (5, 2), {}), {},
         positional={"n": 0, "d": 1}),
    Case("numtk.torch.hirsch.subset_index", lambda: (_m().subset_index, (0b00110, 5, 2), {}), {},
         positional={"subset": 0, "n": 1, "d": 2}),
    Case("numtk.torch.hirsch.is_induced_path", lambda: (_m().is_induced_path, ([0b0011, 0b0110], 2), {}),
         {}, positional={"generators": 0, "d": 1}),
    Case("numtk.torch.hirsch.OptionsAgent",
         lambda: (_m().OptionsAgent, (_policy(0), _policy(1)), {"spine_length": 3, "max_spine": 5}), {},
         positional={"spine_policy": 0, "complete_policy": 1}),
    Case("numtk.torch.hirsch.OptionsAgent.run_episode",
         lambda: (_agent().run_episode, (_m().HirschEnv(5, 2),), {"rng": 0, "greedy": False}), {},
         positional={"env": 0}),
    Case("numtk.torch.hirsch.OptionsAgent.train",
         lambda: (_agent().train, (5, 2), dict(_TRAIN, high_lr=0.1, reward="shaped")), {},
         positional={"env": 0, "d": 1}, skip={"env": ("3",)}, timeout=60.0),
    Case("numtk.torch.hirsch.FlatAgent", lambda: (_m().FlatAgent, (_policy(),), {}), {}, positional={"policy": 0}),
    Case("numtk.torch.hirsch.FlatAgent.train",
         lambda: (_m().FlatAgent(_policy()).train, (5, 2), dict(_TRAIN, max_steps=8, reward="shaped")), {},
         positional={"env": 0, "d": 1}, skip={"env": ("3",)}, timeout=60.0),
    Case("numtk.torch.hirsch.greedy_search",
         lambda: (_m().greedy_search, (5, 2), {"steps": 50, "rng": 0, "max_generators": 6}), {},
         positional={"env": 0, "d": 1}, skip={"env": ("3",)}),
    Case("numtk.torch.hirsch.demo",
         lambda: (_m().demo, (), dict(steps=30, rng=0, progress=False, n=5, d=2, field="Q", methods=("greedy",))),
         {}, timeout=60.0),
    *_algebra_cases(),
]
