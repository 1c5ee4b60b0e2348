// Continuous quadratic knapsack: min ||c||^2  s.t.  w.c >= M,  lo <= c <= hi.
//
// KKT: c(mu) = clip(mu w, lo, hi) for a multiplier mu >= 0; g(mu) = w.c(mu) is continuous,
// non-decreasing and piecewise linear. The solver sorts the breakpoints of g and sweeps its
// segments (O(d log d)). Python-free; the caller owns every buffer.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <utility>
#include <vector>

namespace numtk::counterfactual {

enum class KnapsackStatus : int { optimal = 0, trivial = 1, infeasible = 2 };

struct KnapsackWork {
    std::vector<std::pair<double, double>> events;  // (mu, change of slope)
};

// w, lo, hi: length d (lo/hi may be +-inf, lo <= hi). Writes c (length d) and mu (the multiplier of
// the validity row is 2 mu). Returns trivial when c = clip(0, lo, hi) is already valid.
inline KnapsackStatus quadratic_knapsack(std::size_t d, const double* w, double M, const double* lo,
                                         const double* hi, double* c, double* mu_out, KnapsackWork& work) {
    double g0 = 0.0, gmax = 0.0;
    for (std::size_t k = 0; k < d; ++k) {
        c[k] = std::min(std::max(0.0, lo[k]), hi[k]);
        g0 += w[k] * c[k];
        if (w[k] > 0) gmax += w[k] * hi[k];
        else if (w[k] < 0) gmax += w[k] * lo[k];
    }
    *mu_out = 0.0;
    if (g0 >= M) return KnapsackStatus::trivial;
    const double slack = 1e-12 * std::max(1.0, std::abs(M));
    if (!(gmax >= M - slack)) return KnapsackStatus::infeasible;
    // Free interval of coordinate k: {mu : lo_k <= mu w_k <= hi_k}.
    auto& ev = work.events;
    ev.clear();
    double S = 0.0;  // slope just right of mu = 0
    for (std::size_t k = 0; k < d; ++k) {
        if (w[k] == 0.0) continue;
        double a = lo[k] / w[k], b = hi[k] / w[k];
        if (a > b) std::swap(a, b);
        const double w2 = w[k] * w[k];
        if (b <= 0.0) continue;  // never free for mu > 0
        if (a <= 0.0) S += w2;
        else ev.emplace_back(a, w2);
        if (std::isfinite(b)) ev.emplace_back(b, -w2);
    }
    std::sort(ev.begin(), ev.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    double mu = 0.0, g = g0;
    double mu_star = std::numeric_limits<double>::quiet_NaN();
    std::size_t i = 0;
    while (true) {
        const double next = i < ev.size() ? ev[i].first : std::numeric_limits<double>::infinity();
        if (S > 0.0) {
            const double reach = mu + (M - g) / S;
            if (reach <= next) { mu_star = reach; break; }
        }
        if (i >= ev.size()) break;
        g += S * (next - mu);
        mu = next;
        while (i < ev.size() && ev[i].first == next) { S += ev[i].second; ++i; }
        if (S < 0.0) S = 0.0;  // rounding
    }
    if (!std::isfinite(mu_star)) {
        // Reached only through rounding when M equals the largest attainable score.
        mu_star = mu;
    }
    for (std::size_t k = 0; k < d; ++k) c[k] = std::min(std::max(mu_star * w[k], lo[k]), hi[k]);
    *mu_out = mu_star;
    return KnapsackStatus::optimal;
}

}  // namespace numtk::counterfactual
