// Pairwise kernel sums for the maximum mean discrepancy (numtk.sampling.mmd). Pure C++17, no Python;
// templates on the float type.
//
//   kRBF:  k(x, y) = exp(-|x - y|^2 / (2 h^2))
//   kIMQ:  k(x, y) = (1 + |x - y|^2 / h^2)^(-1/2)
//
// kernel_sums returns S_xx = sum_{i != j} k(x_i, x_j), S_yy = sum_{i != j} k(y_i, y_j) and
// S_xy = sum_{i, j} k(x_i, y_j); the diagonal terms k(x, x) = 1 are added by the caller for the
// V-statistic. Squared distances are formed by direct differences (no |x|^2 + |y|^2 - 2 x.y cancellation),
// vectorized over blocks of the second cloud. Sums are kept per row and reduced in a fixed order, so the
// result does not depend on the thread count.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "numtk/parallel.hpp"

namespace numtk::sampling {

enum KernelKind : int { kRBF = 0, kIMQ = 1 };

namespace detail {

inline constexpr std::size_t kMmdBlock = 512;

// sum_{j in [jlo, jhi)} k(x, column j of YT) with YT (d x m, row-major); buf holds kMmdBlock values.
template <class T>
inline T kernel_row_sum(const T* x, const T* YT, std::size_t m, std::size_t d, std::size_t jlo, std::size_t jhi,
                        int kind, T scale, T* buf) {
    T total = T(0);
    for (std::size_t b0 = jlo; b0 < jhi; b0 += kMmdBlock) {
        const std::size_t L = std::min(kMmdBlock, jhi - b0);
        for (std::size_t j = 0; j < L; ++j) buf[j] = T(0);
        for (std::size_t k = 0; k < d; ++k) {
            const T xk = x[k];
            const T* yk = YT + k * m + b0;
            for (std::size_t j = 0; j < L; ++j) {
                const T diff = xk - yk[j];
                buf[j] += diff * diff;
            }
        }
        T s = T(0);
        if (kind == kRBF) {
            for (std::size_t j = 0; j < L; ++j) {
                const T t = -buf[j] * scale;
                if (t >= T(-708)) s += std::exp(t);  // below: subnormal or 0, skipped (slow path)
            }
        } else {
            for (std::size_t j = 0; j < L; ++j) s += T(1) / std::sqrt(T(1) + buf[j] * scale);
        }
        total += s;
    }
    return total;
}

// sum_{i < j} k(x_i, x_j) for X (n x d), XT its transpose. Rows i and n-1-i form one task so the
// triangular work splits evenly between threads.
template <class T>
T kernel_sum_upper(const T* X, const T* XT, std::size_t n, std::size_t d, int kind, T scale, int threads) {
    if (n < 2) return T(0);
    std::vector<T> rows(n, T(0));
    const std::size_t tasks = (n + 1) / 2;
    parallel_for_chunks(tasks, threads, [&](int, std::size_t lo, std::size_t hi) {
        std::vector<T> buf(kMmdBlock);
        for (std::size_t t = lo; t < hi; ++t) {
            rows[t] = kernel_row_sum(X + t * d, XT, n, d, t + 1, n, kind, scale, buf.data());
            const std::size_t t2 = n - 1 - t;
            if (t2 != t) rows[t2] = kernel_row_sum(X + t2 * d, XT, n, d, t2 + 1, n, kind, scale, buf.data());
        }
    });
    T s = T(0);
    for (std::size_t i = 0; i < n; ++i) s += rows[i];
    return s;
}

template <class T>
T kernel_sum_cross(const T* X, std::size_t n, const T* YT, std::size_t m, std::size_t d, int kind, T scale,
                   int threads) {
    std::vector<T> rows(n, T(0));
    parallel_for_chunks(n, threads, [&](int, std::size_t lo, std::size_t hi) {
        std::vector<T> buf(kMmdBlock);
        for (std::size_t i = lo; i < hi; ++i)
            rows[i] = kernel_row_sum(X + i * d, YT, m, d, 0, m, kind, scale, buf.data());
    });
    T s = T(0);
    for (std::size_t i = 0; i < n; ++i) s += rows[i];
    return s;
}

}  // namespace detail

template <class T>
struct KernelSums {
    T xx = T(0);  // sum_{i != j} k(x_i, x_j)
    T yy = T(0);  // sum_{i != j} k(y_i, y_j)
    T xy = T(0);  // sum_{i, j} k(x_i, y_j)
};

// X (n x d) and Y (m x d) row-major contiguous; bandwidth h > 0.
template <class T>
KernelSums<T> kernel_sums(const T* X, std::size_t n, const T* Y, std::size_t m, std::size_t d, int kind, T h,
                          int threads = 1) {
    if (threads < 1) threads = 1;
    const T scale = kind == kRBF ? T(1) / (T(2) * h * h) : T(1) / (h * h);
    std::vector<T> XT(n * d), YT(m * d);
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t k = 0; k < d; ++k) XT[k * n + i] = X[i * d + k];
    for (std::size_t j = 0; j < m; ++j)
        for (std::size_t k = 0; k < d; ++k) YT[k * m + j] = Y[j * d + k];
    KernelSums<T> s;
    s.xx = T(2) * detail::kernel_sum_upper(X, XT.data(), n, d, kind, scale, threads);
    s.yy = T(2) * detail::kernel_sum_upper(Y, YT.data(), m, d, kind, scale, threads);
    s.xy = detail::kernel_sum_cross(X, n, YT.data(), m, d, kind, scale, threads);
    return s;
}

}  // namespace numtk::sampling
