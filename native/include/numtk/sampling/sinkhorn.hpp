// Log-domain Sinkhorn iterations for entropic optimal transport between two discrete measures
// a = sum_i a_i delta_{x_i} and b = sum_j b_j delta_{y_j} (numtk.sampling.sinkhorn_distance).
// Pure C++17, no Python; templates on the float type.
//
// Convention (dual potentials f, g):   P_ij = a_i b_j exp((f_i + g_j - C_ij) / eps).
// Internally u = f / eps and v = g / eps. One iteration is the pair of exact block updates
//     u_i = -LSE_j(log b_j + v_j - C_ij / eps),      v_j = -LSE_i(log a_i + u_i - C_ij / eps),
// so after it the column marginals of P equal b (up to round-off). The L1 violation of the row
// marginal of the current plan, sum_i |a_i - sum_j P_ij| = sum_i a_i |exp(u_i - u_i^new) - 1|, comes for
// free from the next u-update and is the stopping rule (err < tol). Starting from u = v = 0 the iterates
// are those of the classical scaling u <- a / (K v), v <- b / (K^T u) with K = exp(-C / eps).
//
// Costs come from a "cost source": PointCost computes rows and columns of C on the fly from the point
// clouds (O((n + m) d) memory, never an n x m matrix); DenseCost reads a given row-major matrix.
// Every pass over the pairs is O(n m) and split over rows (or column blocks) between threads; reductions
// are done per row and then summed in a fixed order, so results do not depend on the thread count.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "numtk/parallel.hpp"

namespace numtk::sampling {

enum CostKind : int { kSqEuclidean = 0, kEuclidean = 1 };

namespace detail {

// out[j] = cost(x, column j of the transposed cloud YT (d x m, row-major)), j in [0, m).
// The loop over j is innermost so it vectorizes and has no floating-point dependency chain.
template <class T>
inline void costs_to_cloud(const T* x, const T* YT, std::size_t m, std::size_t d, int kind, T* out) {
    for (std::size_t j = 0; j < m; ++j) out[j] = T(0);
    for (std::size_t k = 0; k < d; ++k) {
        const T xk = x[k];
        const T* yk = YT + k * m;
        for (std::size_t j = 0; j < m; ++j) {
            const T diff = xk - yk[j];
            out[j] += diff * diff;
        }
    }
    if (kind == kEuclidean)
        for (std::size_t j = 0; j < m; ++j) out[j] = std::sqrt(out[j]);
}

template <class T>
inline void transpose(const T* A, std::size_t rows, std::size_t cols, T* AT) {
    for (std::size_t i = 0; i < rows; ++i)
        for (std::size_t k = 0; k < cols; ++k) AT[k * rows + i] = A[i * cols + k];
}

// Terms more than kLseCut below the maximum are skipped in the log-sum-exp: each is < e^-60 ~ 1e-26 of
// the largest, far below round-off for any size, and skipping them avoids slow subnormal exp results.
inline constexpr double kLseCut = 60.0;

// exp(x), with 0 in place of the subnormal results (x < -708).
template <class T>
inline T exp_flush(T x) {
    return x < T(-708) ? T(0) : std::exp(x);
}

// log sum_j exp(w[j]); w is read only. Returns -inf for an empty or all -inf input.
template <class T>
inline T log_sum_exp(T* w, std::size_t L) {
    T mx = -std::numeric_limits<T>::infinity();
    for (std::size_t j = 0; j < L; ++j) mx = std::max(mx, w[j]);
    if (!(mx > -std::numeric_limits<T>::infinity())) return mx;
    T s = T(0);
    for (std::size_t j = 0; j < L; ++j) {
        const T t = w[j] - mx;
        if (t > T(-kLseCut)) s += std::exp(t);
    }
    return mx + std::log(s);
}

}  // namespace detail

// Costs on the fly from X (n x d) and Y (m x d), both row-major and contiguous.
template <class T>
class PointCost {
  public:
    static constexpr bool kHasColumns = true;
    PointCost(const T* X, std::size_t n, const T* Y, std::size_t m, std::size_t d, int kind)
        : X_(X), Y_(Y), n_(n), m_(m), d_(d), kind_(kind), XT_(n * d), YT_(m * d) {
        detail::transpose(X, n, d, XT_.data());
        detail::transpose(Y, m, d, YT_.data());
    }
    std::size_t n() const { return n_; }
    std::size_t m() const { return m_; }
    // C[i, :] into buf (length m); returns the pointer to read from.
    const T* row(std::size_t i, T* buf) const {
        detail::costs_to_cloud(X_ + i * d_, YT_.data(), m_, d_, kind_, buf);
        return buf;
    }
    // C[:, j] into buf (length n).
    const T* column(std::size_t j, T* buf) const {
        detail::costs_to_cloud(Y_ + j * d_, XT_.data(), n_, d_, kind_, buf);
        return buf;
    }

