"""The CAMEL demonstration used by ``python -m numtk tour`` and ``python -m numtk demo camel``.

A planted capacity-aware world (:func:`~numtk.mixture.planted_law`: M = 5 training domains, V = 5 validation
sets) in which the best mixture moves with model size. Proxy runs at five sizes from 1.2e7 to 1.5e8
("activated" parameters) are fitted by CAMEL's capacity-aware law and by the laws it is compared with (the
separable and additive laws, and the Data Mixing Law per size); each law then predicts the losses at the target
size 1.2e9 (8x beyond the largest proxy), chooses the mixture of the target, and is scored by its extrapolation
error and by the regret of its choice under the true law, F(r_hat) - F(r*). The compute split that
:func:`~numtk.mixture.allocate_budget` recommends is compared with the uniform sweep of the same budget. The
same laws are then fitted on RegMix's released runs (1M and 60M proxies) and scored on its 1B runs.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

__all__ = ["run", "planted_world", "optimal_path", "allocation_table", "regmix_table", "plot_world",
           "FIT_SIZES", "TARGET_SIZE", "FORMS"]

#: the proxy sizes of the planted world (activated parameters, as in CAMEL's MoE sweeps) and the target
FIT_SIZES = tuple(float(s) for s in np.geomspace(1.2e7, 1.5e8, 5))
TARGET_SIZE = 1.2e9
#: the laws compared, CAMEL's first
FORMS = ("camel", "separable", "additive", "data_mixing")
#: log-normal noise of the planted runs (0.1% of the loss, the scale of seed-to-seed variation)
NOISE = 1e-3


def _fmt_mix(r) -> str:
    return "(" + " ".join(f"{v:.2f}" for v in np.asarray(r)) + ")"


def _average_loss(law, size, R) -> np.ndarray:
    """The average over validation sets of a law's losses at one size, for the mixtures R (rows)."""
    from numtk.mixture import mixture_features

    pred = np.asarray(law.predict(mixture_features(size, np.atleast_2d(R))))
    return pred.mean(axis=1) if pred.ndim == 2 else pred


def planted_world(*, quick: bool = True, rng: int = 0) -> dict[str, Any]:
    """Fit every law of :data:`FORMS` on the planted world's proxy runs and score it at the target.

    Returns a dict: ``truth`` (the planted law), ``X``, ``y`` (the proxy runs), ``X_test``, ``y_test`` (noise-free
    losses of 64 further mixtures at the target size), ``best`` (the true optimum at the target, a Result of
    :func:`~numtk.mixture.optimal_mixture`) and ``laws``: form -> dict with ``law`` (fitted), ``seconds`` (fit
    time), ``prediction`` (at ``X_test``), ``error`` (relative errors there, (64, V)), ``mixture`` (its chosen
    mixture at the target) and ``regret`` (F(mixture) - F(r*) under the true law, F the average loss).
    """
    from numtk.mixture import MixtureLaw, mixture_features, optimal_mixture, planted_law, simulate_runs

    truth = planted_law(5, 5, rng=rng)
    n_mix = 20 if quick else 40
    X, y = simulate_runs(truth, FIT_SIZES, n_mix, noise=NOISE, rng=rng + 1)
    test_mix = np.random.default_rng(rng + 2).dirichlet(np.ones(5), 64)
    X_test = mixture_features(TARGET_SIZE, test_mix)
    y_test = truth.predict(X_test)
    best = optimal_mixture(truth, TARGET_SIZE)
    laws = {}
    for form in FORMS:
        t0 = time.perf_counter()
        law = MixtureLaw(form, n_starts=8 if quick else 32, rng=rng).fit(X, y)
        seconds = time.perf_counter() - t0
        pred = law.predict(X_test)
        choice = optimal_mixture(law, TARGET_SIZE).mixture
        regret = float(_average_loss(truth, TARGET_SIZE, choice)[0] - best.value)
        laws[form] = dict(law=law, seconds=seconds, prediction=pred, error=np.abs(pred / y_test - 1.0),
                          mixture=np.asarray(choice), regret=regret)
    return dict(truth=truth, X=X, y=y, X_test=X_test, y_test=y_test, best=best, laws=laws)


