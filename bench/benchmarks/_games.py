"""Side-by-side timings of numtk.games against its anchors (OpenSpiel, HiGHS, a NumPy reference).

Used by ``bench/compare.py --games`` and by the asv suite ``bench_games.py``. Each row times numtk
and the anchor in the same process, interleaved, and prints the ratio: absolute times wander on a
shared machine, ratios much less.
"""

from __future__ import annotations

import time

import numpy as np

from benchmarks._timing import interleaved

__all__ = ["compare", "double_oracle_scale", "leduc_population", "nash_first_order", "numpy_best_response",
           "random_matrix"]


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
    from numtk.games import LeducPoker, nash_conv, nash_equilibrium, population_exploitability, psro

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

    # 4. Nash of random n x n games: HiGHS against RM+ / PRM+ / CFR+, and the double oracle against both.
    nash_first_order(quick)
    double_oracle_scale(quick)

    # 5. Exact PSRO runs on Leduc.
    k = 12 if quick else 30
    t = interleaved({variant: (lambda variant=variant: psro(leduc, variant=variant, iterations=4 * k, n_candidates=8,
                                                            rng=0, options={"max_policies": k}))
                     for variant in ("psro", "global")}, 1, warmup=False)
    for variant in ("psro", "global"):
        secs, res = t.medians[variant], t.results[variant]
        print(f"{f'{variant} on Leduc to {k} policies':<44} {secs:10.4f} s  PE {res.history['pe'][-1]:.4f} "
              f"(prototype at 30: psro 0.698, global 0.256)")


def _gemv_loop(M: np.ndarray, repeat: int):
    """A callable running ``repeat`` single-threaded BLAS products ``M @ v`` (the machine's matvec rate)."""
    from threadpoolctl import threadpool_limits

    v = np.ones(M.shape[1], dtype=M.dtype)

    def run():
        with threadpool_limits(1):
            for _ in range(repeat):
                M @ v
    return run


def nash_first_order(quick: bool = False, sizes=None, tol: float = 1e-6) -> None:
    """RM+, PRM+ and CFR+ to ``tol`` against HiGHS on random U[-1,1] games, with a roofline of RM+.

    HiGHS is timed with dual simplex and interior point (numtk's ``'lp'`` picks one of them by size).
    On a matrix game CFR+ is RM+ (one infoset per player): same kernel, same iterations. The roofline:
    an RM+ iteration makes two matrix-vector products over the strategies in the current supports
    (float32 payoffs at this ``tol``), so its floor is about two single-thread BLAS sgemv of the same
    matrix times the supports' share (about a half each); ``iter/sgemv`` is an iteration's time in
    sgemv units, and ``level at`` the iteration count at which RM+ would tie the best HiGHS variant.
    """
    from numtk.games import MatrixGame, nash_equilibrium

    sizes = sizes or ((100, 200) if quick else (100, 200, 500, 1000))
    print(f"-- Nash of random n x n U[-1,1] games to gap {tol:g}: first-order methods against HiGHS "
          f"(seconds, medians of interleaved runs)")
    print(f"{'n':>5} {'method':<10} {'time':>9} {'vs best HiGHS':>14} {'iterations':>11} {'gap':>9} "
          f"{'us/iter':>8} {'iter/sgemv':>10} {'level at':>9}")
    for n in sizes:
        M = random_matrix(n)
        game = MatrixGame(M)
        calls = {"highs-ds": lambda: nash_equilibrium(game, "lp", options={"highs_method": "highs-ds"}),
                 "highs-ipm": lambda: nash_equilibrium(game, "lp", options={"highs_method": "highs-ipm"}),
                 "rm+": lambda: nash_equilibrium(game, "rm+", tol=tol),  # default: predictive='auto'
                 "rm+ plain": lambda: nash_equilibrium(game, "rm+", tol=tol, options={"predictive": False}),
                 "prm+": lambda: nash_equilibrium(game, "rm+", tol=tol, options={"predictive": True}),
                 "cfr+": lambda: nash_equilibrium(game, "cfr+", tol=tol, max_iter=100_000)}
        big = n >= 500
        gemv_repeat = 2000 if big else 20_000   # timed in the same rounds, so that load hits both alike
        calls["sgemv"] = _gemv_loop(M.astype(np.float32), gemv_repeat)
        calls["call"] = _gemv_loop(np.ones((1, 1), np.float32), gemv_repeat)   # Python's cost per product
        t = interleaved(calls, 1 if big else 3, warmup=not big, max_single=20.0)
        best = min(t.medians["highs-ds"], t.medians["highs-ipm"])
        sgemv = max(t.medians.pop("sgemv") - t.medians.pop("call"), 1e-9) / gemv_repeat
        del calls["sgemv"], calls["call"]
        for name in calls:
            secs, res = t.medians[name], t.results[name]
            row = f"{n:>5} {name:<10} {secs:9.4f} {best / secs:13.2f}x {res.n_iter:>11} {res.gap:9.1e}"
            if name in ("rm+", "rm+ plain", "prm+", "cfr+"):
                per = secs / res.n_iter
                row += f" {per * 1e6:8.1f} {per / sgemv:10.2f} {int(best / per):>9}"
            print(row)
        print(f"{'':>5} (one single-thread sgemv of the {n} x {n} float32 matrix: {sgemv * 1e6:.2f} us, "
              f"Python's call cost subtracted)")


def double_oracle_scale(quick: bool = False, sizes=None) -> None:
    """The double oracle (with its hand-over to the LP, and without where affordable) against numtk's LP
    and HiGHS's own method choice (``'highs'``) on random U[-1,1] games and on small-support games."""
    from numtk.games import MatrixGame, colonel_blotto, elo_game, nash_equilibrium

    sizes = sizes or ((200,) if quick else (200, 500, 1000))
    print("-- double oracle against the LP (seconds; 'lp' is numtk's choice of HiGHS variant, 'highs' HiGHS's own)")
    print(f"{'game':<22} {'method':<26} {'time':>9} {'vs lp':>8} {'rounds':>7} {'|value - lp|':>13}  how it ended")
    games = [(f"U[-1,1] {n} x {n}", MatrixGame(random_matrix(n))) for n in sizes]
    if not quick:
        games += [("elo_game(1000)", elo_game(1000, rng=0)), ("colonel_blotto(10, 5)", colonel_blotto(10, 5))]
    for label, game in games:
        n = game.shape[0]
        calls = {"lp": lambda: nash_equilibrium(game, "lp"),
                 "highs": lambda: nash_equilibrium(game, "lp", options={"highs_method": "highs"}),
                 "double_oracle": lambda: nash_equilibrium(game, "double_oracle")}
        if n <= 300:  # the rounds alone need ~n/2 LPs on a random game: 610 s at 1000 x 1000
            calls["double_oracle, no hand-over"] = lambda: nash_equilibrium(game, "double_oracle",
                                                                           options={"lp_switch": None})
        t = interleaved(calls, 1 if n >= 500 else 3, warmup=n < 500, max_single=20.0)
        lp = t.medians["lp"]
        for name in calls:
            secs, res = t.medians[name], t.results[name]
            print(f"{label:<22} {name:<26} {secs:9.3f} {secs / lp:7.2f}x {res.n_iter:>7} "
                  f"{abs(res.value - t.results['lp'].value):13.1e}  {res.message[:60]}")
