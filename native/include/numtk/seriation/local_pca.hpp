// Batched local PCA: the top principal direction of many small neighbourhoods and the ratio of the two
// largest eigenvalues of each local scatter matrix. Pure C++17, no Python.
//
// For each point i with neighbour rows nb[i, 0..k-1] of X (n x d, row-major) the k rows are centred into
// Y (k x d). The two leading eigenpairs of the implicit operator A = Y Y^T (on R^k, when k <= d) or
// A = Y^T Y (on R^d) come from Lanczos with full reorthogonalisation, started from the direction of the
// farthest neighbour (close to the tangent on a curve, so a handful of steps suffice). When the Krylov space reaches the whole
// space (m <= max_steps) the result is exact up to rounding. The tridiagonal matrix's top two eigenvalues
// come from Sturm bisection and the top eigenvector from inverse iteration, all in O(steps). The tangent is the leading right singular
// vector of Y: v1 itself (A = Y^T Y) or Y^T u1 normalised (A = Y Y^T).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "numtk/parallel.hpp"

namespace numtk::seriation {

namespace detail {

inline double dot(const double* a, const double* b, std::size_t m) noexcept {
    // Four independent accumulators: the compiler may not reorder a floating-point sum by itself.
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    std::size_t i = 0;
    for (; i + 4 <= m; i += 4) {
        s0 += a[i] * b[i];
        s1 += a[i + 1] * b[i + 1];
        s2 += a[i + 2] * b[i + 2];
        s3 += a[i + 3] * b[i + 3];
    }
    for (; i < m; ++i) s0 += a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
}

// Number of eigenvalues below x of the symmetric tridiagonal matrix (diagonal al[0..s), off-diagonal
// be[1..s)) by the Sturm sequence of its LDL^T factorisation.
inline std::size_t sturm_below(const double* al, const double* be, std::size_t s, double x) noexcept {
    std::size_t count = 0;
    double q = 1.0;
    for (std::size_t i = 0; i < s; ++i) {
        q = al[i] - x - (i ? be[i] * be[i] / q : 0.0);
        if (q == 0.0) q = -1e-300;
        if (q < 0) ++count;
    }
    return count;
}

// The j-th smallest eigenvalue (0-based) of the tridiagonal matrix, by bisection to full precision.
inline double tridiag_eigenvalue(const double* al, const double* be, std::size_t s, std::size_t j) noexcept {
    double lo = al[0], hi = al[0];
    for (std::size_t i = 0; i < s; ++i) {  // Gershgorin bounds
        const double r = (i ? std::fabs(be[i]) : 0.0) + (i + 1 < s ? std::fabs(be[i + 1]) : 0.0);
        lo = std::min(lo, al[i] - r);
        hi = std::max(hi, al[i] + r);
    }
    for (int it = 0; it < 200 && hi - lo > 4e-16 * std::max(std::fabs(lo), std::fabs(hi)); ++it) {
        const double mid = 0.5 * (lo + hi);
        if (mid == lo || mid == hi) break;
        if (sturm_below(al, be, s, mid) > j) hi = mid; else lo = mid;
    }
    return 0.5 * (lo + hi);
}

// Unit eigenvector y of the tridiagonal matrix for the eigenvalue theta, by inverse iteration (two
// solves of the shifted system with Gaussian elimination and partial pivoting).
inline void tridiag_eigenvector(const double* al, const double* be, std::size_t s, double theta, double* y,
                                double* work) noexcept {
    // work: 4 s doubles (the three bands of U after pivoting and the multipliers)
    double* d0 = work;          // diagonal of U
    double* d1 = work + s;      // first super-diagonal of U
    double* d2 = work + 2 * s;  // second super-diagonal of U (fill from pivoting)
    double* lm = work + 3 * s;  // multipliers
    std::vector<unsigned char> swapped(s, 0);
    const double scale = std::max(std::fabs(theta), 1e-300);
    for (std::size_t i = 0; i < s; ++i) {
        d0[i] = al[i] - theta;
        d1[i] = i + 1 < s ? be[i + 1] : 0.0;
        d2[i] = 0.0;
    }
    for (std::size_t i = 0; i + 1 < s; ++i) {  // eliminate the sub-diagonal be[i + 1]
        const double sub = be[i + 1];
        if (std::fabs(sub) > std::fabs(d0[i])) {  // swap rows i and i + 1
            swapped[i] = 1;
            const double a0 = d0[i], a1 = d1[i], a2 = d2[i];
            d0[i] = sub;
            d1[i] = al[i + 1] - theta;
            d2[i] = i + 2 < s ? be[i + 2] : 0.0;
            const double m = a0 / sub;
            lm[i] = m;
            d0[i + 1] = a1 - m * d1[i];
            d1[i + 1] = a2 - m * d2[i];
        } else {
            if (d0[i] == 0.0) d0[i] = 1e-300 * scale + 1e-300;
            const double m = sub / d0[i];
            lm[i] = m;
            d0[i + 1] -= m * d1[i];
            d1[i + 1] -= m * d2[i];
        }
    }
    if (d0[s - 1] == 0.0) d0[s - 1] = 1e-16 * scale + 1e-300;
    for (std::size_t i = 0; i < s; ++i) y[i] = 1.0;
    for (int pass = 0; pass < 2; ++pass) {
        for (std::size_t i = 0; i + 1 < s; ++i) {  // forward: apply the row operations to y
            if (swapped[i]) std::swap(y[i], y[i + 1]);
            y[i + 1] -= lm[i] * y[i];
        }
        for (std::size_t i = s; i-- > 0;) {  // back substitution with U
            double v = y[i];
            if (i + 1 < s) v -= d1[i] * y[i + 1];
            if (i + 2 < s) v -= d2[i] * y[i + 2];
            y[i] = v / d0[i];
        }
        double nrm = 0.0;
        for (std::size_t i = 0; i < s; ++i) nrm += y[i] * y[i];
        nrm = std::sqrt(nrm);
        for (std::size_t i = 0; i < s; ++i) y[i] /= nrm;
    }
}

// Work space of one thread.
struct PcaWork {
    std::vector<double> Y, mean, Q, tmp, y, trid, u;
};

// Applies A to x (length m) into y, with A = Y Y^T (gram) or Y^T Y; tmp has room for max(k, d).
inline void apply(const double* Y, std::size_t k, std::size_t d, bool gram, const double* x, double* y,
                  double* tmp) noexcept {
    if (gram) {  // y = Y (Y^T x): tmp = Y^T x (d)
        std::fill(tmp, tmp + d, 0.0);
        for (std::size_t a = 0; a < k; ++a)
            for (std::size_t j = 0; j < d; ++j) tmp[j] += x[a] * Y[a * d + j];
        for (std::size_t a = 0; a < k; ++a) y[a] = dot(Y + a * d, tmp, d);
    } else {     // y = Y^T (Y x): tmp = Y x (k)
        for (std::size_t a = 0; a < k; ++a) tmp[a] = dot(Y + a * d, x, d);
        std::fill(y, y + d, 0.0);
        for (std::size_t a = 0; a < k; ++a)
            for (std::size_t j = 0; j < d; ++j) y[j] += tmp[a] * Y[a * d + j];
    }
}

}  // namespace detail

// X: rows of dimension d, row-major; nb: n x k row indices into X (row-major), one neighbourhood per
// output. Outputs tangents (n x d, unit, first nonzero coordinate positive) and ratio (n,) =
// lambda_2 / lambda_1 (1 when lambda_1 = 0). Returns the largest number of Lanczos steps any one used.
template <class I>
int local_pca(const double* X, std::size_t n, std::size_t d, const I* nb, std::size_t k, double* tangents,
              double* ratio, int threads, int max_steps = 64, double tol = 1e-10) {
    std::vector<int> used(std::size_t(std::max(threads, 1)), 0);
    parallel_for_chunks(n, threads, [&](int t, std::size_t lo, std::size_t hi) {
        const bool gram = k <= d;
        const std::size_t m = gram ? k : d;
        const std::size_t smax = std::min<std::size_t>(m, std::size_t(std::max(max_steps, 2)));
        detail::PcaWork ws;
        ws.Y.resize(k * d);
        ws.mean.resize(d);
        ws.Q.resize((smax + 1) * m);
        ws.tmp.resize(std::max(k, d));
        ws.y.resize(smax);
        ws.trid.resize(4 * smax);
        ws.u.resize(m);
        std::vector<double> alpha(smax), beta(smax + 1);
        int worst = 0;
        for (std::size_t i = lo; i < hi; ++i) {
            const I* idx = nb + i * k;
            double* Y = ws.Y.data();
            std::fill(ws.mean.begin(), ws.mean.end(), 0.0);
            for (std::size_t a = 0; a < k; ++a) {
                const double* row = X + std::size_t(idx[a]) * d;
                for (std::size_t j = 0; j < d; ++j) ws.mean[j] += row[j];
            }
            for (std::size_t j = 0; j < d; ++j) ws.mean[j] /= double(k);
            std::size_t far = 0;
            double far_norm = -1.0;
            for (std::size_t a = 0; a < k; ++a) {
                const double* row = X + std::size_t(idx[a]) * d;
                for (std::size_t j = 0; j < d; ++j) Y[a * d + j] = row[j] - ws.mean[j];
                const double nr = detail::dot(Y + a * d, Y + a * d, d);
                if (nr > far_norm) {
                    far_norm = nr;
                    far = a;
                }
            }
            // Start: the farthest centred neighbour (R^d), or its projections Y g (R^k); a small generic
            // offset keeps the start off any invariant subspace.
            double* q = ws.Q.data();
            if (gram) {
                for (std::size_t a = 0; a < k; ++a) q[a] = detail::dot(Y + a * d, Y + far * d, d);
            } else {
                std::copy(Y + far * d, Y + far * d + d, q);
            }
            for (std::size_t a = 0; a < m; ++a) q[a] += 1e-8 * std::sqrt(far_norm + 1e-300) * (1.0 + 0.1 * double(a % 7));
            double nq = std::sqrt(detail::dot(q, q, m));
            if (!(nq > 0)) {
                for (std::size_t a = 0; a < m; ++a) q[a] = 1.0;
                nq = std::sqrt(double(m));
            }
            for (std::size_t a = 0; a < m; ++a) q[a] /= nq;
            // Lanczos with full reorthogonalisation; check the top Ritz pair every few steps.
            std::size_t s = 0;
            double lam1 = 0.0, lam2 = 0.0;
            beta[0] = 0.0;
            for (std::size_t j = 0; j < smax; ++j) {
                double* qj = ws.Q.data() + j * m;
                double* wv = ws.Q.data() + (j + 1) * m;
                detail::apply(Y, k, d, gram, qj, wv, ws.tmp.data());
                alpha[j] = detail::dot(qj, wv, m);
                for (int pass = 0; pass < 2; ++pass)
                    for (std::size_t r = 0; r <= j; ++r) {
                        const double* qr = ws.Q.data() + r * m;
                        const double c = detail::dot(qr, wv, m);
                        for (std::size_t a = 0; a < m; ++a) wv[a] -= c * qr[a];
                    }
                beta[j + 1] = std::sqrt(detail::dot(wv, wv, m));
                s = j + 1;
                const bool exhausted = beta[j + 1] <= 1e-14 * std::max(std::fabs(alpha[0]), 1e-300);
                if (!exhausted)
                    for (std::size_t a = 0; a < m; ++a) wv[a] /= beta[j + 1];
                if (exhausted || s == smax || s % 4 == 0) {
                    // Top two Ritz values by bisection, the top Ritz vector by inverse iteration (all O(s)).
                    lam1 = detail::tridiag_eigenvalue(alpha.data(), beta.data(), s, s - 1);
                    lam2 = s > 1 ? detail::tridiag_eigenvalue(alpha.data(), beta.data(), s, s - 2) : 0.0;
                    detail::tridiag_eigenvector(alpha.data(), beta.data(), s, lam1, ws.y.data(), ws.trid.data());
                    // residual of the top Ritz pair: beta_s * |last component of its eigenvector|
                    const double res = exhausted ? 0.0 : beta[s] * std::fabs(ws.y[s - 1]);
                    if (exhausted || res <= tol * std::max(lam1, 1e-300)) break;
                }
            }
            worst = std::max(worst, int(s));
            // Ritz vector u = Q_s y_top (in R^m).
            std::fill(ws.u.begin(), ws.u.end(), 0.0);
            for (std::size_t r = 0; r < s; ++r) {
                const double c = ws.y[r];
                const double* qr = ws.Q.data() + r * m;
                for (std::size_t a = 0; a < m; ++a) ws.u[a] += c * qr[a];
            }
            double* out = tangents + i * d;
            if (gram) {
                std::fill(out, out + d, 0.0);
                for (std::size_t a = 0; a < k; ++a)
                    for (std::size_t j = 0; j < d; ++j) out[j] += ws.u[a] * Y[a * d + j];
            } else {
                std::copy(ws.u.begin(), ws.u.end(), out);
            }
            const double nrm = std::sqrt(detail::dot(out, out, d));
            if (nrm > 0)
                for (std::size_t j = 0; j < d; ++j) out[j] /= nrm;
            std::size_t first = 0;
            while (first < d && out[first] == 0.0) ++first;
            if (first < d && out[first] < 0)
                for (std::size_t j = 0; j < d; ++j) out[j] = -out[j];
            ratio[i] = lam1 > 0 ? std::max(lam2, 0.0) / lam1 : 1.0;
        }
        used[std::size_t(t)] = worst;
    });
    return *std::max_element(used.begin(), used.end());
}

}  // namespace numtk::seriation
