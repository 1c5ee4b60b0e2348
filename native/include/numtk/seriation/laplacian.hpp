// The inhomogeneous graph-Laplacian least-squares problem of STAGE: signed increments and right-hand side,
// Laplacian products, the exact solve of a spanning tree's Laplacian and preconditioned conjugate gradients on
// the complement of the per-component constants. Pure C++17, no Python.
//
// The graph is a symmetric CSR matrix W (indptr, indices, w) of n rows, every undirected edge stored twice, no
// self loops; L = D - W with D = diag(deg), deg_i = sum_j w_ij. Components are given by labels in [0, n_comp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "numtk/parallel.hpp"
#include "numtk/seriation/local_pca.hpp"  // detail::dot

namespace numtk::seriation {

// For every stored entry e = (i, j): dv[e] = <(T_i + T_j) / 2, x_j - x_i> (so the entry (j, i) holds exactly
// -dv[e]); b_i = -sum_{e in row i} w_e dv[e], i.e. b = B^T W_E d with B the oriented incidence matrix.
// X and T are n x d row-major (points and oriented unit tangents).
template <class I>
void increments(const double* X, const double* T, std::size_t d, const I* indptr, const I* indices, const double* w,
                std::size_t n, double* dv, double* b, int threads) {
    parallel_for_chunks(n, threads, [&](int, std::size_t lo, std::size_t hi) {
        for (std::size_t i = lo; i < hi; ++i) {
            const double* xi = X + i * d;
            const double* ti = T + i * d;
            double bi = 0.0;
            for (I e = indptr[i]; e < indptr[i + 1]; ++e) {
                const std::size_t j = std::size_t(indices[e]);
                const double* xj = X + j * d;
                const double* tj = T + j * d;
                double s = 0.0;  // one accumulation order for (i, j) and (j, i): exact antisymmetry
                for (std::size_t a = 0; a < d; ++a) s += (0.5 * (ti[a] + tj[a])) * (xj[a] - xi[a]);
                dv[e] = s;
                bi -= w[e] * s;
            }
            b[i] = bi;
        }
    });
}

// y = L x = deg * x - W x; rows are independent, so the result does not depend on `threads`.
template <class I>
void laplacian_apply(const I* indptr, const I* indices, const double* w, const double* deg, std::size_t n,
                     const double* x, double* y, int threads) {
    parallel_for_chunks(n, threads, [&](int, std::size_t lo, std::size_t hi) {
        for (std::size_t i = lo; i < hi; ++i) {
            double s = 0.0;
            for (I e = indptr[i]; e < indptr[i + 1]; ++e) s += w[e] * x[indices[e]];
            y[i] = deg[i] * x[i] - s;
        }
    });
}

// Subtracts the per-component mean (labels in [0, n_comp)); sums and counts are work arrays of n_comp.
template <class I>
void project_mean(double* x, const I* labels, std::size_t n, std::size_t n_comp, std::vector<double>& sums,
                  std::vector<double>& counts) {
    if (n_comp == 1) {
        double s = 0.0;
        for (std::size_t i = 0; i < n; ++i) s += x[i];
        s /= double(n);
        for (std::size_t i = 0; i < n; ++i) x[i] -= s;
        return;
    }
    std::fill(sums.begin(), sums.end(), 0.0);
    std::fill(counts.begin(), counts.end(), 0.0);
    for (std::size_t i = 0; i < n; ++i) {
        sums[std::size_t(labels[i])] += x[i];
        counts[std::size_t(labels[i])] += 1.0;
    }
    for (std::size_t c = 0; c < n_comp; ++c) sums[c] = counts[c] > 0 ? sums[c] / counts[c] : 0.0;
    for (std::size_t i = 0; i < n; ++i) x[i] -= sums[std::size_t(labels[i])];
}

// Exact solution of L_T x = r for the Laplacian of a spanning forest given by a breadth-first order of all n
// nodes (each tree's root before its descendants), parent[v] (< 0 at roots) and pw[v] > 0, the weight of the
// edge (v, parent[v]). Leaves to root: S_v = sum of r over the subtree of v, the flow through the edge to the
// parent; root to leaves: x_v = x_parent + S_v / pw_v, x_root = 0. Exact when r sums to zero on every tree;
// otherwise the root absorbs the excess. `S` is a work array of n.
template <class I>
void tree_solve(const I* order, const I* parent, const double* pw, std::size_t n, const double* r, double* x,
                double* S) {
    std::copy(r, r + n, S);
    for (std::size_t a = n; a-- > 0;) {
        const I v = order[a];
        const I p = parent[v];
        if (p >= 0) S[p] += S[v];
    }
    for (std::size_t a = 0; a < n; ++a) {
        const I v = order[a];
        const I p = parent[v];
        x[v] = p < 0 ? 0.0 : x[p] + S[v] / pw[v];
    }
}

// Greedy aggregation of a graph (the coarse space of a two-level preconditioner) on its strong edges: an entry
// (i, j) is strong when w_ij >= theta * max(m_i, m_j), m_i the largest weight at node i (theta = 0: every edge).
// Visiting the nodes in the order 0..n-1, a node not yet aggregated whose strong neighbours are all free starts an
// aggregate with them; then every node left over joins the aggregate of its heaviest aggregated neighbour (any
// edge, in a second sweep, so that it sees the aggregates of the first), and nodes still without one (isolated)
// become singletons. labels (n) receives the aggregate of each node; returns the number of aggregates.
// Why theta: a seed's weak neighbour may lie on another strand of the curve (two arms of a spiral, joined by an
// edge of weight 1e-3 that the transverse test kept); in the seed's aggregate it ties the smooth error of one
// strand to that of the other, and the two-level preconditioner loses the smooth error there (spiral, n = 1e5:
// 1294 CG iterations with every edge, 59 with theta = 0.25). Every aggregate is connected by strong edges or one
// edge.
template <class I>
std::size_t aggregate(const I* indptr, const I* indices, const double* w, std::size_t n, I* labels,
                      double theta = 0.0) {
    std::vector<double> top(theta > 0.0 ? n : 0, 0.0);
    for (std::size_t i = 0; i < top.size(); ++i)
        for (I e = indptr[i]; e < indptr[i + 1]; ++e) top[i] = std::max(top[i], w[e]);
    auto strong = [&](std::size_t i, I e) {
        return theta <= 0.0 || w[e] >= theta * std::max(top[i], top[std::size_t(indices[e])]);
    };
    std::fill(labels, labels + n, I(-1));
    std::size_t count = 0;
    for (std::size_t i = 0; i < n; ++i) {
        if (labels[i] >= 0) continue;
        bool free = true;
        for (I e = indptr[i]; e < indptr[i + 1] && free; ++e) free = !strong(i, e) || labels[indices[e]] < 0;
        if (!free) continue;
        labels[i] = I(count);
        for (I e = indptr[i]; e < indptr[i + 1]; ++e)
            if (strong(i, e)) labels[indices[e]] = I(count);
        ++count;
    }
    std::vector<I> joined(labels, labels + n);
    for (std::size_t i = 0; i < n; ++i) {
        if (labels[i] >= 0) continue;
        double best = -1.0;
        for (I e = indptr[i]; e < indptr[i + 1]; ++e) {
            const I a = labels[indices[e]];
            if (a >= 0 && w[e] > best) {
                best = w[e];
                joined[i] = a;
            }
        }
    }
    for (std::size_t i = 0; i < n; ++i) {
        labels[i] = joined[i];
        if (labels[i] < 0) labels[i] = I(count++);
    }
    return count;
}

// Solve with a sparse LU factorisation A = Pr^T L U Pc^T as scipy.sparse.linalg.splu returns it: L and U in
// CSC form (L lower, U upper, both with their diagonal stored), Pr with ones at (perm_r[i], i) and Pc with ones
// at (i, perm_c[i]). x = A^-1 rhs = Pc U^-1 L^-1 Pr rhs; y is a work array of m.
template <class I>
struct SparseLU {
    std::size_t m = 0;
    const I *Lp = nullptr, *Li = nullptr, *Up = nullptr, *Ui = nullptr, *perm_r = nullptr, *perm_c = nullptr;
    const double *Lx = nullptr, *Ux = nullptr;

