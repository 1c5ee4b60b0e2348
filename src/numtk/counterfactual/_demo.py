"""The group-counterfactual demonstration (``python -m numtk demo counterfactual``).

The protocol and its problems are library functions: :func:`numtk.counterfactual.protocol_problems`
gives the datasets, classifiers and groups, :func:`numtk.counterfactual.evaluate_group_maps` runs
step 5 of the paper's protocol on each group. :func:`run` calls them and prints the averages per
method and K; :func:`plot_synthetic` draws the maps of one ``synthetic_2d`` group.
"""

from __future__ import annotations

import time

import numpy as np

from numtk.counterfactual import (
    GroupCounterfactualMap,
    evaluate_group_maps,
    make_groups,
    protocol_problems,
)

__all__ = ["run", "plot_synthetic"]

_NAN = float("nan")


def _nanmean(values) -> float:
    a = np.asarray(values, dtype=np.float64)
    return float(np.mean(a[np.isfinite(a)])) if np.any(np.isfinite(a)) else _NAN


def _extreme(fn, values) -> float:
    a = np.asarray(values, dtype=np.float64)
    return float(fn(a[np.isfinite(a)])) if np.any(np.isfinite(a)) else _NAN


# --------------------------------------------------------------------------------------------
# the demonstration
# --------------------------------------------------------------------------------------------

_HEADER = (f"  {'method':<32}{'K':>5}  {'fit valid':>9}  {'held-out':>8}  {'cost':>7}  {'/Wachter':>8}  "
           f"{'ratio range':>15}  {'ms/fit':>8}")


def _summarise(results: list[list[tuple[str, object]]]) -> list[dict]:
    """Average each (method, K, variant) over the groups (every group gets one vote).

    ``results`` holds, per group, ``(variant, row)`` pairs of :func:`evaluate_group_maps` rows.
    """
    keys: dict[tuple, list] = {}
    for group in results:
        base = next((r.group_cost for _, r in group if r.method == "wachter"), _NAN)
        for variant, r in group:
            vs_wachter = r.group_cost / base if base > 0 else _NAN
            keys.setdefault((r.method, r.distortion, variant), []).append((r, vs_wachter))
    summary = []
    for (method, K, variant), pairs in keys.items():
        rs = [r for r, _ in pairs]
        summary.append(dict(
            method=method, variant=variant, K=K, groups=len(rs), n=sum(r.n for r in rs),
            fit=_nanmean([r.fit_validity for r in rs]), heldout=_nanmean([r.heldout_validity for r in rs]),
            group_valid=_nanmean([r.group_validity for r in rs]),
            cost=_nanmean([r.cost_train for r in rs]), ratio=_nanmean([v for _, v in pairs]),
            lo=_extreme(np.min, [r.min_ratio for r in rs]), hi=_extreme(np.max, [r.max_ratio for r in rs]),
            ms=1e3 * _nanmean([r.fit_time for r in rs])))
    return summary


def _pct(x: float) -> str:
    return "-" if not np.isfinite(x) else f"{100 * x:.1f}%"


def _line(s: dict) -> str:
    K = "-" if s["K"] is None else f"{s['K']:g}"
    fit = _pct(s["fit"]) if np.isfinite(s["fit"]) else _pct(s["group_valid"]) + "*"
    rr = "-" if not np.isfinite(s["lo"]) else f"[{s['lo']:.3f}, {s['hi']:.3f}]"
    vs = "-" if not np.isfinite(s["ratio"]) else f"{s['ratio']:.3f}"
    return (f"  {s['method'] + s['variant']:<32}{K:>5}  {fit:>9}  {_pct(s['heldout']):>8}  {s['cost']:7.3f}  {vs:>8}  "
            f"{rr:>15}  {s['ms']:8.1f}")


