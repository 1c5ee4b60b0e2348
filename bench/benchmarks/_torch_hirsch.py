"""Side-by-side runs of numtk.torch.hirsch for ``bench/compare.py --hirsch``: environment steps per second, the
policy's forward, an episode and a training update of the options agent, on the CPU.

Three tables, each timed in interleaved rounds (:func:`benchmarks._timing.interleaved`), torch on one intra-op
thread:

- **environment steps**: one recorded sequence of random legal actions (resets included) on n = 7, d = 3 (35
  candidates; ``--quick``: n = 6), replayed on :class:`~numtk.torch.hirsch.HirschEnv` (cached BFS diameters on
  neighbour bitsets, linear quotients of the insertion order kept incrementally, Reisner only where those do not
  decide) and on the same environment written directly over :mod:`numtk.algebra` (every step recomputes the
  diameter with :func:`~numtk.algebra.dual_graph_diameter` and, where the reward needs it, linearity with
  :func:`~numtk.algebra.has_linear_resolution`); both with the shaped reward;
- **the policy's forward** (and forward + backward) for batches of 1, 16 and 128 states of 12 generators, for
  :class:`~numtk.torch.hirsch.EquivariantGNNPolicy` at its default size (width 64, 3 layers) and the demo's
  (32, 2), beside a plain MLP on the membership vector of the same width (the non-equivariant policy one would
  otherwise use);
- **the options agent**: one episode (:meth:`~numtk.torch.hirsch.OptionsAgent.run_episode`), one training
  update (16 episodes in lockstep and the PPO update) and a greedy-search run of the same number of steps.
"""

from __future__ import annotations

import math
import os
import time

import numpy as np

from benchmarks._timing import interleaved

__all__ = ["compare", "record_actions", "replay", "DirectEnv", "make_states"]


def record_actions(n: int, d: int, episodes: int, seed: int = 0, max_steps: int = 40) -> list:
    """Random legal actions (75 % adds, 5 % stop) of ``episodes`` episodes: a list of (seed, actions)."""
    from numtk.torch.hirsch import HirschEnv

    rng = np.random.default_rng(seed)
    env = HirschEnv(n, d, max_steps=max_steps, reward="shaped")
    C = env.n_candidates
    out = []
    for ep in range(episodes):
        _, info = env.reset(seed=ep)
        acts, done = [], False
        while not done:
            mask = info["action_mask"]
            legal = np.flatnonzero(mask[:2 * C])
            adds = legal[legal < C]
            if mask[-1] and rng.random() < 0.05:
                a = env.stop_action
            else:
                a = int(rng.choice(adds if len(adds) and rng.random() < 0.75 else legal))
            _, _, term, trunc, info = env.step(a)
            acts.append(a)
            done = term or trunc
        out.append((ep, acts))
    return out


def replay(env, trajectory) -> float:
    """Replay the recorded episodes on ``env``; returns the total reward."""
    total = 0.0
    for seed, acts in trajectory:
        env.reset(seed=seed)
        for a in acts:
            total += env.step(a)[1]
    return total


class DirectEnv:
    """The environment's step written directly over numtk.algebra: no cache, nothing incremental."""

    def __init__(self, n: int, d: int, max_steps: int = 40, step_cost: float = 0.01):
        from numtk.torch.hirsch import candidate_subsets

        self.n, self.d, self.max_steps, self.step_cost = n, d, max_steps, step_cost
        self.subsets = candidate_subsets(n, d)
        self.C = len(self.subsets)

    def reset(self, seed=None):
        self.gens, self.t = [], 0
        return self._obs(), {"action_mask": self._mask()}

    def _obs(self):
        present = set(self.gens)
        return np.array([s in present for s in self.subsets], dtype=np.int8)

    def _mask(self):
        p = self._obs()
        return np.concatenate([1 - p, p, np.array([1 if self.gens else 0], dtype=np.int8)])

    def _linear(self):
        from numtk.algebra import has_linear_resolution

        return bool(self.gens) and has_linear_resolution(self.gens, self.n, d=self.d)

    def step(self, a):
        from numtk.algebra import dual_graph_diameter

        self.t += 1
        C, s = self.C, None
        stop = a == 2 * C and bool(self.gens)
        if a < C and self.subsets[a] not in self.gens:
            self.gens.append(self.subsets[a])
        elif C <= a < 2 * C and self.subsets[a - C] in self.gens:
            self.gens.remove(self.subsets[a - C])
        diam = dual_graph_diameter(self.gens, self.d) if self.gens else 0
        found = self.d < diam < math.inf and self._linear()
        term = stop or found
        trunc = not term and self.t >= self.max_steps
        r = -self.step_cost
        if term or trunc:
            s = self._linear()
            r += (diam - self.d) if s else -(self.d + 1)
        return self._obs(), r, term, trunc, {"action_mask": self._mask(), "diameter": diam}


def make_states(n: int, d: int, batch: int, m: int = 12, seed: int = 0) -> list:
    from numtk.torch.hirsch import candidate_subsets

    rng = np.random.default_rng(seed)
    subsets = candidate_subsets(n, d)
    return [[subsets[i] for i in rng.choice(len(subsets), size=m, replace=False)] for _ in range(batch)]


