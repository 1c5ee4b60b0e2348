"""Side-by-side timings of numtk.games against its anchors (OpenSpiel, HiGHS, a NumPy reference).

Used by ``bench/compare.py --games`` and by the asv suite ``bench_games.py``. Each row times numtk
and the anchor in the same process, interleaved, and prints the ratio: absolute times wander on a
shared machine, ratios much less.
"""

from __future__ import annotations

import time

import numpy as np

from benchmarks._timing import interleaved

__all__ = ["compare", "leduc_population", "numpy_best_response", "random_matrix"]


def random_matrix(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1.0, 1.0, size=(n, n))


def leduc_population(k: int, seed: int = 0):
    from numtk.games import LeducPoker

    game = LeducPoker()
    rng = np.random.default_rng(seed)
    stack = np.stack([game.uniform_policy()] + [game.random_policy(rng=rng, deterministic=True) for _ in range(k - 1)])
    return game, stack


def numpy_best_response(sf, player: int, opponent_plan: np.ndarray) -> float:
    """The reference: one SciPy sparse product, then backward induction in a Python loop."""
    c = sf.payoff @ opponent_plan if player == 0 else -(sf.payoff_T @ opponent_plan)
    ps, fs, na = sf.parent_sequence[player], sf.first_sequence[player], sf.n_actions[player]
    for I in range(len(ps) - 1, -1, -1):
        c[ps[I]] += c[fs[I]:fs[I] + na[I]].max()
    return float(c[0])


def _openspiel_tabular(game, os_game, policy):
    from open_spiel.python import policy as os_policy

    tab = os_policy.TabularPolicy(os_game)
    keys = game.infoset_keys[0] + game.infoset_keys[1]
    for row, key in enumerate(keys):
        tab.action_probability_array[tab.state_lookup[key]] = policy[row, :tab.action_probability_array.shape[1]]
    return tab


def _row(task, ours, anchor_name, anchor, note=""):
    ratio = f"{anchor / ours:8.1f}x" if anchor and ours else "       -"
    anchor_txt = f"{anchor:10.4f} s" if anchor else "         - "
    print(f"{task:<44} {ours:10.4f} s  {anchor_name:<26} {anchor_txt}  {ratio}  {note}")