def run(*, quick: bool = True, out=print, plot: str | None = None) -> list[dict]:
    """Group counterfactual maps under the paper's protocol on four datasets.

    The datasets, classifiers, groups and settings are :func:`numtk.counterfactual.protocol_problems`
    (z-score, shuffle, 20 % of the rows for the groups and 80 % to train a LogisticRegression, KMeans
    groups); for each group :func:`numtk.counterfactual.evaluate_group_maps` (10-fold CV within the
    group, K = 1.5 and 2). Prints, per method and
    K averaged over the groups: validity of the fitted members, held-out validity, mean displacement,
    total squared cost relative to Wachter's per-point optimum (a lower bound), the range of pairwise
    distance ratios and the time per fit. Returns one tour row per dataset and method (K = 2). With
    ``plot``, saves the maps of one ``synthetic_2d`` group as arrows (needs matplotlib).
    """
    t_start = time.perf_counter()
    catalogue = protocol_problems(quick=quick)
    for note in catalogue.notes:
        out(note)
    rows = []
    for p in catalogue.problems:
        sizes = sorted(g.size for g in p.groups)
        span = f"{sizes[0]}" if sizes[0] == sizes[-1] else f"{sizes[0]}-{sizes[-1]}"
        out(f"{p.name}: {p.X.shape[0] + p.n_train} x {p.X.shape[1]}, LogisticRegression on {p.n_train} rows "
            f"(accuracy {p.accuracy:.3f} on the {p.X.shape[0]}-row group split); {len(p.groups)} KMeans group"
            f"{'s' if len(p.groups) > 1 else ''} of {span} members ({p.description})")
    for p in catalogue.problems:
        distortions = p.distortions
        results = []
        for g, (idx, target) in enumerate(zip(p.groups, p.targets)):
            Xg = p.X[idx]
            rs = evaluate_group_maps(Xg, p.classifier, families=p.families, distortions=distortions,
                                     target=target, rng=g, max_dp_size=p.max_dp_size)
            pairs = [("", r) for r in rs]
            if p.immutable is not None:
                extra = evaluate_group_maps(Xg, p.classifier, families=("diagonal",), distortions=(2.0,),
                                            target=target, immutable=p.immutable, baselines=())
                pairs += [(", immutable", r) for r in extra]
            results.append(pairs)
        if p.name == "synthetic_2d" and not quick:
            # distance_preserving is a local QCQP solve: shown on a 10-member group only
            idx, target = p.groups[0], p.targets[0]
            rs = evaluate_group_maps(p.X[idx[:10]], p.classifier, families=("translation", "diagonal", "psd"),
                                     distortions=distortions, target=target, rng=0, max_dp_size=10)
            results.append([(", 10 members", r) for r in rs])
        summary = _summarise(results)
        out(f"{p.name}: per method and K, averaged over groups (cost: mean displacement of the "
            "fitted members; /Wachter: total squared cost over Wachter's)")
        out(_HEADER)
        for s in summary:
            out(_line(s))
            if s["K"] in (None, distortions[-1]):
                K = "" if s["K"] is None else f" K={s['K']:g}"
                rows.append({
                    "area": "counterfactual",
                    "method": f"{s['method']}{K}{s['variant']}, {p.name}",
                    "n": s["n"],
                    "result": (f"valid {_pct(s['fit'] if np.isfinite(s['fit']) else s['group_valid'])}, "
                               f"held-out {_pct(s['heldout'])}"),
                    "vs anchor": ("lower bound (Wachter)" if s["method"] == "wachter" else
                                  f"cost {s['ratio']:.2f}x Wachter" if np.isfinite(s["ratio"]) else "-"),
                    "speed": f"{s['ms']:.1f} ms/fit",
                })
    out("(* baselines: validity on the whole group; they are per-point and do not apply to held-out points)")
    if plot:
        plot_synthetic(plot)
        out(f"figure saved to {plot}")
    out(f"counterfactual demo: {time.perf_counter() - t_start:.1f} s")
    return rows


# --------------------------------------------------------------------------------------------
# the figure
# --------------------------------------------------------------------------------------------

