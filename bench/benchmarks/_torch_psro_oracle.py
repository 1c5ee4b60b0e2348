"""Side-by-side runs of numtk.torch.psro_oracle for ``bench/compare.py --psro-rl``: environment steps per second of
the rollout loop against OpenSpiel's Python RL environment, and the time of one oracle call.

- **Rollouts**, Kuhn and Leduc poker, both players uniformly random: numtk's :class:`~numtk.torch.psro_oracle.
  RolloutEnv` plays E = 16384 episodes at once (``--quick``: 8192) (vectorised over episodes, NumPy), against
  ``open_spiel.python.rl_environment.Environment`` stepped one action at a time with a random legal action (the
  loop an RL agent of OpenSpiel runs; it builds each step's information-state tensor, which numtk's loop replaces
  by the infoset's row id). An environment step is one move of either player (one ``Environment.step``), in both.
  Timed in interleaved rounds (:func:`benchmarks._timing.interleaved`); the ratio is numtk's steps per second over
  OpenSpiel's.
- **One oracle call**: :class:`~numtk.torch.psro_oracle.RLBestResponseOracle` with the default network
  (3 x 128) and 20000 environment steps (``--quick``: 5000) against the uniform policy, Kuhn and Leduc, torch on
  one thread, with the exact value of the tabularised response (numtk.games) beside the exact best response's.
"""

from __future__ import annotations

import os
import time

from benchmarks._timing import interleaved

__all__ = ["compare", "numtk_rollouts", "openspiel_rollouts", "EPISODES"]

EPISODES = {"full": (16384, 2000), "quick": (8192, 500)}   # numtk's batch, OpenSpiel's episodes per sample


def numtk_rollouts(game, episodes: int, seed: int = 0):
    """A callable playing ``episodes`` uniform-random episodes at once; returns the environment steps taken."""
    import numpy as np

    from numtk.torch.psro_oracle import RolloutEnv

    env = RolloutEnv(game)
    u = game.uniform_policy()
    gen = np.random.default_rng(seed)
    zeros = np.zeros(episodes, dtype=np.int64)

    def call():
        seat = gen.integers(2, size=episodes)
        return env.rollout([u], u, zeros, seat, zeros, rng=gen)["steps"]
    return call


def openspiel_rollouts(name: str, episodes: int, seed: int = 0):
    """A callable playing ``episodes`` episodes of OpenSpiel's RL environment with random legal actions."""
    import numpy as np
    from open_spiel.python import rl_environment

    env = rl_environment.Environment(name)
    gen = np.random.default_rng(seed)

    def call():
        steps = 0
        for _ in range(episodes):
            ts = env.reset()
            while not ts.last():
                p = ts.observations["current_player"]
                legal = ts.observations["legal_actions"][p]
                ts = env.step([legal[int(gen.integers(len(legal)))]])
                steps += 1
        return steps
    return call


def _rollout_table(quick: bool, repeat: int) -> None:
    from numtk.games import KuhnPoker, LeducPoker

    E, E_os = EPISODES["quick" if quick else "full"]
    print(f"Rollouts, uniformly random players: environment steps per second (numtk: {E} episodes at once; "
          f"OpenSpiel's rl_environment: {E_os} episodes one step at a time); medians of {repeat} interleaved rounds")
    print(f"  {'game':<12} {'numtk steps/s':>14} {'OpenSpiel steps/s':>18} {'ratio':>8}")
    try:
        import open_spiel  # noqa: F401
        have_os = True
    except ImportError:  # pragma: no cover
        have_os = False
    for name, game in (("kuhn_poker", KuhnPoker()), ("leduc_poker", LeducPoker())):
        calls = {"numtk": numtk_rollouts(game, E)}
        if have_os:
            calls["openspiel"] = openspiel_rollouts(name, E_os)
        t = interleaved(calls, repeat=repeat)
        ours = t.results["numtk"] / t.medians["numtk"]
        if have_os:
            theirs = t.results["openspiel"] / t.medians["openspiel"]
            print(f"  {name:<12} {ours:>14,.0f} {theirs:>18,.0f} {ours / theirs:>7.0f}x")
        else:  # pragma: no cover
            print(f"  {name:<12} {ours:>14,.0f} {'(not installed)':>18} {'-':>8}")


def _oracle_table(quick: bool) -> None:
    import numpy as np

    from numtk.games import KuhnPoker, LeducPoker, best_response, expected_payoff
    from numtk.torch.psro_oracle import RLBestResponseOracle

    steps = 5000 if quick else 20000
    print(f"One RLBestResponseOracle call against the uniform policy: PPO, 3 x 128 network, {steps} environment "
          f"steps, lr 1e-3 (after one untimed warm-up call)")
    print(f"  {'game':<12} {'seconds':>8} {'steps/s':>10} {'value (exact)':>14} {'exact BR value':>15}")
    RLBestResponseOracle(steps=500, lr=1e-3, rng=0)(KuhnPoker(), KuhnPoker().uniform_policy()[None], [[1.0]])
    for name, game in (("kuhn_poker", KuhnPoker()), ("leduc_poker", LeducPoker())):
        u = game.uniform_policy()
        oracle = RLBestResponseOracle(steps=steps, lr=1e-3, rng=0)
        t = time.perf_counter()
        (pi,) = oracle(game, u[None], [np.ones(1)])
        dt = time.perf_counter() - t
        value = 0.5 * (expected_payoff(game, (pi, u))[0] + expected_payoff(game, (u, pi))[1])
        best = 0.5 * (best_response(game, u, 0).value + best_response(game, u, 1).value)
        print(f"  {name:<12} {dt:>8.2f} {oracle.env_steps_ / dt:>10,.0f} {value:>14.4f} {best:>15.4f}")


def compare(*, quick: bool = False, options=None) -> None:
    from numtk.torch._common import torch_threads

    repeat = getattr(options, "repeat", None) or (5 if quick else 7)
    t0 = time.perf_counter()
    with torch_threads(1):
        _rollout_table(quick, repeat)
        _oracle_table(quick)
    print(f"  (CPU, one thread, {os.cpu_count()} cores here. Values are the tabularised response's payoff against "
          f"the uniform policy with random seats, evaluated exactly; the exact best response's value is the uniform "
          f"policy's exploitability, NashConv / 2)")
    print(f"  [{time.perf_counter() - t0:.1f} s]")
