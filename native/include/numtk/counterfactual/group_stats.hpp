// Single-pass group statistics for the counterfactual maps: scores X v and weighted column moments.
// Single-threaded on purpose: these are memory-bound passes that a multithreaded BLAS slows down
// by an order of magnitude when the cores are shared. Python-free.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace numtk::counterfactual {

// sum_k row[k] v[k] over a contiguous row with four independent accumulators, so that the additions
// are not one dependency chain (the pass is then memory-bound rather than latency-bound).
template <class T>
inline double dot_contiguous(const T* row, const double* v, std::size_t d) {
    double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0;
    std::size_t k = 0;
    for (; k + 4 <= d; k += 4) {
        a0 += static_cast<double>(row[k]) * v[k];
        a1 += static_cast<double>(row[k + 1]) * v[k + 1];
        a2 += static_cast<double>(row[k + 2]) * v[k + 2];
        a3 += static_cast<double>(row[k + 3]) * v[k + 3];
    }
    for (; k < d; ++k) a0 += static_cast<double>(row[k]) * v[k];
    return (a0 + a1) + (a2 + a3);
}

// out[i] = sum_k X[i, k] v[k] + offset (X with element strides s0, s1). Returns max |X[i, k]| when
// `absmax` is set (same pass), else 0.
template <class T>
double scores(std::size_t n, std::size_t d, const T* X, std::ptrdiff_t s0, std::ptrdiff_t s1, const double* v,
              double offset, double* out, bool absmax = false) {
    double m = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
        const T* row = X + static_cast<std::ptrdiff_t>(i) * s0;
        double s = 0.0;
        if (s1 == 1) {
            s = dot_contiguous(row, v, d);
            if (absmax)
                for (std::size_t k = 0; k < d; ++k) m = std::max(m, std::abs(static_cast<double>(row[k])));
        } else {
            for (std::size_t k = 0; k < d; ++k) {
                const double x = static_cast<double>(row[static_cast<std::ptrdiff_t>(k) * s1]);
                s += x * v[k];
                if (absmax) m = std::max(m, std::abs(x));
            }
        }
        out[i] = s + offset;
    }
    return m;
}

// mean[k] = sum_i p_i X[i, k] / sum_i p_i;  scatter[k] = sum_i p_i (X[i, k] - mean[k])^2 (two passes).
template <class T>
void weighted_moments(std::size_t n, std::size_t d, const T* X, std::ptrdiff_t s0, std::ptrdiff_t s1,
                      const double* p, double* mean, double* scatter) {
    double total = 0.0;
    for (std::size_t k = 0; k < d; ++k) mean[k] = scatter[k] = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
        const T* row = X + static_cast<std::ptrdiff_t>(i) * s0;
        const double pi = p[i];
        total += pi;
        for (std::size_t k = 0; k < d; ++k) mean[k] += pi * static_cast<double>(row[static_cast<std::ptrdiff_t>(k) * s1]);
    }
    if (total > 0.0)
        for (std::size_t k = 0; k < d; ++k) mean[k] /= total;
    for (std::size_t i = 0; i < n; ++i) {
        const T* row = X + static_cast<std::ptrdiff_t>(i) * s0;
        const double pi = p[i];
        for (std::size_t k = 0; k < d; ++k) {
            const double a = static_cast<double>(row[static_cast<std::ptrdiff_t>(k) * s1]) - mean[k];
            scatter[k] += pi * a * a;
        }
    }
}

}  // namespace numtk::counterfactual
