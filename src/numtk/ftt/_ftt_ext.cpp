// pybind11 bindings of the functional tensor train kernels in native/include/numtk/ftt/.
// Python validates arguments first; the checks here are the last line of defence (no crash on bad input).
#include <algorithm>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#include <immintrin.h>
#endif

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "numtk/bindings.hpp"
#include "numtk/ftt/als_assemble.hpp"
#include "numtk/ftt/basis.hpp"
#include "numtk/ftt/contract.hpp"

namespace py = pybind11;
namespace ft = numtk::ftt;

namespace {

using numtk::bindings::darray;
using numtk::bindings::dispatch_float;
using numtk::bindings::element_stride;
using numtk::bindings::need;
using numtk::bindings::strides_are_multiples;

template <class T>
ft::Basis1D<T> make_basis(int kind, int n, double p0, double p1, int extrap) {
    need(kind == ft::kLegendre || kind == ft::kHermite || kind == ft::kBSpline, "unknown basis kind");
    need(n >= 1 && n <= ft::kMaxBasisSize, "basis size must lie in [1, 512]");
    need(kind != ft::kBSpline || n >= 4, "the cubic B-spline basis needs n >= 4");
    need(kind == ft::kHermite ? p1 > 0.0 : p0 < p1, "basis parameters: need lo < hi (scale > 0 for hermite)");
    need(extrap == ft::kLinear || extrap == ft::kClip, "unknown extrapolation mode");
    ft::Basis1D<T> b;
    b.kind = kind;
    b.n = n;
    b.p0 = T(p0);
    b.p1 = T(p1);
    b.extrapolate = extrap;
    return b;
}

template <class T>
py::array basis_impl(py::array x, int kind, int n, double p0, double p1, int extrap, int order) {
    need(x.ndim() == 1, "`x` must be 1-D");
    need(order >= 0 && order <= 2, "`order` must be 0, 1 or 2");
    const auto b = make_basis<T>(kind, n, p0, p1, extrap);
    const auto M = static_cast<std::size_t>(x.shape(0));
    py::array_t<T> out({static_cast<py::ssize_t>(order + 1), static_cast<py::ssize_t>(M), static_cast<py::ssize_t>(n)});
    const T* px = static_cast<const T*>(x.data());
    const std::ptrdiff_t sx = element_stride<T>(x, 0);
    T* po = out.mutable_data();
    const std::size_t plane = M * std::size_t(n);
    {
        py::gil_scoped_release release;
        ft::basis_eval(b, M, px, sx, po, order >= 1 ? po + plane : nullptr, order >= 2 ? po + 2 * plane : nullptr);
    }
    return out;
}

py::array basis(py::array x, int kind, int n, double p0, double p1, int extrap, int order) {
    need((x.strides(0) % static_cast<py::ssize_t>(x.itemsize())) == 0, "`x` must be aligned");
    return dispatch_float<py::type_error>(x, "`x` must be float32 or float64", [&](auto t) {
        return basis_impl<decltype(t)>(x, kind, n, p0, p1, extrap, order);
    });
}

// The reduced Kronecker assembly of one core's normal equations (numtk/ftt/_als.py, _normal_equations_products)
// without forming the Kronecker rows: S[z, l] += sum_m f1_z[m] f2_z[m] B[m, l] for z < nz (a multiple
// of 4) and l < ldb (a multiple of 12), rows m < k. f1 and f2 point to rows of k values; B is (k, ldb) row
// major; S is (nz, ldb) row major. A 4 x 12 tile of S stays in registers (12 AVX2 vectors) while the rows
// stream past; the four factors of a row are formed on the fly (one product each per 12 FMAs).
template <class T>
void khatri_rao_gemm(std::size_t k, std::size_t nz, const T* const* f1, const T* const* f2, const T* B,
                     std::size_t ldb, T* S) {
    for (std::size_t z0 = 0; z0 < nz; z0 += 4) {
        const T *a0 = f1[z0], *a1 = f1[z0 + 1], *a2 = f1[z0 + 2], *a3 = f1[z0 + 3];
        const T *b0 = f2[z0], *b1 = f2[z0 + 1], *b2 = f2[z0 + 2], *b3 = f2[z0 + 3];
        for (std::size_t l0 = 0; l0 < ldb; l0 += 12) {
            T acc[4][12] = {};
            for (std::size_t m = 0; m < k; ++m) {
                const T* row = B + m * ldb + l0;
                const T x0 = a0[m] * b0[m], x1 = a1[m] * b1[m], x2 = a2[m] * b2[m], x3 = a3[m] * b3[m];
                for (int j = 0; j < 12; ++j) {
                    const T v = row[j];
                    acc[0][j] += x0 * v;
                    acc[1][j] += x1 * v;
                    acc[2][j] += x2 * v;
                    acc[3][j] += x3 * v;
                }
            }
            for (int zi = 0; zi < 4; ++zi)
                for (int j = 0; j < 12; ++j) S[(z0 + std::size_t(zi)) * ldb + l0 + std::size_t(j)] += acc[zi][j];
        }
    }
}

// Rows [m0, m1) of one core's reduced normal equations, accumulated: S (nzp, ldq) += sum_m Z_m Ys_m^T with
// Z_m = w_m (L L pairs) (x) (R R pairs) and Ys_m the 2n - 1 basis products I, J; Bt (nbp, ldn) += sum_m
// w_m y_m (L (x) R)_m Phi_m^T. nzp, nbp: the pair and (a, c) counts rounded up to 4; ldq, ldn: q and n rounded
// up to 12 (the padding is zero). Chunks of `chunk` rows are transposed into `work` first.
template <class T>
using KhatriRaoGemm = void (*)(std::size_t, std::size_t, const T* const*, const T* const*, const T*, std::size_t, T*);

template <class T, KhatriRaoGemm<T> kr = &khatri_rao_gemm<T>>
void products_gemm(std::size_t m0, std::size_t m1, std::size_t ra, std::size_t n, std::size_t rb, const T* L,
                   const T* Phi, const T* R, const T* w, const T* y, const std::int64_t* I, const std::int64_t* J,
                   std::size_t q, T* S, T* Bt) {
    constexpr std::size_t chunk = 64;
    const std::size_t pa = ra * (ra + 1) / 2, pb = rb * (rb + 1) / 2;
    const std::size_t nz = pa * pb, nzp = (nz + 3) / 4 * 4, nb = ra * rb, nbp = (nb + 3) / 4 * 4;
    const std::size_t ldq = (q + 11) / 12 * 12, ldn = (n + 11) / 12 * 12;
    std::vector<T> lt(ra * chunk), lw(ra * chunk), rt(rb * chunk), lp(pa * chunk), rp(pb * chunk),
        zero(chunk, T(0)), ys(chunk * ldq, T(0)), ph(chunk * ldn, T(0));
    std::vector<const T*> f1(nzp), f2(nzp), g1(nbp), g2(nbp);
    for (std::size_t z = 0; z < nzp; ++z) {
        f1[z] = z < nz ? lp.data() + (z / pb) * chunk : zero.data();
        f2[z] = z < nz ? rp.data() + (z % pb) * chunk : zero.data();
    }
    for (std::size_t z = 0; z < nbp; ++z) {
        g1[z] = z < nb ? lw.data() + (z / rb) * chunk : zero.data();
        g2[z] = z < nb ? rt.data() + (z % rb) * chunk : zero.data();
    }
    for (std::size_t c0 = m0; c0 < m1; c0 += chunk) {
        const std::size_t k = std::min(chunk, m1 - c0);
        for (std::size_t m = 0; m < k; ++m) {
            const T* l = L + (c0 + m) * ra;
            const T* r = R + (c0 + m) * rb;
            const T* p = Phi + (c0 + m) * n;
            const T wm = w[c0 + m], wy = wm * y[c0 + m];
            for (std::size_t a = 0; a < ra; ++a) {
                lt[a * chunk + m] = wm * l[a];
                lw[a * chunk + m] = wy * l[a];
            }
            for (std::size_t c = 0; c < rb; ++c) rt[c * chunk + m] = r[c];
            T* yr = ys.data() + m * ldq;
            for (std::size_t u = 0; u < q; ++u) yr[u] = p[I[u]] * p[J[u]];
            T* pr = ph.data() + m * ldn;
            for (std::size_t i = 0; i < n; ++i) pr[i] = p[i];
        }
        std::size_t u = 0;
        for (std::size_t a = 0; a < ra; ++a)
            for (std::size_t a2 = a; a2 < ra; ++a2, ++u) {
                const T *x1 = lt.data() + a * chunk, *x2 = L + c0 * ra + a2;
                T* o = lp.data() + u * chunk;
                for (std::size_t m = 0; m < k; ++m) o[m] = x1[m] * x2[m * ra];  // w L_a L_a'
            }
        u = 0;
        for (std::size_t c = 0; c < rb; ++c)
            for (std::size_t c2 = c; c2 < rb; ++c2, ++u) {
                const T *x1 = rt.data() + c * chunk, *x2 = rt.data() + c2 * chunk;
                T* o = rp.data() + u * chunk;
                for (std::size_t m = 0; m < k; ++m) o[m] = x1[m] * x2[m];
            }
        kr(k, nzp, f1.data(), f2.data(), ys.data(), ldq, S);
        kr(k, nbp, g1.data(), g2.data(), ph.data(), ldn, Bt);
    }
}

// The evaluation kernel compiled a second time for AVX2 + FMA (x86-64 with GCC), chosen at run time when the CPU
// has both; the wheels' baseline build is SSE2. `flatten` inlines every inline callee into this variant, so no
// AVX2 code is emitted under a symbol the baseline path could call.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
template <class T>
__attribute__((target("avx2,fma"), flatten)) void evaluate_blocks_avx2(const ft::TrainView<T>& tt, std::size_t M,
                                                                       const T* X, std::ptrdiff_t sx0,
                                                                       std::ptrdiff_t sx1, T* f, T* grad, T* lap,
                                                                       std::size_t blo, std::size_t bhi) {
    ft::evaluate_blocks<T, 32>(tt, M, X, sx0, sx1, f, grad, lap, blo, bhi);
}

bool cpu_has_avx2_fma() {
    static const bool yes = [] {
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    }();
    return yes;
}

template <class T>
ft::EvaluateBlocks<T> fastest_blocks() {
    return cpu_has_avx2_fma() ? &evaluate_blocks_avx2<T> : &ft::evaluate_blocks<T>;
}

__attribute__((target("avx2,fma"), flatten)) void assemble_sparse_avx2(
    std::size_t m0, std::size_t m1, std::size_t ra, std::size_t n, std::size_t rb, const double* L, const double* DL,
    const double* Phi, const double* DPhi, const double* R, const double* DR, const double* w, const double* y,
    double* G, double* b, double* val, std::size_t* idx) {
    ft::assemble_sparse<double>(m0, m1, ra, n, rb, L, DL, Phi, DPhi, R, DR, w, y, G, b, val, idx);
}

using AssembleSparse = void (*)(std::size_t, std::size_t, std::size_t, std::size_t, std::size_t, const double*,
                                const double*, const double*, const double*, const double*, const double*,
                                const double*, const double*, double*, double*, double*, std::size_t*);

AssembleSparse fastest_assemble_sparse() {
    return cpu_has_avx2_fma() ? &assemble_sparse_avx2 : &ft::assemble_sparse<double>;
}

using ProductsGemm = void (*)(std::size_t, std::size_t, std::size_t, std::size_t, std::size_t, const double*,
                              const double*, const double*, const double*, const double*, const std::int64_t*,
                              const std::int64_t*, std::size_t, double*, double*);

// khatri_rao_gemm with AVX2 intrinsics: the 4 x 12 tile in 12 registers, the row factors of a z block formed
// first (k values each, in L1) and broadcast from memory, so a row costs 3 + 4 loads for 12 FMAs.
__attribute__((target("avx2,fma"))) void khatri_rao_gemm_avx2(std::size_t k, std::size_t nz, const double* const* f1,
                                                               const double* const* f2, const double* B,
                                                               std::size_t ldb, double* S) {
    std::vector<double> x(4 * k);
    for (std::size_t z0 = 0; z0 < nz; z0 += 4) {
        for (std::size_t zi = 0; zi < 4; ++zi) {
            const double *a = f1[z0 + zi], *b = f2[z0 + zi];
            double* o = x.data() + zi * k;
            for (std::size_t m = 0; m < k; ++m) o[m] = a[m] * b[m];
        }
        const double *x0 = x.data(), *x1 = x0 + k, *x2 = x1 + k, *x3 = x2 + k;
        for (std::size_t l0 = 0; l0 < ldb; l0 += 12) {
            __m256d c00 = _mm256_setzero_pd(), c01 = c00, c02 = c00, c10 = c00, c11 = c00, c12 = c00, c20 = c00,
                    c21 = c00, c22 = c00, c30 = c00, c31 = c00, c32 = c00;
            const double* row = B + l0;
            for (std::size_t m = 0; m < k; ++m, row += ldb) {
                const __m256d v0 = _mm256_loadu_pd(row), v1 = _mm256_loadu_pd(row + 4), v2 = _mm256_loadu_pd(row + 8);
                __m256d t = _mm256_broadcast_sd(x0 + m);
                c00 = _mm256_fmadd_pd(t, v0, c00);
                c01 = _mm256_fmadd_pd(t, v1, c01);
                c02 = _mm256_fmadd_pd(t, v2, c02);
                t = _mm256_broadcast_sd(x1 + m);
                c10 = _mm256_fmadd_pd(t, v0, c10);
                c11 = _mm256_fmadd_pd(t, v1, c11);
                c12 = _mm256_fmadd_pd(t, v2, c12);
                t = _mm256_broadcast_sd(x2 + m);
                c20 = _mm256_fmadd_pd(t, v0, c20);
                c21 = _mm256_fmadd_pd(t, v1, c21);
                c22 = _mm256_fmadd_pd(t, v2, c22);
                t = _mm256_broadcast_sd(x3 + m);
                c30 = _mm256_fmadd_pd(t, v0, c30);
                c31 = _mm256_fmadd_pd(t, v1, c31);
                c32 = _mm256_fmadd_pd(t, v2, c32);
            }
            const __m256d acc[4][3] = {{c00, c01, c02}, {c10, c11, c12}, {c20, c21, c22}, {c30, c31, c32}};
            for (std::size_t zi = 0; zi < 4; ++zi) {
                double* o = S + (z0 + zi) * ldb + l0;
                for (std::size_t j = 0; j < 3; ++j)
                    _mm256_storeu_pd(o + 4 * j, _mm256_add_pd(_mm256_loadu_pd(o + 4 * j), acc[zi][j]));
            }
        }
    }
}

__attribute__((target("avx2,fma"), flatten)) void products_gemm_avx2(
    std::size_t m0, std::size_t m1, std::size_t ra, std::size_t n, std::size_t rb, const double* L, const double* Phi,
    const double* R, const double* w, const double* y, const std::int64_t* I, const std::int64_t* J, std::size_t q,
    double* S, double* Bt) {
    products_gemm<double, &khatri_rao_gemm_avx2>(m0, m1, ra, n, rb, L, Phi, R, w, y, I, J, q, S, Bt);
}

ProductsGemm fastest_products_gemm() {
    return cpu_has_avx2_fma() ? &products_gemm_avx2 : &products_gemm<double>;
}
#else
bool cpu_has_avx2_fma() { return false; }

template <class T>
ft::EvaluateBlocks<T> fastest_blocks() {
    return &ft::evaluate_blocks<T>;
}

auto fastest_assemble_sparse() { return &ft::assemble_sparse<double>; }

auto fastest_products_gemm() { return &products_gemm<double>; }
#endif

template <class T>
py::tuple evaluate_impl(py::array X, const std::vector<int>& kinds, const std::vector<int>& ns,
                        const std::vector<double>& p0, const std::vector<double>& p1, int extrap, py::list cores,
                        bool want_grad, bool want_lap, int threads, int isa) {
    need(X.ndim() == 2, "`X` must be 2-D");
    need(isa == 0 || isa == 1, "`isa` must be 0 (baseline) or 1 (fastest available)");
    const auto M = static_cast<std::size_t>(X.shape(0));
    const int d = static_cast<int>(X.shape(1));
    need(d >= 1, "`X` must have at least one column");
    need(static_cast<int>(kinds.size()) == d && static_cast<int>(ns.size()) == d && static_cast<int>(p0.size()) == d &&
             static_cast<int>(p1.size()) == d && static_cast<int>(cores.size()) == d,
         "basis descriptions and cores must have one entry per column of `X`");
    need(threads >= 1, "`threads` must be >= 1");
    std::vector<ft::Basis1D<T>> bases;
    std::vector<int> ranks(std::size_t(d) + 1, 1);
    std::vector<std::vector<T>> ct(static_cast<std::size_t>(d));
    std::vector<const T*> ptrs(static_cast<std::size_t>(d));
    for (int k = 0; k < d; ++k) {
        bases.push_back(make_basis<T>(kinds[std::size_t(k)], ns[std::size_t(k)], p0[std::size_t(k)], p1[std::size_t(k)], extrap));
        darray C = py::cast<darray>(cores[std::size_t(k)]);
        need(C.ndim() == 3, "every core must be 3-D (r_{k-1}, n_k, r_k)");
        const auto ra = C.shape(0), n = C.shape(1), rb = C.shape(2);
        need(n == ns[std::size_t(k)], "core " + std::to_string(k) + " does not match its basis size");
        need(ra >= 1 && rb >= 1, "core ranks must be >= 1");
        need(k == 0 ? ra == 1 : ra == ranks[std::size_t(k)], "core " + std::to_string(k) + " has an incompatible left rank");
        if (k == d - 1) need(rb == 1, "the last core must have right rank 1");
        ranks[std::size_t(k) + 1] = static_cast<int>(rb);
        // transpose to (n, ra, rb) in T
        auto& v = ct[std::size_t(k)];
        v.resize(std::size_t(ra * n * rb));
        const double* pc = C.data();
        for (py::ssize_t a = 0; a < ra; ++a)
            for (py::ssize_t i = 0; i < n; ++i)
                for (py::ssize_t c = 0; c < rb; ++c) v[std::size_t((i * ra + a) * rb + c)] = T(pc[(a * n + i) * rb + c]);
        ptrs[std::size_t(k)] = v.data();
    }
    need(strides_are_multiples<T>(X), "`X` must be aligned");
    py::array_t<T> f(static_cast<py::ssize_t>(M));
    py::object grad = py::none(), lap = py::none();
    T* pg = nullptr;
    T* pl = nullptr;
    if (want_grad) {
        py::array_t<T> g({static_cast<py::ssize_t>(M), static_cast<py::ssize_t>(d)});
        pg = g.mutable_data();
        grad = g;
    }
    if (want_lap) {
        py::array_t<T> l(static_cast<py::ssize_t>(M));
        pl = l.mutable_data();
        lap = l;
    }
    ft::TrainView<T> tt;
    tt.d = d;
    tt.basis = bases.data();
    tt.cores_t = ptrs.data();
    tt.ranks = ranks.data();
    const T* px = static_cast<const T*>(X.data());
    const std::ptrdiff_t s0 = element_stride<T>(X, 0);
    const std::ptrdiff_t s1 = element_stride<T>(X, 1);
    T* pf = f.mutable_data();
    {
        py::gil_scoped_release release;
        ft::evaluate(tt, M, px, s0, s1, pf, pg, pl, threads, isa == 1 ? fastest_blocks<T>() : &ft::evaluate_blocks<T>);
    }
    return py::make_tuple(f, grad, lap);
}

py::tuple evaluate(py::array X, const std::vector<int>& kinds, const std::vector<int>& ns, const std::vector<double>& p0,
                   const std::vector<double>& p1, int extrap, py::list cores, bool want_grad, bool want_lap,
                   int threads, int isa) {
    return dispatch_float<py::type_error>(X, "`X` must be float32 or float64", [&](auto t) {
        return evaluate_impl<decltype(t)>(X, kinds, ns, p0, p1, extrap, cores, want_grad, want_lap, threads, isa);
    });
}

struct Site {
    std::size_t M, ra, n, rb;
};

Site check_site(const darray& L, const darray& Phi, const darray* R, const darray& C) {
    need(L.ndim() == 2 && Phi.ndim() == 2 && C.ndim() == 3, "L, Phi must be 2-D and C 3-D");
    need(L.shape(0) == Phi.shape(0), "L and Phi must have the same number of rows");
    need(C.shape(0) == L.shape(1) && C.shape(1) == Phi.shape(1), "C must have shape (L.shape[1], Phi.shape[1], rb)");
    if (R) need(R->ndim() == 2 && R->shape(0) == L.shape(0) && R->shape(1) == C.shape(2), "R must have shape (M, C.shape[2])");
    return {std::size_t(L.shape(0)), std::size_t(C.shape(0)), std::size_t(C.shape(1)), std::size_t(C.shape(2))};
}

// Rows [0, M) in at most `threads` contiguous slices of at least `min_rows` rows; f(slice, lo, hi).
template <class F>
void over_rows(std::size_t M, int threads, std::size_t min_rows, F&& f) {
    const int t = int(std::min<std::size_t>(std::size_t(std::max(threads, 1)), std::max<std::size_t>(1, M / min_rows)));
    numtk::parallel_for_chunks(M, t, f);
}

py::array interface_left(darray L, darray Phi, darray C, int threads) {
    need(threads >= 1, "`threads` must be >= 1");
    const Site s = check_site(L, Phi, nullptr, C);
    py::array_t<double> out({static_cast<py::ssize_t>(s.M), static_cast<py::ssize_t>(s.rb)});
    const double *pl = L.data(), *pp = Phi.data(), *pc = C.data();
    double* po = out.mutable_data();
    {
        py::gil_scoped_release release;
        over_rows(s.M, threads, 2048, [&](int, std::size_t lo, std::size_t hi) {
            ft::interface_left(hi - lo, s.ra, s.n, s.rb, pl + lo * s.ra, pp + lo * s.n, pc, po + lo * s.rb);
        });
    }
    return out;
}

py::array interface_right(darray R, darray Phi, darray C, int threads) {
    need(threads >= 1, "`threads` must be >= 1");
    need(R.ndim() == 2 && Phi.ndim() == 2 && C.ndim() == 3, "R, Phi must be 2-D and C 3-D");
    need(R.shape(0) == Phi.shape(0) && C.shape(2) == R.shape(1) && C.shape(1) == Phi.shape(1),
         "shapes: R (M, rb), Phi (M, n), C (ra, n, rb)");
    const std::size_t M = std::size_t(R.shape(0)), ra = std::size_t(C.shape(0)), n = std::size_t(C.shape(1)),
                      rb = std::size_t(C.shape(2));
    py::array_t<double> out({static_cast<py::ssize_t>(M), static_cast<py::ssize_t>(ra)});
    const double *pr = R.data(), *pp = Phi.data(), *pc = C.data();
    double* po = out.mutable_data();
    {
        py::gil_scoped_release release;
        over_rows(M, threads, 2048, [&](int, std::size_t lo, std::size_t hi) {
            ft::interface_right(hi - lo, ra, n, rb, pr + lo * rb, pp + lo * n, pc, po + lo * ra);
        });
    }
    return out;
}

py::array site_values(darray L, darray Phi, darray R, darray C) {
    const Site s = check_site(L, Phi, &R, C);
    py::array_t<double> out(static_cast<py::ssize_t>(s.M));
    const double *pl = L.data(), *pp = Phi.data(), *pr = R.data(), *pc = C.data();
    double* po = out.mutable_data();
    {
        py::gil_scoped_release release;
        ft::site_values(s.M, s.ra, s.n, s.rb, pl, pp, pr, pc, po);
    }
    return out;
}

using warray = py::array_t<double, py::array::c_style>;

void assemble_chunk(darray L, darray Phi, darray R, darray w, darray y, std::int64_t m0, std::int64_t m1, warray Z,
                    warray Y, warray b) {
    need(L.ndim() == 2 && Phi.ndim() == 2 && R.ndim() == 2 && w.ndim() == 1 && y.ndim() == 1, "bad dimensions");
    const auto M = L.shape(0);
    need(Phi.shape(0) == M && R.shape(0) == M && w.shape(0) == M && y.shape(0) == M, "row counts differ");
    need(0 <= m0 && m0 <= m1 && m1 <= M, "bad chunk bounds");
    const std::size_t ra = std::size_t(L.shape(1)), n = std::size_t(Phi.shape(1)), rb = std::size_t(R.shape(1));
    need(ra <= ft::kMaxAssembleRank && rb <= ft::kMaxAssembleRank, "ranks above 64 are not supported");
    const auto rows = m1 - m0;
    need(Z.ndim() == 2 && Z.shape(0) >= rows && std::size_t(Z.shape(1)) == ft::n_pairs(ra) * ft::n_pairs(rb),
         "Z has the wrong shape");
    need(Y.ndim() == 2 && Y.shape(0) >= rows && std::size_t(Y.shape(1)) == ft::n_pairs(n), "Y has the wrong shape");
    need(b.ndim() == 1 && std::size_t(b.shape(0)) == ra * n * rb, "b has the wrong length");
    const double *pl = L.data(), *pp = Phi.data(), *pr = R.data(), *pw = w.data(), *py_ = y.data();
    double *pz = Z.mutable_data(), *pyy = Y.mutable_data(), *pb = b.mutable_data();
    {
        py::gil_scoped_release release;
        ft::assemble_chunk(std::size_t(m0), std::size_t(m1), ra, n, rb, pl, pp, pr, pw, py_, pz, pyy, pb);
    }
}

using iarray = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>;

// See products_gemm: returns (S, Bt) with S (pairs(ra) * pairs(rb), q) = sum_m Z_m Ys_m^T and Bt (ra * rb, n) =
// sum_m w_m y_m (L (x) R)_m Phi_m^T over the rows [m0, m1), split over `threads`.
py::tuple normal_products(darray L, darray Phi, darray R, darray w, darray y, iarray I, iarray J, std::int64_t m0,
                          std::int64_t m1, int threads) {
    need(threads >= 1, "`threads` must be >= 1");
    need(L.ndim() == 2 && Phi.ndim() == 2 && R.ndim() == 2 && w.ndim() == 1 && y.ndim() == 1, "bad dimensions");
    const auto M = L.shape(0);
    need(Phi.shape(0) == M && R.shape(0) == M && w.shape(0) == M && y.shape(0) == M, "row counts differ");
    need(0 <= m0 && m0 <= m1 && m1 <= M, "bad row bounds");
    const std::size_t ra = std::size_t(L.shape(1)), n = std::size_t(Phi.shape(1)), rb = std::size_t(R.shape(1));
    need(ra >= 1 && rb >= 1 && n >= 1, "empty factors");
    need(I.ndim() == 1 && J.ndim() == 1 && I.shape(0) == J.shape(0), "I and J must be 1-D of the same length");
    const std::size_t q = std::size_t(I.shape(0));
    const std::int64_t* pi = I.data();
    const std::int64_t* pj = J.data();
    for (std::size_t l = 0; l < q; ++l)
        need(pi[l] >= 0 && pj[l] >= 0 && std::size_t(pi[l]) < n && std::size_t(pj[l]) < n, "I, J out of range");
    const std::size_t nz = ft::n_pairs(ra) * ft::n_pairs(rb), nzp = (nz + 3) / 4 * 4, nb = ra * rb,
                      nbp = (nb + 3) / 4 * 4, ldq = (q + 11) / 12 * 12, ldn = (n + 11) / 12 * 12;
    const double *pl = L.data(), *pp = Phi.data(), *pr = R.data(), *pw = w.data(), *py_ = y.data();
    std::vector<double> S(nzp * ldq, 0.0), Bt(nbp * ldn, 0.0);
    {
        py::gil_scoped_release release;
        const auto kernel = fastest_products_gemm();
        const std::size_t rows = std::size_t(m1 - m0);
        const int t = int(std::min<std::size_t>(std::size_t(threads), std::max<std::size_t>(1, rows / 2048)));
        std::vector<std::vector<double>> Ss(std::size_t(t - 1)), Bs(Ss.size());
        numtk::parallel_for_chunks(rows, t, [&](int i, std::size_t lo, std::size_t hi) {
            double* s = S.data();
            double* b = Bt.data();
            if (i > 0) {
                Ss[std::size_t(i - 1)].assign(S.size(), 0.0);
                Bs[std::size_t(i - 1)].assign(Bt.size(), 0.0);
                s = Ss[std::size_t(i - 1)].data();
                b = Bs[std::size_t(i - 1)].data();
            }
            kernel(std::size_t(m0) + lo, std::size_t(m0) + hi, ra, n, rb, pl, pp, pr, pw, py_, pi, pj, q, s, b);
        });
        for (std::size_t i = 0; i < Ss.size(); ++i) {
            for (std::size_t j = 0; j < Ss[i].size(); ++j) S[j] += Ss[i][j];
            for (std::size_t j = 0; j < Bs[i].size(); ++j) Bt[j] += Bs[i][j];
        }
    }
    py::array_t<double> So({static_cast<py::ssize_t>(nz), static_cast<py::ssize_t>(q)});
    py::array_t<double> Bo({static_cast<py::ssize_t>(nb), static_cast<py::ssize_t>(n)});
    double* so = So.mutable_data();
    double* bo = Bo.mutable_data();
    for (std::size_t z = 0; z < nz; ++z)
        for (std::size_t l = 0; l < q; ++l) so[z * q + l] = S[z * ldq + l];
    for (std::size_t z = 0; z < nb; ++z)
        for (std::size_t i = 0; i < n; ++i) bo[z * n + i] = Bt[z * ldn + i];
    return py::make_tuple(So, Bo);
}

// G (P x P, C order, upper triangle accumulated) and b (P) over the rows [m0, m1); DL, DPhi, DR are
// either all given (directional rows) or all None.
void assemble_sparse(darray L, std::optional<darray> DL, darray Phi, std::optional<darray> DPhi, darray R,
                     std::optional<darray> DR, darray w, darray y, std::int64_t m0, std::int64_t m1, warray G,
                     warray b, int threads) {
    need(threads >= 1, "`threads` must be >= 1");
    need(L.ndim() == 2 && Phi.ndim() == 2 && R.ndim() == 2 && w.ndim() == 1 && y.ndim() == 1, "bad dimensions");
    const auto M = L.shape(0);
    need(Phi.shape(0) == M && R.shape(0) == M && w.shape(0) == M && y.shape(0) == M, "row counts differ");
    need(0 <= m0 && m0 <= m1 && m1 <= M, "bad chunk bounds");
    const std::size_t ra = std::size_t(L.shape(1)), n = std::size_t(Phi.shape(1)), rb = std::size_t(R.shape(1));
    const std::size_t P = ra * n * rb;
    const bool directional = DL.has_value();
    need(DPhi.has_value() == directional && DR.has_value() == directional,
         "DL, DPhi and DR must be given together");
    if (directional) {
        need(DL->ndim() == 2 && DL->shape(0) == M && std::size_t(DL->shape(1)) == ra, "DL has the wrong shape");
        need(DPhi->ndim() == 2 && DPhi->shape(0) == M && std::size_t(DPhi->shape(1)) == n, "DPhi has the wrong shape");
        need(DR->ndim() == 2 && DR->shape(0) == M && std::size_t(DR->shape(1)) == rb, "DR has the wrong shape");
    }
    need(G.ndim() == 2 && std::size_t(G.shape(0)) == P && std::size_t(G.shape(1)) == P, "G has the wrong shape");
    need(b.ndim() == 1 && std::size_t(b.shape(0)) == P, "b has the wrong length");
    const double* pdl = directional ? DL->data() : nullptr;
    const double* pdp = directional ? DPhi->data() : nullptr;
    const double* pdr = directional ? DR->data() : nullptr;
    const double *pl = L.data(), *pp = Phi.data(), *pr = R.data(), *pw = w.data(), *py_ = y.data();
    double *pg = G.mutable_data(), *pb = b.mutable_data();
    {
        py::gil_scoped_release release;
        // rows split over the threads; thread 0 accumulates into G and b, the others into their own copies
        // (added at the end). At most one extra copy of G per 512 rows, so small problems stay serial.
        std::vector<std::vector<double>> Gs(std::size_t(std::max(threads, 1) - 1)), bs(Gs.size());
        const auto kernel = fastest_assemble_sparse();
        over_rows(std::size_t(m1 - m0), threads, 512, [&](int t, std::size_t lo, std::size_t hi) {
            double* g = pg;
            double* bb = pb;
            if (t > 0) {
                Gs[std::size_t(t - 1)].assign(P * P, 0.0);
                bs[std::size_t(t - 1)].assign(P, 0.0);
                g = Gs[std::size_t(t - 1)].data();
                bb = bs[std::size_t(t - 1)].data();
            }
            std::vector<double> val(P);
            std::vector<std::size_t> idx(P);
            kernel(std::size_t(m0) + lo, std::size_t(m0) + hi, ra, n, rb, pl, pdl, pp, pdp, pr, pdr, pw, py_, g, bb,
                   val.data(), idx.data());
        });
        for (std::size_t t = 0; t < Gs.size(); ++t) {
            if (Gs[t].empty()) continue;  // a slice that was not used
            for (std::size_t i = 0; i < P; ++i) {  // upper triangle only
                const double* src = Gs[t].data() + i * P;
                double* dst = pg + i * P;
                for (std::size_t j = i; j < P; ++j) dst[j] += src[j];
            }
            for (std::size_t i = 0; i < P; ++i) pb[i] += bs[t][i];
        }
    }
}

}  // namespace