def optimal_path(law, sizes) -> np.ndarray:
    """The optimal mixture of ``law`` (average loss over its validation sets) at each size: (len(sizes), M)."""
    from numtk.mixture import optimal_mixture

    return np.array([optimal_mixture(law, float(s)).mixture for s in sizes])


def _cost(size):
    """The compute of a proxy run: 6 N D FLOPs with D = 20 N tokens (Chinchilla's ratio)."""
    return 6.0 * size * 20.0 * size


def allocation_table(world: dict[str, Any], *, quick: bool = True, rng: int = 0) -> dict[str, Any]:
    """:func:`~numtk.mixture.allocate_budget` for the planted world, against the uniform sweep of the same budget.

    The budget is the compute of the sweep the laws were fitted on (every mixture at each of the five sizes,
    cost 6 N D with D = 20 N). The candidate sizes are eight sizes from 1.2e7 to 1.5e8; the pilot law is the
    fitted CAMEL law. Both designs are scored by simulation: runs drawn from the true law with the same noise,
    CAMEL refitted, and the error of its prediction of F(r*) at the target, over ``reps`` replications (3 with
    ``quick``, 50 otherwise). Returns a dict with ``result`` (the allocation), ``uniform_runs`` (per size),
    ``errors`` (design -> array of absolute relative errors) and ``budget``.
    """
    from numtk.mixture import MixtureLaw, allocate_budget, mixture_features, simulate_runs

    truth, pilot = world["truth"], world["laws"]["camel"]["law"]
    n_mix = len(world["X"]) // len(FIT_SIZES)
    budget = n_mix * sum(_cost(s) for s in FIT_SIZES)
    candidates = np.geomspace(FIT_SIZES[0], FIT_SIZES[-1], 8)
    res = allocate_budget(budget, candidates, _cost, pilot, target_size=TARGET_SIZE, n_mixtures=16, rng=rng)
    r_star = world["best"].mixture
    true_value = float(world["best"].value)
    reps = 6 if quick else 50
    gen = np.random.default_rng(rng + 10)
    errors = {"allocate_budget": [], "uniform": []}
    for _ in range(reps):
        # the recommended design: res.runs[s, j] runs of mixture j at candidate size s
        rows, ys = [], []
        for s, size in enumerate(candidates):
            for j, count in enumerate(res.runs[s]):
                if count:
                    Xs, ys_ = simulate_runs(truth, size, np.repeat(res.mixtures[j][None], count, axis=0),
                                            noise=NOISE, rng=gen)
                    rows.append(Xs)
                    ys.append(ys_)
        designs = {"allocate_budget": (np.vstack(rows), np.vstack(ys)),
                   "uniform": simulate_runs(truth, FIT_SIZES, n_mix, noise=NOISE, rng=gen)}
        for name, (Xd, yd) in designs.items():
            law = MixtureLaw("camel", n_starts=4 if quick else 16, rng=rng).fit(Xd, yd)
            pred = float(np.mean(law.predict(mixture_features(TARGET_SIZE, r_star[None]))))
            errors[name].append(abs(pred / true_value - 1.0))
    return dict(result=res, uniform_runs=np.full(len(FIT_SIZES), n_mix), candidates=candidates,
                errors={k: np.array(v) for k, v in errors.items()}, budget=budget)


def regmix_table(*, quick: bool = True) -> dict[str, Any]:
    """The laws on RegMix's released runs: fitted on the 256 mixtures run at 1M and 60M (the Pile-CC loss, with
    E fixed at 0: two sizes cannot identify it), scored on the 64 1B runs by Spearman correlation and mean
    absolute error; beside them RegMix's own linear regression from the mixture to the 1M loss (ranking only).
    Returns form -> dict(spearman, mae, seconds)."""
    from scipy.stats import spearmanr
    from sklearn.linear_model import LinearRegression

    from numtk.datasets import load_regmix
    from numtk.mixture import MixtureLaw, mixture_features

    data = load_regmix()
    t = data.target
    small, mid, big = data.blocks["1M"], data.blocks["60M"], data.blocks["1B"]
    shared = small.split == "test"
    X = np.vstack([mixture_features(small.model_size, small.mixtures[shared]),
                   mixture_features(mid.model_size, mid.mixtures)])
    y = np.concatenate([small.losses[shared, t], mid.losses[:, t]])
    X_big = mixture_features(big.model_size, big.mixtures)
    y_big = big.losses[:, t]
    table = {}
    for form in ("camel", "separable", "additive"):
        t0 = time.perf_counter()
        law = MixtureLaw(form, fixed={"E": 0.0}, n_starts=2 if quick else 32, rng=0).fit(X, y)
        seconds = time.perf_counter() - t0
        pred = law.predict(X_big)
        table[form] = dict(spearman=float(spearmanr(pred, y_big).statistic),
                           mae=float(np.mean(np.abs(pred - y_big))), seconds=seconds)
    t0 = time.perf_counter()
    lin = LinearRegression().fit(small.mixtures[~shared], small.losses[~shared, t])
    table["RegMix linear (1M)"] = dict(spearman=float(spearmanr(lin.predict(big.mixtures), y_big).statistic),
                                       mae=float("nan"), seconds=time.perf_counter() - t0)
    return table


