// Single-pass group statistics for the counterfactual maps: scores X v and weighted column moments.
// Single-threaded on purpose: these are memory-bound passes that a multithreaded BLAS slows down
// by an order of magnitude when the cores are shared. Python-free.
#pragma once

#include <cstddef>
#include <vector>

namespace numtk::counterfactual {

// out[i] = sum_k X[i, k] v[k] + offset (X with element strides s0, s1).
template <class T>
void scores(std::size_t n, std::size_t d, const T* X, std::ptrdiff_t s0, std::ptrdiff_t s1, const double* v,
            double offset, double* out) {
    for (std::size_t i = 0; i < n; ++i) {
        const T* row = X + static_cast<std::ptrdiff_t>(i) * s0;
        double s = 0.0;
        if (s1 == 1) {
            for (std::size_t k = 0; k < d; ++k) s += static_cast<double>(row[k]) * v[k];
        } else {
            for (std::size_t k = 0; k < d; ++k) s += static_cast<double>(row[static_cast<std::ptrdiff_t>(k) * s1]) * v[k];
        }
        out[i] = s + offset;
    }
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