  private:
    const T* X_;
    const T* Y_;
    std::size_t n_, m_, d_;
    int kind_;
    std::vector<T> XT_, YT_;
};

// A given cost matrix C (n x m, row-major, leading dimension m).
template <class T>
class DenseCost {
  public:
    static constexpr bool kHasColumns = false;
    DenseCost(const T* C, std::size_t n, std::size_t m) : C_(C), n_(n), m_(m) {}
    std::size_t n() const { return n_; }
    std::size_t m() const { return m_; }
    const T* row(std::size_t i, T*) const { return C_ + i * m_; }
    const T* column(std::size_t, T*) const { return nullptr; }  // not used (kHasColumns == false)

  private:
    const T* C_;
    std::size_t n_, m_;
};

template <class T>
struct SinkhornResult {
    T transport = T(0);       // <P, C>
    T objective = T(0);       // dual value <a, f> + <b, g> (= <P,C> + eps KL(P | a x b) at convergence)
    T marginal_error = T(0);  // sum_i |a_i - sum_j P_ij| of the returned plan (columns match b)
    int iterations = 0;       // completed (f, g) update pairs
    bool converged = false;
};

namespace detail {

// out_i = LSE_j(G_j - C_ij * inv_eps), i in [0, n). ws: threads * m scratch.
template <class T, class Cost>
void lse_rows(const Cost& cost, const T* G, T inv_eps, T* out, T* ws, int threads) {
    const std::size_t n = cost.n(), m = cost.m();
    parallel_for_chunks(n, threads, [&](int t, std::size_t lo, std::size_t hi) {
        T* buf = ws + std::size_t(t) * m;
        for (std::size_t i = lo; i < hi; ++i) {
            const T* c = cost.row(i, buf);
            for (std::size_t j = 0; j < m; ++j) buf[j] = G[j] - c[j] * inv_eps;
            out[i] = log_sum_exp(buf, m);
        }
    });
}

// out_j = LSE_i(F_i - C_ij * inv_eps), j in [0, m). ws: threads * max(n, m) scratch, ws2: 2 m scratch.
template <class T, class Cost>
void lse_cols(const Cost& cost, const T* F, T inv_eps, T* out, T* ws, T* ws2, int threads) {
    const std::size_t n = cost.n(), m = cost.m();
    if constexpr (Cost::kHasColumns) {
        parallel_for_chunks(m, threads, [&](int t, std::size_t lo, std::size_t hi) {
            T* buf = ws + std::size_t(t) * std::max(n, m);
            for (std::size_t j = lo; j < hi; ++j) {
                const T* c = cost.column(j, buf);
                for (std::size_t i = 0; i < n; ++i) buf[i] = F[i] - c[i] * inv_eps;
                out[j] = log_sum_exp(buf, n);
            }
        });
    } else {
        // Row-major matrix: each thread owns a block of columns and sweeps the rows twice (max, then sum).
        T* mx = ws2;
        T* s = ws2 + m;
        parallel_for_chunks(m, threads, [&](int, std::size_t lo, std::size_t hi) {
            for (std::size_t j = lo; j < hi; ++j) {
                mx[j] = -std::numeric_limits<T>::infinity();
                s[j] = T(0);
            }
            for (std::size_t i = 0; i < n; ++i) {
                const T* c = cost.row(i, nullptr);
                const T fi = F[i];
                for (std::size_t j = lo; j < hi; ++j) mx[j] = std::max(mx[j], fi - c[j] * inv_eps);
            }
            for (std::size_t i = 0; i < n; ++i) {
                const T* c = cost.row(i, nullptr);
                const T fi = F[i];
                for (std::size_t j = lo; j < hi; ++j) {
                    const T t = fi - c[j] * inv_eps - mx[j];
                    if (t > T(-kLseCut)) s[j] += std::exp(t);
                }
            }
            for (std::size_t j = lo; j < hi; ++j) out[j] = mx[j] + std::log(s[j]);
        });
    }
}

// Summary of the plan P_ij = exp(F_i + G_j - C_ij * inv_eps) of the final potentials: its transport cost
// sum_ij P_ij C_ij and the L1 violation of its row marginals against a = exp(log_a), reduced per row and
// then in a fixed order (deterministic for any thread count). ws: threads * max(n, m) scratch.
template <class T, class Cost>
void plan_summary(const Cost& cost, const T* F, const T* G, const T* log_a, T inv_eps, T* ws, int threads,
                  T& transport, T& err) {
    const std::size_t n = cost.n(), m = cost.m();
    std::vector<T> rowsum(n), rowcost(n);
    parallel_for_chunks(n, threads, [&](int t, std::size_t lo, std::size_t hi) {
        T* buf = ws + std::size_t(t) * std::max(n, m);
        for (std::size_t i = lo; i < hi; ++i) {
            const T* c = cost.row(i, buf);
            T rs = T(0), rc = T(0);
            for (std::size_t j = 0; j < m; ++j) {
                const T p = exp_flush(F[i] + G[j] - c[j] * inv_eps);
                rs += p;
                rc += p * c[j];
            }
            rowsum[i] = rs;
            rowcost[i] = rc;
        }
    });
    transport = T(0);
    err = T(0);
    for (std::size_t i = 0; i < n; ++i) {
        transport += rowcost[i];
        err += std::fabs(rowsum[i] - std::exp(log_a[i]));
    }
}

}  // namespace detail

// Log-domain Sinkhorn. a, b: positive weights (each summing to 1) given by their logs; eps > 0;
// f (length n) and g (length m) hold the starting potentials on entry (zeros for the classical start) and
// the final ones on exit. Stops when the row-marginal L1 violation is below tol (tol = 0: run max_iter iterations) or after max_iter iterations.
template <class T, class Cost>
SinkhornResult<T> sinkhorn_log(const Cost& cost, const T* log_a, const T* log_b, T eps, int max_iter, T tol, T* f,
                               T* g, int threads = 1) {
    const std::size_t n = cost.n(), m = cost.m();
    if (threads < 1) threads = 1;
    const T inv_eps = T(1) / eps;
    std::vector<T> u(n), v(m), F(n), G(m), tmp(n), tmpc(m);
    std::vector<T> ws(std::size_t(threads) * std::max(n, m)), ws2(2 * m);
    for (std::size_t i = 0; i < n; ++i) u[i] = f[i] * inv_eps;
    for (std::size_t j = 0; j < m; ++j) v[j] = g[j] * inv_eps;

    SinkhornResult<T> res;
    for (int it = 0; it < max_iter; ++it) {
        for (std::size_t j = 0; j < m; ++j) G[j] = log_b[j] + v[j];
        detail::lse_rows(cost, G.data(), inv_eps, tmp.data(), ws.data(), threads);
        // row-marginal violation of the current plan (u, v): row sums are a_i exp(u_i + tmp_i)
        T err = T(0);
        for (std::size_t i = 0; i < n; ++i) err += std::exp(log_a[i]) * std::fabs(std::expm1(u[i] + tmp[i]));
        if (err < tol) {
            res.converged = true;
            break;
        }
        for (std::size_t i = 0; i < n; ++i) {
            u[i] = -tmp[i];
            F[i] = log_a[i] + u[i];
        }
        detail::lse_cols(cost, F.data(), inv_eps, tmpc.data(), ws.data(), ws2.data(), threads);
        for (std::size_t j = 0; j < m; ++j) v[j] = -tmpc[j];
        res.iterations = it + 1;
    }

    // Final pass over the plan: transport cost and row-marginal violation.
    for (std::size_t i = 0; i < n; ++i) F[i] = log_a[i] + u[i];
    for (std::size_t j = 0; j < m; ++j) G[j] = log_b[j] + v[j];
    T transport, err;
    detail::plan_summary(cost, F.data(), G.data(), log_a, inv_eps, ws.data(), threads, transport, err);
    T dual = T(0);
    for (std::size_t i = 0; i < n; ++i) dual += std::exp(log_a[i]) * u[i];
    for (std::size_t j = 0; j < m; ++j) dual += std::exp(log_b[j]) * v[j];
    res.transport = transport;
    res.objective = eps * dual;
    res.marginal_error = err;
    if (!res.converged) res.converged = err < tol;
    for (std::size_t i = 0; i < n; ++i) f[i] = eps * u[i];
    for (std::size_t j = 0; j < m; ++j) g[j] = eps * v[j];
    return res;
}

// Symmetric problem OT_eps(a, a) on one cloud (Feydy et al. 2019): the plan is
// P_ij = a_i a_j exp((f_i + f_j - C_ij) / eps) with one potential, found by the averaged fixed-point
// iteration u <- (u + T(u)) / 2, T(u)_i = -LSE_j(log a_j + u_j - C_ij / eps), which converges much faster
// than the alternating updates on this problem. The stopping rule is the same L1 marginal violation
// (row sums a_i exp(u_i - T(u)_i)). At the fixed point OT_eps = 2 <a, f>. `cost` must be square (n x n).
template <class T, class Cost>
SinkhornResult<T> sinkhorn_log_symmetric(const Cost& cost, const T* log_a, T eps, int max_iter, T tol, T* f,
                                         int threads = 1) {
    const std::size_t n = cost.n();
    if (threads < 1) threads = 1;
    const T inv_eps = T(1) / eps;
    std::vector<T> u(n), F(n), tmp(n);
    std::vector<T> ws(std::size_t(threads) * n);
    for (std::size_t i = 0; i < n; ++i) u[i] = f[i] * inv_eps;
    SinkhornResult<T> res;
    for (int it = 0; it < max_iter; ++it) {
        for (std::size_t i = 0; i < n; ++i) F[i] = log_a[i] + u[i];
        detail::lse_rows(cost, F.data(), inv_eps, tmp.data(), ws.data(), threads);  // T(u) = -tmp
        T err = T(0);
        for (std::size_t i = 0; i < n; ++i) err += std::exp(log_a[i]) * std::fabs(std::expm1(u[i] + tmp[i]));
        if (err < tol) {
            res.converged = true;
            break;
        }
        for (std::size_t i = 0; i < n; ++i) u[i] = T(0.5) * (u[i] - tmp[i]);
        res.iterations = it + 1;
    }
    for (std::size_t i = 0; i < n; ++i) F[i] = log_a[i] + u[i];
    T transport, err;
    detail::plan_summary(cost, F.data(), F.data(), log_a, inv_eps, ws.data(), threads, transport, err);
    T dual = T(0);
    for (std::size_t i = 0; i < n; ++i) dual += std::exp(log_a[i]) * u[i];
    res.transport = transport;
    res.objective = T(2) * eps * dual;
    res.marginal_error = err;
    if (!res.converged) res.converged = err < tol;
    for (std::size_t i = 0; i < n; ++i) f[i] = eps * u[i];
    return res;
}

}  // namespace numtk::sampling