    void solve(const double* rhs, double* x, double* y) const {
        for (std::size_t i = 0; i < m; ++i) y[std::size_t(perm_r[i])] = rhs[i];  // y = Pr rhs
        for (std::size_t j = 0; j < m; ++j) {                                      // L y' = y
            double diag = 1.0;
            for (I e = Lp[j]; e < Lp[j + 1]; ++e)
                if (std::size_t(Li[e]) == j) diag = Lx[e];
            const double yj = (y[j] /= diag);
            for (I e = Lp[j]; e < Lp[j + 1]; ++e)
                if (std::size_t(Li[e]) > j) y[Li[e]] -= Lx[e] * yj;
        }
        for (std::size_t j = m; j-- > 0;) {  // U z = y'
            double diag = 1.0;
            for (I e = Up[j]; e < Up[j + 1]; ++e)
                if (std::size_t(Ui[e]) == j) diag = Ux[e];
            const double zj = (y[j] /= diag);
            for (I e = Up[j]; e < Up[j + 1]; ++e)
                if (std::size_t(Ui[e]) < j) y[Ui[e]] -= Ux[e] * zj;
        }
        for (std::size_t j = 0; j < m; ++j) x[j] = y[std::size_t(perm_c[j])];  // x = Pc z
    }
};

// Coarse-grid correction of a two-level preconditioner: aggregates labels (n) in [0, n_agg); coarse[a] is the
// unknown of aggregate a in the factored coarse system (< 0 for the aggregates grounded at zero, one per
// component); lu factors the coarse Laplacian P^T L P restricted to the other aggregates.
template <class I>
struct CoarseGrid {
    const I* labels = nullptr;
    std::size_t n_agg = 0;
    const I* coarse = nullptr;
    SparseLU<I> lu;
};

enum class Preconditioner { none = 0, jacobi = 1, tree = 2, aggregation = 3 };

struct PcgInfo {
    int nit = 0;            // iterations (matrix products)
    double residual = 0.0;  // ||b - L x|| / ||b||, recomputed from x at the end
    bool converged = false;
};

// Preconditioned conjugate gradients for L x = b on the complement of the per-component constants (b must sum
// to zero on every component; it is projected anyway). x holds the start on entry (projected) and the solution,
// mean zero per component, on exit. Stops when the relative residual ||b - L x|| / ||b|| is at most tol, checked
// on the recomputed residual (a restart from it when the recursion has drifted), or after max_iter iterations.
// Preconditioners: none; Jacobi D^-1; tree: the exact inverse of a spanning tree's Laplacian (order, parent,
// pw as in tree_solve); aggregation: D^-1 + P (P^T L P)^-1 P^T with P the indicator matrix of the aggregates
// (additive two-level: Jacobi for the rough error, the coarse solve for the smooth error along the graph).
// Vector reductions run serially (the result does not depend on `threads`); the Laplacian products are threaded.
template <class I>
PcgInfo pcg(const I* indptr, const I* indices, const double* w, const double* deg, std::size_t n, const double* b,
            double* x, const I* labels, std::size_t n_comp, Preconditioner pre, const I* order, const I* parent,
            const double* pw, const CoarseGrid<I>& grid, double tol, int max_iter, int threads) {
    PcgInfo info;
    std::vector<double> r(n), z(n), p(n), q(n), S(pre == Preconditioner::tree ? n : 0);
    const bool two_level = pre == Preconditioner::aggregation;
    std::vector<double> rc(two_level ? grid.n_agg : 0), xc(two_level ? grid.n_agg : 0);
    std::vector<double> sc(two_level ? grid.lu.m : 0), yc(two_level ? grid.lu.m : 0), wc(two_level ? grid.lu.m : 0);
    std::vector<double> sums(n_comp), counts(n_comp);
    auto dot = [n](const double* a, const double* c) { return detail::dot(a, c, n); };
    std::vector<double> bb(b, b + n);
    project_mean(bb.data(), labels, n, n_comp, sums, counts);
    const double bnorm = std::sqrt(dot(bb.data(), bb.data()));
    project_mean(x, labels, n, n_comp, sums, counts);
    if (!(bnorm > 0)) {
        std::fill(x, x + n, 0.0);
        info.converged = true;
        return info;
    }
    auto precondition = [&]() {  // z = M^-1 r, projected
        if (pre == Preconditioner::tree) {
            tree_solve(order, parent, pw, n, r.data(), z.data(), S.data());
        } else if (pre == Preconditioner::jacobi || two_level) {
            for (std::size_t i = 0; i < n; ++i) z[i] = deg[i] > 0 ? r[i] / deg[i] : 0.0;
        } else {
            std::copy(r.begin(), r.end(), z.begin());
        }
        if (two_level) {
            std::fill(rc.begin(), rc.end(), 0.0);
            for (std::size_t i = 0; i < n; ++i) rc[std::size_t(grid.labels[i])] += r[i];
            for (std::size_t a = 0; a < grid.n_agg; ++a)
                if (grid.coarse[a] >= 0) sc[std::size_t(grid.coarse[a])] = rc[a];
            grid.lu.solve(sc.data(), yc.data(), wc.data());
            for (std::size_t a = 0; a < grid.n_agg; ++a)
                xc[a] = grid.coarse[a] >= 0 ? yc[std::size_t(grid.coarse[a])] : 0.0;
            for (std::size_t i = 0; i < n; ++i) z[i] += xc[std::size_t(grid.labels[i])];
        }
        project_mean(z.data(), labels, n, n_comp, sums, counts);
    };
    auto true_residual = [&]() {  // r = P (b - L x), returns ||r|| / ||b||
        laplacian_apply(indptr, indices, w, deg, n, x, q.data(), threads);
        for (std::size_t i = 0; i < n; ++i) r[i] = bb[i] - q[i];
        project_mean(r.data(), labels, n, n_comp, sums, counts);
        return std::sqrt(dot(r.data(), r.data())) / bnorm;
    };
    double rel = true_residual();
    for (int restart = 0; restart < 8 && rel > tol && info.nit < max_iter; ++restart) {
        precondition();
        std::copy(z.begin(), z.end(), p.begin());
        double rz = dot(r.data(), z.data());
        while (info.nit < max_iter) {
            laplacian_apply(indptr, indices, w, deg, n, p.data(), q.data(), threads);
            ++info.nit;
            const double pq = dot(p.data(), q.data());
            if (!(pq > 0)) break;  // breakdown (p in the null space up to rounding): restart from the true residual
            const double alpha = rz / pq;
            for (std::size_t i = 0; i < n; ++i) {
                x[i] += alpha * p[i];
                r[i] -= alpha * q[i];
            }
            if (std::sqrt(dot(r.data(), r.data())) <= tol * bnorm) break;
            precondition();
            const double rz_new = dot(r.data(), z.data());
            if (!(rz != 0.0)) break;
            const double beta = rz_new / rz;
            rz = rz_new;
            for (std::size_t i = 0; i < n; ++i) p[i] = z[i] + beta * p[i];
        }
        project_mean(x, labels, n, n_comp, sums, counts);
        rel = true_residual();
    }
    info.residual = rel;
    info.converged = rel <= tol;
    return info;
}

}  // namespace numtk::seriation