def compare(quick: bool = False) -> None:
    from numtk.games import (LeducPoker, nash_conv, nash_equilibrium, population_exploitability, psro,
                             MatrixGame)

    print("== games ==")
    print(f"{'task':<44} {'numtk':>12}  {'anchor':<26} {'anchor time':>12}  {'speed-up':>9}  agreement")
    try:
        import pyspiel
        from open_spiel.python.algorithms import exploitability as os_expl
    except ImportError:
        pyspiel = None
    leduc = LeducPoker()
    t0 = time.perf_counter()
    leduc.sequence_form()
    nash_conv(leduc, leduc.uniform_policy())
    print(f"(Leduc sequence form built and cached in {time.perf_counter() - t0:.3f} s)")
    rng = np.random.default_rng(0)
    pol = leduc.random_policy(rng=rng)

    # 1. NashConv of a random Leduc policy: numtk, OpenSpiel (C++ and Python) and the NumPy reference.
    sf = leduc.sequence_form()
    r0, r1 = leduc.policy_to_sequence(pol)
    calls = {"numtk": lambda: nash_conv(leduc, pol),
             "numpy": lambda: numpy_best_response(sf, 0, r1) + numpy_best_response(sf, 1, r0)}
    if pyspiel is not None:
        os_game = pyspiel.load_game("leduc_poker")
        tab = _openspiel_tabular(leduc, os_game, pol)
        calls["openspiel-c++"] = lambda: pyspiel.nash_conv(os_game, tab.to_dict())
        calls["openspiel-python"] = lambda: os_expl.nash_conv(os_game, tab)
    t = interleaved(calls, {"numtk": 21, "numpy": 5, "openspiel-c++": 3, "openspiel-python": 3}, warmup=False,
                    max_single=30.0)
    ours, v = t.medians["numtk"], t.results["numtk"]
    if pyspiel is not None:
        anchor, va = t.medians["openspiel-c++"], t.results["openspiel-c++"]
        _row("NashConv, random Leduc policy", ours, "OpenSpiel nash_conv (C++)", anchor, f"|diff| {abs(v - va):.1e}")
        anchor_py, va = t.medians["openspiel-python"], t.results["openspiel-python"]
        _row("", ours, "OpenSpiel nash_conv (Python)", anchor_py, f"|diff| {abs(v - va):.1e}")
    ref, vr = t.medians["numpy"], t.results["numpy"]
    _row("", ours, "NumPy reference BR", ref, f"|diff| {abs(v - vr):.1e}")

    # 2. PE of a 30-policy Leduc population (one LP).
    game, stack = leduc_population(30)
    t = interleaved({"numtk": lambda: population_exploitability(game, stack)}, 3, warmup=False, max_single=30.0)
    ours, res = t.medians["numtk"], t.results["numtk"]
    print(f"{'PE, Leduc, 30 policies (one HiGHS LP)':<44} {ours:10.4f} s  "
          f"target <= 0.3 s; GlobalPSRO's SLSQP ~17 s for 5 policies; PE = {res.value:.6f}")

    # 3. CFR+ on Leduc.
    iters = 100 if quick else 1000
    calls = {"numtk": lambda: nash_equilibrium(leduc, "cfr+", max_iter=iters, tol=0.0)}
    if pyspiel is not None:
        def os_cfr():
            solver = pyspiel.CFRPlusSolver(os_game)
            for _ in range(iters):
                solver.evaluate_and_update_policy()
            return pyspiel.exploitability(os_game, solver.average_policy())
        calls["openspiel"] = os_cfr
    t = interleaved(calls, 1, warmup=False)
    ours, res = t.medians["numtk"], t.results["numtk"]
    if pyspiel is not None:
        anchor, va = t.medians["openspiel"], t.results["openspiel"]
        _row(f"CFR+ Leduc, {iters} iterations", ours, "pyspiel.CFRPlusSolver", anchor,
             f"expl numtk {res.exploitability:.2e} vs {va:.2e}")
    else:
        _row(f"CFR+ Leduc, {iters} iterations", ours, "(open_spiel not installed)", 0.0)

    # 4. Nash of a random n x n game: HiGHS (best variant) against RM+.
    n = 300 if quick else 1000
    M = random_matrix(n)
    game_m = MatrixGame(M)
    for tol in (1e-4, 1e-6):
        t = interleaved({"rm+": lambda: nash_equilibrium(game_m, "rm+", tol=tol)}, 3, warmup=False, max_single=30.0)
        ours, res = t.medians["rm+"], t.results["rm+"]
        print(f"{f'Nash {n}x{n} U[-1,1], RM+ to gap {tol:g}':<44} {ours:10.4f} s  ({res.n_iter} iterations, "
              f"gap {res.gap:.1e})")
    t = interleaved({method: (lambda method=method: nash_equilibrium(game_m, "lp", options={"highs_method": method}))
                     for method in ("highs-ipm", "highs-ds")}, 1, warmup=False)
    anchor, lp = t.medians["highs-ipm"], t.results["highs-ipm"]
    _row(f"Nash {n}x{n}, LP", anchor, "(numtk = HiGHS ipm)", 0.0, f"gap {lp.gap:.1e}")
    anchor_ds = t.medians["highs-ds"]
    print(f"{'':<44} HiGHS dual simplex {anchor_ds:.3f} s; auto picks "
          f"{'ipm' if n * n > 250_000 else 'dual simplex'}")

    # 5. Exact PSRO runs on Leduc.
    k = 12 if quick else 30
    t = interleaved({variant: (lambda variant=variant: psro(leduc, variant=variant, iterations=4 * k, n_candidates=8,
                                                            rng=0, options={"max_policies": k}))
                     for variant in ("psro", "global")}, 1, warmup=False)
    for variant in ("psro", "global"):
        secs, res = t.medians[variant], t.results[variant]
        print(f"{f'{variant} on Leduc to {k} policies':<44} {secs:10.4f} s  PE {res.history['pe'][-1]:.4f} "
              f"(prototype at 30: psro 0.698, global 0.256)")