def plot_synthetic(path: str, *, families=(("translation", None), ("diagonal", 2.0), ("psd", 2.0))) -> None:
    """One ``synthetic_2d`` group moved by each family: arrows from members to counterfactuals.

    The map is fitted on nine tenths of the group (dots, convex hull shaded) and applied to the held-out
    tenth (triangles; green when the counterfactual is valid, red when not). The solid line is the
    decision boundary, the dashed one the level ``p = 0.8`` the counterfactuals must reach (the
    background: red rejected, yellow accepted below the confidence, green accepted with it).
    """
    from numtk._lib._optional import pyplot

    plt = pyplot()
    from scipy.spatial import ConvexHull

    (p,) = protocol_problems(datasets="synthetic_2d").problems
    Xg, clf = p.X, p.classifier
    res = make_groups(Xg, p.y, n_clusters=3, rng=0, labels=[0])
    w, b = clf.coef_[0], float(clf.intercept_[0])
    # the group farthest from the boundary: its recourse is the longest
    idx = min(res.groups, key=lambda g: float(np.mean(Xg[g] @ w + b)))
    G = Xg[idx]
    # the protocol's last contiguous fold of ten (k = min(10, n) folds of n // k members): the tail
    k = min(10, G.shape[0])
    n_fit = (k - 1) * (G.shape[0] // k)
    train, test = np.arange(n_fit), np.arange(n_fit, G.shape[0])
    maps = [GroupCounterfactualMap(family, K or 2.0, target=1).fit(G[train], clf) for family, K in families]
    tau = maps[0].threshold_
    moved = np.vstack([G] + [m.transform(G) for m in maps])
    lo, hi = moved.min(0) - 0.15, moved.max(0) + 0.15
    gx, gy = np.meshgrid(np.linspace(lo[0], hi[0], 200), np.linspace(lo[1], hi[1], 200))
    score = w[0] * gx + w[1] * gy + b

    fig, axes = plt.subplots(1, len(families), figsize=(4.6 * len(families), 4.6), squeeze=False)
    for ax, (family, K), m in zip(axes[0], families, maps):
        Ttr, Tte = m.transform(G[train]), m.transform(G[test])
        ax.contourf(gx, gy, score, levels=[-np.inf, 0.0, tau, np.inf],
                    colors=["#f4e3e3", "#f7f2dc", "#e2f0e2"])
        ax.contour(gx, gy, score, levels=[0.0, tau], colors="k", linestyles=["-", "--"], linewidths=1)
        hull = ConvexHull(G[train])
        ax.fill(*G[train][hull.vertices].T, color="tab:blue", alpha=0.12, lw=0)
        ax.quiver(G[train, 0], G[train, 1], Ttr[:, 0] - G[train, 0], Ttr[:, 1] - G[train, 1],
                  angles="xy", scale_units="xy", scale=1, width=0.003, color="tab:blue", alpha=0.45)
        ax.scatter(G[train, 0], G[train, 1], s=12, color="tab:blue", label="fitted members")
        ax.scatter(Ttr[:, 0], Ttr[:, 1], s=12, color="tab:orange", label="their counterfactuals")
        ok = Tte @ w + b >= tau
        ax.quiver(G[test, 0], G[test, 1], Tte[:, 0] - G[test, 0], Tte[:, 1] - G[test, 1],
                  angles="xy", scale_units="xy", scale=1, width=0.004, color="0.3")
        ax.scatter(G[test, 0], G[test, 1], s=30, marker="^", color="0.3", label="held-out members")
        ax.scatter(Tte[ok, 0], Tte[ok, 1], s=30, marker="^", color="tab:green", label="held-out: valid")
        ax.scatter(Tte[~ok, 0], Tte[~ok, 1], s=30, marker="^", color="tab:red", label="held-out: invalid")
        smin, smax = m.distortion_bounds_
        title = family if K is None else f"{family}, K = {K:g}"
        ax.set_title(f"{title}\ncost {m.cost_:.2f}, singular values of A in [{smin:.2f}, {smax:.2f}]",
                     fontsize=9)
        ax.set_xlim(lo[0], hi[0])
        ax.set_ylim(lo[1], hi[1])
        ax.set_aspect("equal")
        ax.set_xlabel("x1 (z-score)")
        ax.set_ylabel("x2 (z-score)")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
