// Projected replicator dynamics (PRD) of a two-player normal-form game.
//
// Lanctot, M. et al. (2017). "A unified game-theoretic approach to multiagent reinforcement learning".
// NeurIPS 2017, arXiv:1711.00832 (the PSRO meta-solver).
//
// Both payoff tables are laid out [row action, column action]: A0[i, j] is player 0's payoff and
// A1[i, j] player 1's payoff when player 0 (the row player) plays i and player 1 plays j. A zero-sum
// game with row payoffs G therefore passes (G, -G). One step updates both players from the same
// (old) profile:
//   u_0 = A0 x_1,   u_1 = A1' x_0,
//   x_p <- P(x_p + dt * x_p * (u_p - <x_p, u_p> 1)),
// where P is the Euclidean projection onto {x : x >= gamma, sum x = 1}. The result is the average of
// the n_iter + 1 points visited, the starting point included (OpenSpiel's `projected_replicator_dynamics`
// averages the same points).
//
// Pure C++17: no Python, no pybind11; no allocation inside the loop.
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <vector>

namespace numtk::games {

// Euclidean projection of v[0:k] onto {x >= gamma, sum x = 1} (requires k * gamma <= 1), in place.
// With z = v - gamma and mass s = 1 - k gamma, the projection is gamma + max(z - tau, 0) where tau
// solves sum max(z - tau, 0) = s; tau is found from the entries sorted in decreasing order. `sorted`
// is scratch of length k.
template <class T>
void project_capped_simplex(T* v, std::size_t k, T gamma, T* sorted) {
    const T mass = T(1) - T(k) * gamma;
    for (std::size_t i = 0; i < k; ++i) sorted[i] = v[i] - gamma;
    if (k <= 16) {  // insertion sort, decreasing: the common case of a handful of strategies
        for (std::size_t i = 1; i < k; ++i) {
            const T key = sorted[i];
            std::size_t j = i;
            for (; j > 0 && sorted[j - 1] < key; --j) sorted[j] = sorted[j - 1];
            sorted[j] = key;
        }
    } else {
        std::sort(sorted, sorted + k, std::greater<T>());
    }
    // The largest r with sorted[r-1] - (cumsum_r - mass) / r > 0 fixes tau = (cumsum_r - mass) / r.
    // r = 1 always qualifies when mass > 0 (and gives x = gamma everywhere when mass = 0).
    T cumsum = sorted[0], tau = sorted[0] - mass;
    for (std::size_t r = 2; r <= k; ++r) {
        cumsum += sorted[r - 1];
        const T candidate = (cumsum - mass) / T(r);
        if (sorted[r - 1] - candidate > T(0)) tau = candidate;
        else break;  // the condition holds on a prefix of r only
    }
    for (std::size_t i = 0; i < k; ++i) {
        const T z = v[i] - gamma - tau;
        v[i] = gamma + (z > T(0) ? z : T(0));
    }
}

// Runs n_iter PRD steps from (x0, x1) (each of length m and n, overwritten with the last iterates) and
// writes the averages of the n_iter + 1 points (start included) into avg0 and avg1. A0 and A1 are
// m x n, row-major.
template <class T>
void projected_replicator_dynamics(const T* A0, const T* A1, std::size_t m, std::size_t n, T* x0, T* x1,
                                   std::size_t n_iter, T dt, T gamma, T* avg0, T* avg1) {
    std::vector<T> u0(m), u1(n), sorted(std::max(m, n));
    std::copy(x0, x0 + m, avg0);  // the starting point counts as the first iterate (as in OpenSpiel)
    std::copy(x1, x1 + n, avg1);
    for (std::size_t it = 0; it < n_iter; ++it) {
        // u0 = A0 x1 (row dot products), u1 = A1' x0 (sum of the rows of A1 weighted by x0).
        for (std::size_t i = 0; i < m; ++i) {  // four partial sums: independent chains that vectorise
            const T* r = A0 + i * n;
            T s0 = 0, s1 = 0, s2 = 0, s3 = 0;
            std::size_t j = 0;
            for (; j + 4 <= n; j += 4) {
                s0 += r[j] * x1[j];
                s1 += r[j + 1] * x1[j + 1];
                s2 += r[j + 2] * x1[j + 2];
                s3 += r[j + 3] * x1[j + 3];
            }
            for (; j < n; ++j) s0 += r[j] * x1[j];
            u0[i] = (s0 + s1) + (s2 + s3);
        }
        std::fill(u1.begin(), u1.end(), T(0));
        for (std::size_t i = 0; i < m; ++i) {
            const T* r = A1 + i * n;
            const T w = x0[i];
            for (std::size_t j = 0; j < n; ++j) u1[j] += w * r[j];
        }
        T v0 = 0, v1 = 0;
        for (std::size_t i = 0; i < m; ++i) v0 += x0[i] * u0[i];
        for (std::size_t j = 0; j < n; ++j) v1 += x1[j] * u1[j];
        for (std::size_t i = 0; i < m; ++i) x0[i] += dt * (x0[i] * (u0[i] - v0));
        for (std::size_t j = 0; j < n; ++j) x1[j] += dt * (x1[j] * (u1[j] - v1));
        project_capped_simplex(x0, m, gamma, sorted.data());
        project_capped_simplex(x1, n, gamma, sorted.data());
        for (std::size_t i = 0; i < m; ++i) avg0[i] += x0[i];
        for (std::size_t j = 0; j < n; ++j) avg1[j] += x1[j];
    }
    const T inv = T(1) / T(n_iter + 1);
    for (std::size_t i = 0; i < m; ++i) avg0[i] *= inv;
    for (std::size_t j = 0; j < n; ++j) avg1[j] *= inv;
}

}  // namespace numtk::games
