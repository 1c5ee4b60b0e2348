// Z2 sign synchronisation of tangent lines over a graph: edge cosines, sign propagation along a spanning
// tree, generalised power iterations z <- sign(H z) and the frustration diagnostic. Pure C++17, no Python.
//
// The graph is a symmetric CSR pattern (indptr, indices) of n rows: every undirected edge is stored twice.
// H has the same pattern with values h_e = w_e c_e (weight times the cosine of the two tangents).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "numtk/parallel.hpp"
#include "numtk/seriation/local_pca.hpp"  // detail::dot

namespace numtk::seriation {

// c[e] = <T_i, T_j> for every stored entry e = (i, j); T is n x d row-major.
template <class I>
void edge_cosines(const double* T, std::size_t d, const I* indptr, const I* indices, std::size_t n, double* c,
                  int threads) {
    parallel_for_chunks(n, threads, [&](int, std::size_t lo, std::size_t hi) {
        for (std::size_t i = lo; i < hi; ++i) {
            const double* ti = T + i * d;
            for (I e = indptr[i]; e < indptr[i + 1]; ++e)
                c[e] = detail::dot(ti, T + std::size_t(indices[e]) * d, d);
        }
    });
}

// s[e] = |N(i) & N(j)| for every stored entry e = (i, j) of a symmetric CSR pattern without self loops, each
// row's indices sorted: the neighbours the two endpoints share. Each edge is counted once, from its smaller
// endpoint i, by merging the two sorted rows (O(deg i + deg j), both rows read sequentially); the count is
// copied to the mirror entry (j, i), found by bisection in row j (only row i's chunk writes it: no race).
namespace detail {
template <class I>
std::int32_t sorted_common(const I* a, const I* a1, const I* b, const I* b1) {
    std::int32_t c = 0;
    while (a < a1 && b < b1) {  // branch-free: the comparisons are unpredictable
        const I x = *a, y = *b;
        c += std::int32_t(x == y);
        a += x <= y;
        b += y <= x;
    }
    return c;
}
}  // namespace detail

template <class I>
void shared_neighbours(const I* indptr, const I* indices, std::size_t n, std::int32_t* s, int threads) {
    std::fill(s, s + std::size_t(indptr[n]), std::int32_t(-1));
    parallel_for_chunks(n, threads, [&](int, std::size_t lo, std::size_t hi) {
        for (std::size_t i = lo; i < hi; ++i) {
            for (I e = indptr[i]; e < indptr[i + 1]; ++e) {
                const std::size_t j = std::size_t(indices[e]);
                if (j <= i) continue;
                const I* b0 = indices + indptr[j];
                const I* b1 = indices + indptr[j + 1];
                const std::int32_t c = detail::sorted_common(indices + indptr[i], indices + indptr[i + 1], b0, b1);
                s[e] = c;
                const I* m = std::lower_bound(b0, b1, I(i));
                if (m != b1 && std::size_t(*m) == i) s[m - indices] = c;
            }
        }
    });
    // Entries (i, j), j < i, without a mirror (a pattern that is not symmetric): counted from their own row.
    parallel_for_chunks(n, threads, [&](int, std::size_t lo, std::size_t hi) {
        for (std::size_t i = lo; i < hi; ++i)
            for (I e = indptr[i]; e < indptr[i + 1]; ++e)
                if (s[e] < 0) {
                    const std::size_t j = std::size_t(indices[e]);
                    s[e] = detail::sorted_common(indices + indptr[i], indices + indptr[i + 1], indices + indptr[j],
                                                 indices + indptr[j + 1]);
                }
    });
}

// Signs along a spanning tree: nodes in breadth-first order (each component's root first, parent[root] < 0,
// z[root] as given), z[v] = z[parent] * sign(h(v, parent)), the sign of a zero entry taken as +1. The entry
// (v, parent) is looked up in row v of H; a missing entry counts as +1 (the tree is a subgraph of H).
template <class I>
void tree_signs(const I* indptr, const I* indices, const double* h, const I* order, std::size_t count,
                const I* parent, double* z) {
    for (std::size_t a = 0; a < count; ++a) {
        const I v = order[a];
        const I p = parent[v];
        if (p < 0) continue;
        double s = 1.0;
        for (I e = indptr[v]; e < indptr[v + 1]; ++e)
            if (indices[e] == p) {
                s = h[e] < 0 ? -1.0 : 1.0;
                break;
            }
        z[v] = z[p] * s;
    }
}

// Generalised power method for Z2 synchronisation: synchronous updates z_i <- sign((H z)_i), keeping z_i where
// (H z)_i = 0, until no sign changes or max_iter updates. z holds +-1. Returns the number of updates that
// changed at least one sign.
template <class I>
int power_signs(const I* indptr, const I* indices, const double* h, std::size_t n, double* z, int max_iter,
                int threads) {
    std::vector<double> next(n);
    const int nt = threads < 1 ? 1 : threads;
    std::vector<unsigned char> changed(std::size_t(nt), 0);
    int it = 0;
    for (; it < max_iter; ++it) {
        std::fill(changed.begin(), changed.end(), 0);
        parallel_for_chunks(n, nt, [&](int t, std::size_t lo, std::size_t hi) {
            unsigned char any = 0;
            for (std::size_t i = lo; i < hi; ++i) {
                double s = 0.0;
                for (I e = indptr[i]; e < indptr[i + 1]; ++e) s += h[e] * z[indices[e]];
                const double v = s > 0 ? 1.0 : (s < 0 ? -1.0 : z[i]);
                any |= (v != z[i]);
                next[i] = v;
            }
            changed[std::size_t(t)] = any;
        });
        bool any = false;
        for (unsigned char c : changed) any = any || c;
        if (!any) break;
        std::copy(next.begin(), next.end(), z);
    }
    return it;
}

// Share of the total weight on edges whose signed cosine disagrees with the signs: z_i z_j c_ij < 0.
template <class I>
double frustration(const I* indptr, const I* indices, const double* w, const double* c, const double* z,
                   std::size_t n) {
    double bad = 0.0, total = 0.0;
    for (std::size_t i = 0; i < n; ++i)
        for (I e = indptr[i]; e < indptr[i + 1]; ++e) {
            total += w[e];
            if (z[i] * z[indices[e]] * c[e] < 0) bad += w[e];
        }
    return total > 0 ? bad / total : 0.0;
}

// One averaging step of a line field over a neighbour table (n rows of k indices into the rows of T):
// out_i = v / |v|, v = sum_q s_q w_j T_j over j = nb[i k + q], s_q = -1 where <T_i, T_j> < 0, else +1 (the lines'
// signs are free). A row whose v has zero or non-finite length keeps T_i. T and out are n x d row-major.
template <class I>
void smooth_lines(const double* T, const double* w, const I* nb, std::size_t n, std::size_t k, std::size_t d,
                  double* out, int threads) {
    parallel_for_chunks(n, threads, [&](int, std::size_t lo, std::size_t hi) {
        std::vector<double> v(d);
        for (std::size_t i = lo; i < hi; ++i) {
            const double* ti = T + i * d;
            std::fill(v.begin(), v.end(), 0.0);
            for (std::size_t q = 0; q < k; ++q) {
                const std::size_t j = static_cast<std::size_t>(nb[i * k + q]);
                const double* tj = T + j * d;
                const double c = detail::dot(ti, tj, d) < 0 ? -w[j] : w[j];
                for (std::size_t a = 0; a < d; ++a) v[a] += c * tj[a];
            }
            const double len = std::sqrt(detail::dot(v.data(), v.data(), d));
            double* o = out + i * d;
            if (len > 0 && std::isfinite(len)) {
                for (std::size_t a = 0; a < d; ++a) o[a] = v[a] / len;
            } else {
                std::copy(ti, ti + d, o);
            }
        }
    });
}

}  // namespace numtk::seriation