def run(*, quick: bool = True, out=print, plot: str | None = None) -> list[dict]:
    """CAMEL against the separable, additive and per-size Data Mixing laws on a planted world where the best
    mixture moves with size, the compute split of allocate_budget, and the same laws on RegMix's real runs.

    Returns the tour's table rows. With ``plot``, saves a figure (predicted against true loss at the target, and
    the optimal mixture against model size, true and fitted) to that file (needs matplotlib).
    """
    world = planted_world(quick=quick)
    truth, laws, best = world["truth"], world["laws"], world["best"]
    n_runs, n_mix = len(world["X"]), len(world["X"]) // len(FIT_SIZES)
    out(f"CAMEL on a planted capacity-aware world: M = 5 domains, V = 5 validation sets; {n_runs} proxy runs "
        f"({n_mix} mixtures x 5 sizes {FIT_SIZES[0]:.1e}-{FIT_SIZES[-1]:.1e}, noise {NOISE:g}), target "
        f"{TARGET_SIZE:.1e} (8x):")
    path_sizes = (FIT_SIZES[0], FIT_SIZES[-1], TARGET_SIZE)
    true_path = optimal_path(truth, path_sizes)
    out("  true best mixture: " + "   ".join(f"N={s:.1e} {_fmt_mix(r)}" for s, r in zip(path_sizes, true_path)))
    out("  form         params  fit time  error at target, mean / max  chosen mixture at target    regret F(r)-F(r*)")
    for form, d in laws.items():
        out(f"  {form:<12} {d['law'].n_params_:>6}  {d['seconds']:>6.2f} s  {100 * d['error'].mean():>12.3f}% / "
            f"{100 * d['error'].max():>7.3f}%  {_fmt_mix(d['mixture'])}  {d['regret']:.2e}")
    out(f"  {'true law':<12} {'':>6}  {'':>8}  {'':>28}  {_fmt_mix(best.mixture)}  0")
    camel = laws["camel"]["law"]
    iv = camel.predict_interval(world["X_test"], level=0.95)
    cover = float(np.mean((iv.lower <= world["y_test"]) & (world["y_test"] <= iv.upper)))
    width = float(np.mean((iv.upper - iv.lower) / 2 / iv.prediction))
    out(f"  camel's 95% delta-method intervals at the target: mean half-width {100 * width:.3f}%, cover "
        f"{100 * cover:.0f}% of the true losses")

    alloc = allocation_table(world, quick=quick)
    res = alloc["result"]
    out(f"compute split (cost 6 N D, D = 20 N; budget = the sweep above, {alloc['budget']:.2e} FLOPs), "
        f"pilot = the fitted camel law:")
    out("  candidate sizes        " + " ".join(f"{s:>8.1e}" for s in alloc["candidates"]))
    out("  allocate_budget runs   " + " ".join(f"{int(n):>8d}" for n in res.runs_per_size)
        + f"   (budget fractions {' '.join(f'{f:.2f}' for f in res.budget_fraction)})")
    out(f"  uniform sweep runs     {n_mix} at each of the 5 fitting sizes (the same budget)")
    e_a, e_u = alloc["errors"]["allocate_budget"], alloc["errors"]["uniform"]
    out(f"  error of camel's prediction of F(r*) at the target, {len(e_a)} simulated replications: "
        f"allocate_budget {100 * np.median(e_a):.3f}% (median), uniform {100 * np.median(e_u):.3f}%")

    t0 = time.perf_counter()
    table = regmix_table(quick=quick)
    out(f"RegMix's released runs (17 Pile domains, Pile-CC loss): fitted on 256 mixtures at 1M and 60M (E = 0), "
        f"predicting the 64 1B runs ({time.perf_counter() - t0:.1f} s):")
    out("  form                  Spearman    MAE")
    for form, d in table.items():
        mae = "  (ranks only)" if not np.isfinite(d["mae"]) else f"{d['mae']:.4f}"
        out(f"  {form:<20} {d['spearman']:>9.3f}   {mae}")

    sep = laws["separable"]
    rows = [{"area": "mixture", "method": "CAMEL law, planted world, 8x extrapolation", "n": n_runs,
             "result": f"err {100 * laws['camel']['error'].mean():.2f}%, regret {laws['camel']['regret']:.1e}",
             "vs anchor": f"separable {100 * sep['error'].mean():.2f}%, {sep['regret']:.1e}",
             "speed": f"{laws['camel']['seconds']:.2f} s"},
            {"area": "mixture", "method": "mixture laws, RegMix 1M+60M -> 1B", "n": 512,
             "result": f"Spearman camel {table['camel']['spearman']:.3f}, additive {table['additive']['spearman']:.3f}",
             "vs anchor": f"RegMix linear {table['RegMix linear (1M)']['spearman']:.3f}",
             "speed": f"{table['camel']['seconds']:.2f} s"}]
    if plot:
        plot_world(world, plot)
        out(f"figure saved to {plot}")
    return rows


