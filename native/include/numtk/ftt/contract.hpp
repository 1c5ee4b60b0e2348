// Evaluation of a functional tensor train f(x) = G_1(x_1) ... G_d(x_d), G_k(x) = sum_i C_k[:, i, :] phi_i(x),
// with its gradient and Laplacian in one prefix/suffix pass, plus the per-site contractions used by ALS.
// Pure C++17, no Python; templates on the float type.
//
// Cores are passed transposed to (n_k, r_{k-1}, r_k) row-major ("Ct"), so G_k = Phi_k Ct_k is a sum of n_k
// contiguous axpys of length r_{k-1} r_k. Points are processed in blocks of kBlock laid out
// structure-of-arrays ([component][point]) so the inner loops run over points and vectorise for any rank.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "numtk/ftt/basis.hpp"
#include "numtk/parallel.hpp"

namespace numtk::ftt {

template <class T>
struct TrainView {
    int d = 0;
    const Basis1D<T>* basis = nullptr;  // d entries
    const T* const* cores_t = nullptr;  // d pointers to (n_k, r_{k-1}, r_k) row-major
    const int* ranks = nullptr;         // d + 1 entries, ranks[0] = ranks[d] = 1
};

constexpr std::size_t kBlock = 32;
constexpr std::size_t kChunk = 8;  // points per accumulator of the portable block products

constexpr std::size_t kRows = 4;  // output rows per register tile

// out[r][b] = sum_s A[r * ar + s * as] in[s][b] for r < R, b < kBlock: rows of kBlock points, A read through
// strides (G_k = Phi_k C_k is A = C^T; the basis weights of the derivatives are A = C). The loops hold a tile
// of kRows rows by kVecs vectors of points in registers. They are written with GCC/Clang vectors of VB bytes
// (16 for the SSE2 baseline, 32 for the AVX2 build of the kernel; a vector wider than the target's registers
// is emulated slowly) because the compilers did not vectorise the plain loops over a chunk of points (scalar
// FMAs, or transposes with spills): one row at a time, the kernel was bound by the FMA latency. M = 1e5,
// d = 32, n = 16, r = 4, values + gradient + Laplacian on one core: 0.61 s -> 0.41 s (AVX2), 0.65 s -> 0.59 s
// (SSE2).
#if defined(__GNUC__)
template <class T, std::size_t VB>
struct VecOf {
    // unaligned and may alias T (as the intrinsics' __m256d_u): loads and stores are plain dereferences
    typedef T type __attribute__((vector_size(VB), aligned(sizeof(T)), may_alias));
};
constexpr std::size_t kVecs = 2;  // vectors of points per register tile (kBlock is a multiple of kVecs lanes)

template <class T, std::size_t VB>
inline void gemm_block(std::size_t R, std::size_t S, const T* A, std::size_t ar, std::size_t as, const T* in,
                       T* out) {
    using V_t = typename VecOf<T, VB>::type;
    constexpr std::size_t B = kBlock, V = VB / sizeof(T), W = kVecs * V;
    static_assert(B % W == 0, "kBlock must be a multiple of the tile width");
    for (std::size_t b0 = 0; b0 < B; b0 += W) {
        std::size_t r = 0;
        for (; r + kRows <= R; r += kRows) {
            V_t acc[kRows][kVecs] = {};
            for (std::size_t s = 0; s < S; ++s) {
                V_t x[kVecs];
                for (std::size_t v = 0; v < kVecs; ++v) x[v] = *reinterpret_cast<const V_t*>(in + s * B + b0 + v * V);
                for (std::size_t j = 0; j < kRows; ++j) {
                    const T a = A[(r + j) * ar + s * as];
                    for (std::size_t v = 0; v < kVecs; ++v) acc[j][v] += a * x[v];
                }
            }
            for (std::size_t j = 0; j < kRows; ++j)
                for (std::size_t v = 0; v < kVecs; ++v)
                    *reinterpret_cast<V_t*>(out + (r + j) * B + b0 + v * V) = acc[j][v];
        }
        for (; r < R; ++r) {
            V_t acc[kVecs] = {};
            for (std::size_t s = 0; s < S; ++s)
                for (std::size_t v = 0; v < kVecs; ++v)
                    acc[v] += A[r * ar + s * as] * *reinterpret_cast<const V_t*>(in + s * B + b0 + v * V);
            for (std::size_t v = 0; v < kVecs; ++v) *reinterpret_cast<V_t*>(out + r * B + b0 + v * V) = acc[v];
        }
    }
}
#else
template <class T, std::size_t VB>
inline void gemm_block(std::size_t R, std::size_t S, const T* A, std::size_t ar, std::size_t as, const T* in,
                       T* out) {
    for (std::size_t r = 0; r < R; ++r)
        for (std::size_t b0 = 0; b0 < kBlock; b0 += kChunk) {
            T acc[kChunk] = {};
            for (std::size_t s = 0; s < S; ++s)
                for (std::size_t b = 0; b < kChunk; ++b) acc[b] += A[r * ar + s * as] * in[s * kBlock + b0 + b];
            for (std::size_t b = 0; b < kChunk; ++b) out[r * kBlock + b0 + b] = acc[b];
        }
}
#endif

// The blocks [blo, bhi) of kBlock points of evaluate(): f (M), grad (M, d) row-major and lap (M) at the points
// X[m * sx0 + k * sx1]; grad/lap may be null. VB: the vector width in bytes of the block products.
template <class T, std::size_t VB = 16>
void evaluate_blocks(const TrainView<T>& tt, std::size_t M, const T* X, std::ptrdiff_t sx0, std::ptrdiff_t sx1, T* f,
                     T* grad, T* lap, std::size_t blo, std::size_t bhi) {
    const int d = tt.d;
    const bool deriv = grad != nullptr || lap != nullptr;
    int nmax = 1, rmax = 1;
    std::size_t gsize = 0, rsize = 0;
    for (int k = 0; k < d; ++k) {
        nmax = std::max(nmax, tt.basis[k].n);
        gsize += std::size_t(tt.ranks[k]) * std::size_t(tt.ranks[k + 1]);
        rsize += std::size_t(tt.ranks[k]);
    }
    for (int k = 0; k <= d; ++k) rmax = std::max(rmax, tt.ranks[k]);
    const std::size_t B = kBlock;
    {
        // per-thread work space
        std::vector<T> G(deriv ? gsize * B : std::size_t(rmax) * rmax * B);  // G_k blocks (all k if deriv)
        std::vector<T> R((rsize + 1) * B);                                    // suffixes R_k, k = 0..d
        // with derivatives, the basis values and derivatives of every coordinate are computed once, in the
        // backward pass, and kept for the forward pass (d * n * B each: 128 KiB for d = 32, n = 16)
        std::size_t nsum = 0;
        for (int k = 0; k < d; ++k) nsum += std::size_t(tt.basis[k].n);
        std::vector<T> phi((deriv ? nsum : std::size_t(nmax)) * B), dphi(deriv ? nsum * B : 0),
            ddphi(lap ? nsum * B : 0);
        std::vector<std::size_t> poff(std::size_t(d) + 1, 0);
        if (deriv)
            for (int k = 0; k < d; ++k) poff[std::size_t(k) + 1] = poff[std::size_t(k)] + std::size_t(tt.basis[k].n) * B;
        std::vector<T> xb(B), work(7 * B + 5 * std::size_t(nmax));
        std::vector<T> L(std::size_t(rmax) * B), Lnew(std::size_t(rmax) * B);
        std::vector<T> w(std::size_t(nmax) * B), acc(B), u(deriv ? std::size_t(rmax) * rmax * B : 0);
        std::vector<std::size_t> goff(std::size_t(d) + 1), roff(std::size_t(d) + 1);
        {
            std::size_t g = 0, r = 0;
            for (int k = 0; k < d; ++k) {
                goff[std::size_t(k)] = deriv ? g : 0;
                roff[std::size_t(k)] = r;
                g += std::size_t(tt.ranks[k]) * std::size_t(tt.ranks[k + 1]);
                r += std::size_t(tt.ranks[k]);
            }
            roff[std::size_t(d)] = r;
        }
        for (std::size_t blk = blo; blk < bhi; ++blk) {
            const std::size_t m0 = blk * B;
            const std::size_t nb = std::min(B, M - m0);
            // ---- backward pass: G_k = Phi_k Ct_k and suffixes R_k = G_k R_{k+1}
            T* Rd = R.data() + roff[std::size_t(d)] * B;
            for (std::size_t b = 0; b < B; ++b) Rd[b] = T(1);
            for (int k = d - 1; k >= 0; --k) {
                const Basis1D<T>& bs = tt.basis[k];
                const std::size_t n = std::size_t(bs.n), ra = std::size_t(tt.ranks[k]),
                                  rb = std::size_t(tt.ranks[k + 1]), rr = ra * rb;
                for (std::size_t b = 0; b < nb; ++b) xb[b] = X[std::ptrdiff_t(m0 + b) * sx0 + std::ptrdiff_t(k) * sx1];
                T* ph_k = phi.data() + poff[std::size_t(k)];
                T* d1_k = deriv ? dphi.data() + poff[std::size_t(k)] : static_cast<T*>(nullptr);
                T* d2_k = lap ? ddphi.data() + poff[std::size_t(k)] : static_cast<T*>(nullptr);
                basis_block(bs, nb, B, xb.data(), ph_k, d1_k, d2_k, work.data());
                for (std::size_t b = nb; b < B; ++b)
                    for (std::size_t i = 0; i < n; ++i) {
                        ph_k[i * B + b] = T(0);
                        if (d1_k) d1_k[i * B + b] = T(0);
                        if (d2_k) d2_k[i * B + b] = T(0);
                    }
                T* Gk = G.data() + goff[std::size_t(k)] * B;
                const T* C = tt.cores_t[k];
                // G[q][b] = sum_i C[i][q] phi[i][b]
                gemm_block<T, VB>(rr, n, C, 1, rr, ph_k, Gk);
                const T* Rn = R.data() + roff[std::size_t(k) + 1] * B;
                T* Rk = R.data() + roff[std::size_t(k)] * B;
                for (std::size_t a = 0; a < ra; ++a) {
                    T* out = Rk + a * B;
                    std::fill(out, out + B, T(0));
                    for (std::size_t c = 0; c < rb; ++c) {
                        const T* g = Gk + (a * rb + c) * B;
                        const T* rn = Rn + c * B;
                        for (std::size_t b = 0; b < B; ++b) out[b] += g[b] * rn[b];
                    }
                }
            }
            for (std::size_t b = 0; b < nb; ++b) f[m0 + b] = R[b];  // R_0 (rank 1)
            if (!deriv) continue;
            // ---- forward pass: w_i = L_{k-1} Ct_k[i] R_{k+1}; d_k f = phi'.w, d_kk f = phi''.w
            std::fill(acc.begin(), acc.end(), T(0));
            for (std::size_t b = 0; b < B; ++b) L[b] = T(1);
            for (int k = 0; k < d; ++k) {
                const Basis1D<T>& bs = tt.basis[k];
                const std::size_t n = std::size_t(bs.n), ra = std::size_t(tt.ranks[k]),
                                  rb = std::size_t(tt.ranks[k + 1]), rr = ra * rb;
                const T* d1_k = dphi.data() + poff[std::size_t(k)];
                const T* d2_k = lap ? ddphi.data() + poff[std::size_t(k)] : static_cast<const T*>(nullptr);
                const T* C = tt.cores_t[k];
                const T* Rn = R.data() + roff[std::size_t(k) + 1] * B;
                // w[i][b] = sum_{a,c} C[i, a, c] u[a c][b] with u[a c][b] = L[a][b] R_{k+1}[c][b]
                for (std::size_t a = 0; a < ra; ++a)
                    for (std::size_t c = 0; c < rb; ++c) {
                        T* uq = u.data() + (a * rb + c) * B;
                        const T* la = L.data() + a * B;
                        const T* rn = Rn + c * B;
                        for (std::size_t b = 0; b < B; ++b) uq[b] = la[b] * rn[b];
                    }
                gemm_block<T, VB>(n, rr, C, rr, 1, u.data(), w.data());
                if (grad) {
                    T gk[kBlock] = {};
                    for (std::size_t i = 0; i < n; ++i) {
                        const T* p1 = d1_k + i * B;
                        const T* wi = w.data() + i * B;
                        for (std::size_t b = 0; b < B; ++b) gk[b] += p1[b] * wi[b];
                    }
                    for (std::size_t b = 0; b < nb; ++b) grad[(m0 + b) * std::size_t(d) + std::size_t(k)] = gk[b];
                }
                if (lap) {
                    for (std::size_t i = 0; i < n; ++i) {
                        const T* p2 = d2_k + i * B;
                        const T* wi = w.data() + i * B;
                        for (std::size_t b = 0; b < B; ++b) acc[b] += p2[b] * wi[b];
                    }
                }
                if (k + 1 < d) {
                    const T* Gk = G.data() + goff[std::size_t(k)] * B;
                    for (std::size_t c = 0; c < rb; ++c) {
                        T* out = Lnew.data() + c * B;
                        std::fill(out, out + B, T(0));
                        for (std::size_t a = 0; a < ra; ++a) {
                            const T* g = Gk + (a * rb + c) * B;
                            const T* la = L.data() + a * B;
                            for (std::size_t b = 0; b < B; ++b) out[b] += la[b] * g[b];
                        }
                    }
                    std::swap(L, Lnew);
                }
            }
            if (lap)
                for (std::size_t b = 0; b < nb; ++b) lap[m0 + b] = acc[b];
        }
    }
}

template <class T>
using EvaluateBlocks = void (*)(const TrainView<T>&, std::size_t, const T*, std::ptrdiff_t, std::ptrdiff_t, T*, T*,
                                T*, std::size_t, std::size_t);

// f (M), grad (M, d) row-major and lap (M) at the points X[m * sx0 + k * sx1]; grad/lap may be null. The blocks
// of points are split over `threads`; `blocks` may be another compilation of evaluate_blocks (an ISA variant).
template <class T>
void evaluate(const TrainView<T>& tt, std::size_t M, const T* X, std::ptrdiff_t sx0, std::ptrdiff_t sx1, T* f,
              T* grad, T* lap, int threads = 1, EvaluateBlocks<T> blocks = &evaluate_blocks<T>) {
    const std::size_t nblocks = (M + kBlock - 1) / kBlock;
    parallel_for_chunks(nblocks, threads, [&](int, std::size_t blo, std::size_t bhi) {
        blocks(tt, M, X, sx0, sx1, f, grad, lap, blo, bhi);
    });
}

// ---- ALS site contractions (row-major dense arrays; C is (ra, n, rb) row-major) ----

// out[m, c] = sum_{a,i} L[m, a] Phi[m, i] C[a, i, c]   (left interface of the next core)
template <class T>
void interface_left(std::size_t M, std::size_t ra, std::size_t n, std::size_t rb, const T* L, const T* Phi,
                    const T* C, T* out) {
    for (std::size_t m = 0; m < M; ++m) {
        T* o = out + m * rb;
        for (std::size_t c = 0; c < rb; ++c) o[c] = T(0);
        const T* l = L + m * ra;
        const T* p = Phi + m * n;
        for (std::size_t i = 0; i < n; ++i) {
            if (p[i] == T(0)) continue;  // B-spline rows have 4 non-zeros
            for (std::size_t a = 0; a < ra; ++a) {
                const T coef = l[a] * p[i];
                const T* cr = C + (a * n + i) * rb;
                for (std::size_t c = 0; c < rb; ++c) o[c] += coef * cr[c];
            }
        }
    }
}

// out[m, a] = sum_{i,c} C[a, i, c] Phi[m, i] R[m, c]   (right interface of the previous core)
template <class T>
void interface_right(std::size_t M, std::size_t ra, std::size_t n, std::size_t rb, const T* R, const T* Phi,
                     const T* C, T* out) {
    for (std::size_t m = 0; m < M; ++m) {
        const T* r = R + m * rb;
        const T* p = Phi + m * n;
        T* o = out + m * ra;
        for (std::size_t a = 0; a < ra; ++a) {
            T s = T(0);
            for (std::size_t i = 0; i < n; ++i) {
                if (p[i] == T(0)) continue;  // B-spline rows have 4 non-zeros
                const T* cr = C + (a * n + i) * rb;
                T t = T(0);
                for (std::size_t c = 0; c < rb; ++c) t += cr[c] * r[c];
                s += p[i] * t;
            }
            o[a] = s;
        }
    }
}

// out[m] = sum_{a,i,c} L[m, a] Phi[m, i] C[a, i, c] R[m, c]   (the model's values with core C in place)
template <class T>
void site_values(std::size_t M, std::size_t ra, std::size_t n, std::size_t rb, const T* L, const T* Phi,
                 const T* R, const T* C, T* out) {
    for (std::size_t m = 0; m < M; ++m) {
        const T* l = L + m * ra;
        const T* p = Phi + m * n;
        const T* r = R + m * rb;
        T s = T(0);
        for (std::size_t a = 0; a < ra; ++a) {
            T sa = T(0);
            for (std::size_t i = 0; i < n; ++i) {
                if (p[i] == T(0)) continue;  // B-spline rows have 4 non-zeros
                const T* cr = C + (a * n + i) * rb;
                T t = T(0);
                for (std::size_t c = 0; c < rb; ++c) t += cr[c] * r[c];
                sa += p[i] * t;
            }
            s += l[a] * sa;
        }
        out[m] = s;
    }
}

}  // namespace numtk::ftt
