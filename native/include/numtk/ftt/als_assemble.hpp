// Chunked assembly of the ALS normal equations of one FTT core (numtk.ftt).
//
// The design row of point m for core k is a_m = L_m (x) phi_m (x) R_m (length P = ra * n * rb), so
//     G = sum_m w_m a_m a_m^T,   G[(a,i,c), (a',i',c')] = sum_m w_m (L_a L_a') (phi_i phi_i') (R_c R_c').
// G only depends on the symmetric pairs {a,a'}, {i,i'}, {c,c'}. The kernel writes, for a chunk of points,
//     Z[m, (pA, pC)] = w_m L_a L_a' R_c R_c'   (pA over a <= a', pC over c <= c')
//     Y[m, pN]       = phi_i phi_i'             (pN over i <= i')
// so that S = Z^T Y (one GEMM, done by the caller's BLAS) holds every distinct entry of G; the full design
// matrix A (M x P) is never formed. b = sum_m w_m y_m a_m is accumulated directly.
// Pure C++17, no Python; templates on the float type.
#pragma once

#include <cstddef>

namespace numtk::ftt {

inline std::size_t n_pairs(std::size_t r) { return r * (r + 1) / 2; }

// Rows m in [m0, m1): Z is (m1 - m0, n_pairs(ra) * n_pairs(rb)), Y is (m1 - m0, n_pairs(n)); b (P) is added to.
template <class T>
void assemble_chunk(std::size_t m0, std::size_t m1, std::size_t ra, std::size_t n, std::size_t rb, const T* L,
                    const T* Phi, const T* R, const T* w, const T* y, T* Z, T* Y, T* b) {
    const std::size_t pa = n_pairs(ra), pb = n_pairs(rb), pn = n_pairs(n);
    T lp[64 * 65 / 2];
    for (std::size_t m = m0; m < m1; ++m) {
        const T* l = L + m * ra;
        const T* p = Phi + m * n;
        const T* r = R + m * rb;
        const T wm = w[m];
        T* z = Z + (m - m0) * pa * pb;
        T* yy = Y + (m - m0) * pn;
        std::size_t q = 0;
        for (std::size_t a = 0; a < ra; ++a)
            for (std::size_t a2 = a; a2 < ra; ++a2) lp[q++] = wm * l[a] * l[a2];
        q = 0;
        for (std::size_t a = 0; a < pa; ++a) {
            const T la = lp[a];
            for (std::size_t c = 0; c < rb; ++c) {
                const T lrc = la * r[c];
                for (std::size_t c2 = c; c2 < rb; ++c2) z[q++] = lrc * r[c2];
            }
        }
        q = 0;
        for (std::size_t i = 0; i < n; ++i)
            for (std::size_t i2 = i; i2 < n; ++i2) yy[q++] = p[i] * p[i2];
        const T wy = wm * y[m];
        for (std::size_t a = 0; a < ra; ++a) {
            const T la = wy * l[a];
            for (std::size_t i = 0; i < n; ++i) {
                const T lai = la * p[i];
                T* bb = b + (a * n + i) * rb;
                for (std::size_t c = 0; c < rb; ++c) bb[c] += lai * r[c];
            }
        }
    }
}

// Normal equations of one core when the basis rows are sparse (cubic B-splines: at most 4 non-zeros per
// row), with the optional directional-derivative terms of the Newton-linearised BSDE regression:
//     v_m = (L_m + DL_m) (x) phi_m (x) R_m + L_m (x) dphi_m (x) R_m + L_m (x) phi_m (x) DR_m
// (DL, DPhi, DR null: v_m = L_m (x) phi_m (x) R_m). Only the entries of v_m on the columns j where phi_m or
// dphi_m is non-zero are formed, so a row costs (ra * width * rb)^2 instead of P^2 (P = ra * n * rb).
// Accumulates the upper triangle of G (P x P, row-major) += w_m v_m v_m^T and b += w_m y_m v_m over
// rows [m0, m1). `val` and `idx` are work arrays of length P.
template <class T>
void assemble_sparse(std::size_t m0, std::size_t m1, std::size_t ra, std::size_t n, std::size_t rb, const T* L,
                     const T* DL, const T* Phi, const T* DPhi, const T* R, const T* DR, const T* w, const T* y,
                     T* G, T* b, T* val, std::size_t* idx) {
    const std::size_t P = ra * n * rb;
    const bool directional = DL != nullptr;
    for (std::size_t m = m0; m < m1; ++m) {
        const T* l = L + m * ra;
        const T* p = Phi + m * n;
        const T* r = R + m * rb;
        const T* dl = directional ? DL + m * ra : nullptr;
        const T* dp = directional ? DPhi + m * n : nullptr;
        const T* dr = directional ? DR + m * rb : nullptr;
        std::size_t j0 = n, j1 = 0;
        for (std::size_t j = 0; j < n; ++j) {
            if (p[j] != T(0) || (directional && dp[j] != T(0))) {
                if (j < j0) j0 = j;
                j1 = j + 1;
            }
        }
        if (j0 >= j1) continue;  // an all-zero row adds nothing
        std::size_t q = 0;
        for (std::size_t a = 0; a < ra; ++a) {
            for (std::size_t j = j0; j < j1; ++j) {
                const T lp = l[a] * p[j];
                const T t = directional ? lp + dl[a] * p[j] + l[a] * dp[j] : lp;
                for (std::size_t c = 0; c < rb; ++c) {
                    val[q] = directional ? t * r[c] + lp * dr[c] : t * r[c];
                    idx[q] = (a * n + j) * rb + c;  // increasing in q
                    ++q;
                }
            }
        }
        const T wm = w[m], wy = wm * y[m];
        for (std::size_t q1 = 0; q1 < q; ++q1) {
            const T v1 = wm * val[q1];
            b[idx[q1]] += wy * val[q1];
            T* row = G + idx[q1] * P;
            for (std::size_t q2 = q1; q2 < q; ++q2) row[idx[q2]] += v1 * val[q2];
        }
    }
}

constexpr std::size_t kMaxAssembleRank = 64;

}  // namespace numtk::ftt
