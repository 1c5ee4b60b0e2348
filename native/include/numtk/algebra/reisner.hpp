// Reisner's Cohen-Macaulay criterion over GF(2) for a pure simplicial complex given by its facets (subsets of
// [62] as 64-bit masks): every face sigma, the empty face included, must have a link whose reduced homology
// vanishes below the link's dimension. Reduced Betti numbers come from the GF(2) ranks of the boundary
// matrices (bitset Gaussian elimination).
//
// The kernel lists the failures, (sigma, k) where the link of sigma has nonzero reduced GF(2) homology in
// dimension k - 1 (the faces of the link with k vertices), larger faces (smaller links) first. Over GF(2) the
// complex is Cohen-Macaulay exactly when there is none. Over Q the caller re-examines only these pairs with
// exact rational ranks: by the universal coefficient theorem dim H_i(K; Q) <= dim H_i(K; GF(2)), so homology
// that vanishes over GF(2) vanishes over Q.
//
// Plain C++17, no Python: numtk/algebra/_algebra_ext.cpp binds it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

namespace numtk::algebra {

inline int popcount64(std::uint64_t x) {
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_popcountll(x);
#else
    int c = 0;
    while (x) {
        x &= x - 1;
        ++c;
    }
    return c;
#endif
}

// The index of the highest set bit of x != 0.
inline int highest_bit64(std::uint64_t x) {
#if defined(__GNUC__) || defined(__clang__)
    return 63 - __builtin_clzll(x);
#else
    int b = 0;
    while (x >>= 1) ++b;
    return b;
#endif
}

// The most faces the kernel enumerates (the bindings check it before allocating anything).
constexpr std::uint64_t kMaxFaces = std::uint64_t(1) << 22;

// Every subset of every facet, sorted and without repetition.
inline std::vector<std::uint64_t> all_faces(const std::vector<std::uint64_t>& facets) {
    std::vector<std::uint64_t> out;
    for (std::uint64_t f : facets) {
        std::uint64_t s = f;
        while (true) {
            out.push_back(s);
            if (s == 0) break;
            s = (s - 1) & f;
        }
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

// The faces grouped by their number of vertices (each group sorted), groups 0 .. top.
inline std::vector<std::vector<std::uint64_t>> levels_of(const std::vector<std::uint64_t>& faces, int top) {
    std::vector<std::vector<std::uint64_t>> levels(static_cast<std::size_t>(top) + 1);
    for (std::uint64_t f : faces) levels[static_cast<std::size_t>(popcount64(f))].push_back(f);
    return levels;
}

// The GF(2) rank of the boundary from the faces `upper` (k vertices) to the faces `lower` (k - 1 vertices),
// both sorted; every face of `upper` minus one vertex must be in `lower`.
inline std::size_t boundary_rank_gf2(const std::vector<std::uint64_t>& upper, const std::vector<std::uint64_t>& lower) {
    if (upper.empty() || lower.empty()) return 0;
    const std::size_t L = lower.size();
    const std::size_t W = (L + 63) / 64;
    std::vector<std::uint64_t> rows(upper.size() * W, 0);
    for (std::size_t i = 0; i < upper.size(); ++i) {
        const std::uint64_t tau = upper[i];
        std::uint64_t t = tau;
        while (t) {
            const std::uint64_t low = t & (~t + 1);
            const auto it = std::lower_bound(lower.begin(), lower.end(), tau ^ low);
            if (it == lower.end() || *it != (tau ^ low)) throw std::logic_error("a boundary face is missing");
            const auto j = static_cast<std::size_t>(it - lower.begin());
            rows[i * W + j / 64] |= std::uint64_t(1) << (j % 64);
            t ^= low;
        }
    }
    // XOR basis by leading bit: pivot[b] is the row whose highest set bit is b.
    std::vector<std::int64_t> pivot(L, -1);
    std::size_t rank = 0;
    for (std::size_t i = 0; i < upper.size(); ++i) {
        std::uint64_t* r = &rows[i * W];
        std::size_t w = W;
        while (true) {
            while (w > 0 && r[w - 1] == 0) --w;
            if (w == 0) break;  // reduced to zero
            const std::size_t lead = (w - 1) * 64 + static_cast<std::size_t>(highest_bit64(r[w - 1]));
            if (pivot[lead] < 0) {
                pivot[lead] = static_cast<std::int64_t>(i);
                ++rank;
                break;
            }
            const std::uint64_t* p = &rows[static_cast<std::size_t>(pivot[lead]) * W];
            for (std::size_t k = 0; k < w; ++k) r[k] ^= p[k];
        }
    }
    return rank;
}

struct Failure {
    std::uint64_t sigma;  // the face
    int k;                // the link's homology is nonzero in dimension k - 1
};

// Reisner's criterion over GF(2) for the pure complex with these facets (distinct, all with the same number
// of vertices): the failures, larger faces first; with first_only, at most one.
inline std::vector<Failure> reisner_gf2_failures(const std::vector<std::uint64_t>& facets, bool first_only) {
    std::vector<Failure> out;
    if (facets.empty()) return out;
    const int top = popcount64(facets[0]);
    const auto levels = levels_of(all_faces(facets), top);
    std::vector<std::vector<std::uint64_t>> link(static_cast<std::size_t>(top) + 1);
    std::vector<std::int64_t> rank(static_cast<std::size_t>(top) + 2);
    for (int s = top - 2; s >= 0; --s) {
        for (std::uint64_t sigma : levels[static_cast<std::size_t>(s)]) {
            const int t = top - s;  // the link's facets have t vertices
            for (int k = 0; k <= t; ++k) {
                auto& lv = link[static_cast<std::size_t>(k)];
                lv.clear();
                for (std::uint64_t f : levels[static_cast<std::size_t>(k + s)])
                    if ((f & sigma) == sigma) lv.push_back(f ^ sigma);  // f - sigma: the order is kept
            }
            std::fill(rank.begin(), rank.end(), -1);
            rank[static_cast<std::size_t>(t) + 1] = 0;
            auto r = [&](int k) {
                auto& v = rank[static_cast<std::size_t>(k)];
                if (v < 0) {
                    const auto& up = link[static_cast<std::size_t>(k)];
                    v = k == 1 ? (up.empty() ? 0 : 1)
                               : static_cast<std::int64_t>(boundary_rank_gf2(up, link[static_cast<std::size_t>(k) - 1]));
                }
                return v;
            };
            for (int k = 1; k < t; ++k) {  // dimensions 0 .. t - 2; dimension -1 vanishes (the link has vertices)
                const auto f = static_cast<std::int64_t>(link[static_cast<std::size_t>(k)].size());
                if (f - r(k) - r(k + 1) != 0) {
                    out.push_back({sigma, k});
                    if (first_only) return out;
                }
            }
        }
    }
    return out;
}

}  // namespace numtk::algebra