PYBIND11_MODULE(_ftt_ext, m) {
    m.doc() = "Compiled kernels of numtk.ftt (basis evaluation, FTT contraction, ALS assembly).";
    m.def("basis", &basis, py::arg("x"), py::arg("kind"), py::arg("n"), py::arg("p0"), py::arg("p1"),
          py::arg("extrapolate"), py::arg("order"),
          "Basis values (and derivatives up to `order`) at x: array (order + 1, len(x), n).");
    m.def("evaluate", &evaluate, py::arg("X"), py::arg("kinds"), py::arg("ns"), py::arg("p0"), py::arg("p1"),
          py::arg("extrapolate"), py::arg("cores"), py::arg("gradient"), py::arg("laplacian"), py::arg("threads") = 1,
          py::arg("isa") = 1,
          "Values, gradient and Laplacian of an FTT at the rows of X: (f, grad or None, lap or None). isa = 1 uses "
          "the AVX2 + FMA compilation of the kernel where the CPU has it, 0 the baseline one.");
    m.def("cpu_has_avx2_fma", &cpu_has_avx2_fma, "Whether evaluate(isa=1) runs the AVX2 + FMA kernel here.");
    m.def("interface_left", &interface_left, py::arg("L"), py::arg("Phi"), py::arg("C"), py::arg("threads") = 1);
    m.def("interface_right", &interface_right, py::arg("R"), py::arg("Phi"), py::arg("C"), py::arg("threads") = 1);
    m.def("site_values", &site_values, py::arg("L"), py::arg("Phi"), py::arg("R"), py::arg("C"));
    m.def("assemble_chunk", &assemble_chunk, py::arg("L"), py::arg("Phi"), py::arg("R"), py::arg("w"), py::arg("y"),
          py::arg("m0"), py::arg("m1"), py::arg("Z"), py::arg("Y"), py::arg("b"));
    m.def("normal_products", &normal_products, py::arg("L"), py::arg("Phi"), py::arg("R"), py::arg("w"),
          py::arg("y"), py::arg("I"), py::arg("J"), py::arg("m0"), py::arg("m1"), py::arg("threads") = 1,
          "(S, B) over rows [m0, m1): S[(pairs of L, pairs of R), l] = sum_m w L_a L_a' R_c R_c' Phi_I[l] Phi_J[l], "
          "B[(a, c), i] = sum_m w y L_a R_c Phi_i.");
    m.def("assemble_sparse", &assemble_sparse, py::arg("L"), py::arg("DL"), py::arg("Phi"), py::arg("DPhi"),
          py::arg("R"), py::arg("DR"), py::arg("w"), py::arg("y"), py::arg("m0"), py::arg("m1"), py::arg("G"),
          py::arg("b"), py::arg("threads") = 1,
          "Upper triangle of the normal equations of one core from sparse basis rows.");
}