def _env_table(quick: bool, repeat: int) -> None:
    from numtk.torch.hirsch import HirschEnv

    n, d = (6, 3) if quick else (7, 3)
    traj = record_actions(n, d, 40 if quick else 100)
    steps = sum(len(a) for _, a in traj)

    def fresh():      # a new environment each call: the cache starts empty, as in a first episode batch
        return replay(HirschEnv(n, d, max_steps=40, reward="shaped"), traj)

    warm = HirschEnv(n, d, max_steps=40, reward="shaped")
    calls = {"numtk HirschEnv (fresh caches)": fresh,
             "numtk HirschEnv (warm caches)": lambda: replay(warm, traj),
             "direct over numtk.algebra": lambda: replay(DirectEnv(n, d), traj)}
    t = interleaved(calls, repeat=repeat)
    same = {round(v, 9) for v in t.results.values()}
    base = t.medians["direct over numtk.algebra"]
    print(f"Environment steps: {len(traj)} recorded episodes of random legal actions, {steps} steps, n = {n}, d = {d} "
          f"(C = {math.comb(n, d)} candidates), shaped reward; medians of {repeat} interleaved rounds")
    print(f"  {'contestant':<34} {'steps/s':>10} {'us/step':>9} {'speed-up':>9}")
    for name in calls:
        print(f"  {name:<34} {steps / t.medians[name]:>10.0f} {1e6 * t.medians[name] / steps:>9.1f} "
              f"{base / t.medians[name]:>8.1f}x")
    print(f"  (every contestant returns the same total reward: {len(same) == 1})")


def _policy_table(quick: bool, repeat: int) -> None:
    import torch

    from numtk.torch.hirsch import EquivariantGNNPolicy

    n, d = 7, 3
    C = math.comb(n, d)
    sizes = [(64, 3), (32, 2)]
    batches = [1, 16] if quick else [1, 16, 128]
    print(f"Policy forward on n = {n}, d = {d} ({2 * C + 1} actions), states of 12 generators, float32; medians of "
          f"{repeat} interleaved rounds, ms per batch")
    print(f"  {'network':<34} " + " ".join(f"{f'B={b} fwd':>10} {f'B={b} f+b':>10}" for b in batches))
    nets = {f"GNN width {h}, {L} layers": EquivariantGNNPolicy(h, L, rng=0) for h, L in sizes}

    class MLP(torch.nn.Module):
        def __init__(self, h):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(C, h), torch.nn.ReLU(), torch.nn.Linear(h, h),
                                           torch.nn.ReLU(), torch.nn.Linear(h, 2 * C + 2))

        def forward(self, states, n, d):
            from numtk.torch.hirsch import candidate_subsets

            idx = {s: i for i, s in enumerate(candidate_subsets(n, d))}
            x = torch.zeros(len(states), C)
            for b, s in enumerate(states):
                x[b, [idx[g] for g in s]] = 1.0
            out = self.net(x)
            return out[:, :-1], out[:, -1]

    nets["MLP on the membership vector (64)"] = MLP(64)
    for name, net in nets.items():
        row = []
        for b in batches:
            states = make_states(n, d, b)

            def fwd():
                with torch.no_grad():
                    return net(states, n, d)[0].shape

            def fwd_bwd():
                net.zero_grad()
                out = net(states, n, d)
                (out[0].masked_fill(torch.isinf(out[0]), 0).sum() + out[1].sum()).backward()

            t = interleaved({"f": fwd, "fb": fwd_bwd}, repeat=repeat, min_time=0.02)
            row.append(f"{1e3 * t.medians['f']:>10.2f} {1e3 * t.medians['fb']:>10.2f}")
        print(f"  {name:<34} " + " ".join(row))


def _agent_table(quick: bool, repeat: int) -> None:
    from numtk.torch.hirsch import EquivariantGNNPolicy, HirschEnv, OptionsAgent, greedy_search

    n, d = 7, 3
    agent = OptionsAgent(EquivariantGNNPolicy(32, 2, rng=0), EquivariantGNNPolicy(32, 2, rng=1))
    env = HirschEnv(n, d, max_steps=40, reward="shaped")
    counter = {"seed": 0, "steps": []}

    def episode():
        counter["seed"] += 1
        ep = agent.run_episode(env, rng=counter["seed"])
        counter["steps"].append(env.steps)
        return ep.diameter

    upd = {}

    def update():
        res = agent.train(env, steps=1, rng=counter["seed"], batch_episodes=16)
        upd["steps"] = res.env_steps
        return res.env_steps

    def greedy():
        return greedy_search(HirschEnv(n, d), steps=upd.get("steps", 300), rng=0).env_steps

    t = interleaved({"one episode (run_episode)": episode, "one update: 16 episodes + PPO": update,
                     "greedy_search, same steps as one update": greedy}, repeat=max(3, repeat - 2))
    print(f"The options agent on n = {n}, d = {d} (policies of width 32, 2 layers, as in the demo); medians of "
          f"{max(3, repeat - 2)} interleaved rounds")
    print(f"  {'contestant':<42} {'ms':>9} {'env steps':>10} {'steps/s':>9}")
    mean_ep = float(np.mean(counter["steps"]))
    rows = [("one episode (run_episode)", mean_ep), ("one update: 16 episodes + PPO", upd["steps"]),
            ("greedy_search, same steps as one update", upd["steps"])]
    for name, steps in rows:
        ms = 1e3 * t.medians[name]
        print(f"  {name:<42} {ms:>9.1f} {steps:>10.0f} {1e3 * steps / ms:>9.0f}")


def compare(*, quick: bool = False, options=None) -> None:
    from numtk.torch._common import torch_threads

    repeat = getattr(options, "repeat", None) or (5 if quick else 9)
    t0 = time.perf_counter()
    with torch_threads(1):
        _env_table(quick, repeat)
        _policy_table(quick, repeat)
        _agent_table(quick, repeat)
    print(f"  (CPU, torch on 1 thread, {os.cpu_count()} cores here; the paper reports no timings. The options "
          f"agent's steps include its batched GNN forwards; greedy's 'steps' are candidate evaluations)")
    print(f"  [{time.perf_counter() - t0:.1f} s]")