def plot_world(world: dict[str, Any], path: str, *, sizes=None) -> None:
    """Two panels: predicted against true loss at the target size (CAMEL, the separable law, the Data Mixing Law),
    and the optimal mixture (stacked shares) against model size, true (filled) and CAMEL's (dashed boundaries).

    ``sizes``: the sizes of the second panel (default 17 from the smallest proxy to 10x the target)."""
    from numtk._lib._optional import pyplot

    plt = pyplot()
    sizes = np.geomspace(FIT_SIZES[0], 10 * TARGET_SIZE, 17) if sizes is None else np.asarray(sizes)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    y_true = world["y_test"].ravel()
    for form, marker in (("separable", "s"), ("data_mixing", "^"), ("camel", "o")):
        d = world["laws"][form]
        ax1.plot(y_true, np.asarray(d["prediction"]).ravel(), marker, ms=3, alpha=0.6,
                 label=f"{form} (mean error {100 * d['error'].mean():.2f}%)")
    lo, hi = y_true.min(), y_true.max()
    ax1.plot([lo, hi], [lo, hi], color="grey", lw=0.8)
    ax1.set_xlabel(f"true loss at N = {TARGET_SIZE:.1e} (64 mixtures x 5 validation sets)")
    ax1.set_ylabel("predicted loss")
    ax1.set_title(f"fitted on 5 sizes {FIT_SIZES[0]:.1e}-{FIT_SIZES[-1]:.1e}", fontsize=9)
    ax1.legend(fontsize=8)

    true_path = optimal_path(world["truth"], sizes)
    fit_path = optimal_path(world["laws"]["camel"]["law"], sizes)
    ax2.stackplot(sizes, true_path.T, labels=[f"domain {j}" for j in range(true_path.shape[1])], alpha=0.55)
    cum = np.cumsum(fit_path, axis=1)[:, :-1]
    for j in range(cum.shape[1]):
        ax2.plot(sizes, cum[:, j], "k--", lw=1, label="camel fit" if j == 0 else None)
    ax2.axvspan(FIT_SIZES[0], FIT_SIZES[-1], color="grey", alpha=0.12, lw=0)
    ax2.axvline(TARGET_SIZE, color="k", lw=0.8)
    ax2.set_xscale("log")
    ax2.set_xlim(sizes[0], sizes[-1])
    ax2.set_ylim(0, 1)
    ax2.set_xlabel("model size N (grey: proxy sizes; line: target)")
    ax2.set_ylabel("optimal mixture (stacked shares)")
    ax2.set_title("true optimum (filled) and CAMEL's (dashed)", fontsize=9)
    ax2.legend(fontsize=7, loc="upper left", ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
