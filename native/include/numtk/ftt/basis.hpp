// Univariate bases of the functional tensor train (numtk.ftt): values and first/second derivatives
// of orthonormal Legendre polynomials on a box, orthonormal probabilists' Hermite polynomials and cubic
// B-splines on a uniform open knot vector. Pure C++17, no Python; templates on the float type.
#pragma once

#include <cmath>
#include <cstddef>

namespace numtk::ftt {

enum BasisKind : int { kLegendre = 0, kHermite = 1, kBSpline = 2 };
enum Extrapolate : int { kLinear = 0, kClip = 1 };

// One coordinate's basis: kind, number of functions n and its two parameters
// (lo, hi) for the bounded bases, (loc, scale) for Hermite.
template <class T>
struct Basis1D {
    int kind = kLegendre;
    int n = 1;
    T p0 = T(-1);
    T p1 = T(1);
    int extrapolate = kLinear;
};

namespace detail {

// Legendre at z in [-1, 1]: phi_k = sqrt(2k+1) P_k, derivatives w.r.t. x (factor s = dz/dx).
template <class T>
inline void legendre_point(int n, T z, T s, T* v, T* d1, T* d2) {
    T p_prev = T(1), p = z;            // P_0, P_1
    T dp_prev = T(0), dp = T(1);       // P'_0, P'_1
    T ddp_prev = T(0), ddp = T(0);     // P''_0, P''_1
    v[0] = T(1);
    if (d1) d1[0] = T(0);
    if (d2) d2[0] = T(0);
    for (int k = 1; k < n; ++k) {
        const T c = std::sqrt(T(2 * k + 1));
        v[k] = c * p;
        if (d1) d1[k] = c * dp * s;
        if (d2) d2[k] = c * ddp * s * s;
        // advance to degree k + 1
        const T p_next = (T(2 * k + 1) * z * p - T(k) * p_prev) / T(k + 1);
        const T dp_next = dp_prev + T(2 * k + 1) * p;
        const T ddp_next = ddp_prev + T(2 * k + 1) * dp;
        p_prev = p; p = p_next;
        dp_prev = dp; dp = dp_next;
        ddp_prev = ddp; ddp = ddp_next;
    }
}

// legendre_point for a block of nb <= B points at once (z[b] in [-1, 1]), structure of arrays: function k
// of point b goes to v[k * B + b]. The recurrence coefficients are computed once per block and the loops
// over points vectorise; with one point at a time the square roots and divisions dominate evaluation.
template <class T>
inline void legendre_block(int n, std::size_t nb, std::size_t B, const T* z, T s, T* v, T* d1, T* d2, T* work) {
    T* p0 = work;
    T* p1 = p0 + B;
    T* q0 = p1 + B;  // first derivatives (in z)
    T* q1 = q0 + B;
    T* e0 = q1 + B;  // second derivatives (in z)
    T* e1 = e0 + B;
    for (std::size_t b = 0; b < nb; ++b) {
        p0[b] = T(1); p1[b] = z[b];
        q0[b] = T(0); q1[b] = T(1);
        e0[b] = T(0); e1[b] = T(0);
        v[b] = T(1);
    }
    if (d1) for (std::size_t b = 0; b < nb; ++b) d1[b] = T(0);
    if (d2) for (std::size_t b = 0; b < nb; ++b) d2[b] = T(0);
    for (int k = 1; k < n; ++k) {
        const T c = std::sqrt(T(2 * k + 1)), c1 = c * s, c2 = c * s * s;
        T* vk = v + std::size_t(k) * B;
        for (std::size_t b = 0; b < nb; ++b) vk[b] = c * p1[b];
        if (d1) {
            T* dk = d1 + std::size_t(k) * B;
            for (std::size_t b = 0; b < nb; ++b) dk[b] = c1 * q1[b];
        }
        if (d2) {
            T* dk = d2 + std::size_t(k) * B;
            for (std::size_t b = 0; b < nb; ++b) dk[b] = c2 * e1[b];
        }
        if (k + 1 == n) break;
        const T a = T(2 * k + 1) / T(k + 1), g = T(k) / T(k + 1), w = T(2 * k + 1);
        for (std::size_t b = 0; b < nb; ++b) {
            const T pn = a * z[b] * p1[b] - g * p0[b];
            const T qn = q0[b] + w * p1[b];
            const T en = e0[b] + w * q1[b];
            p0[b] = p1[b]; p1[b] = pn;
            q0[b] = q1[b]; q1[b] = qn;
            e0[b] = e1[b]; e1[b] = en;
        }
    }
}

// Orthonormal probabilists' Hermite h_k(u). For |u| > 10 the recurrence runs on rescaled values
// (Hermite-function style: a running power-of-two factor is split off, as exp(-u^2/4) is in the
// Hermite functions) so intermediate values never overflow; the factor is put back exactly by ldexp.
template <class T>
inline void hermite_values(int n, T u, T* h) {
    h[0] = T(1);
    if (n < 2) return;
    h[1] = u;
    if (std::fabs(u) <= T(10)) {
        for (int k = 1; k + 1 < n; ++k)
            h[k + 1] = (u * h[k] - std::sqrt(T(k)) * h[k - 1]) / std::sqrt(T(k + 1));
        return;
    }
    T a = T(1), b = u;
    int e = 0;
    for (int k = 1; k + 1 < n; ++k) {
        const T c = (u * b - std::sqrt(T(k)) * a) / std::sqrt(T(k + 1));
        a = b;
        b = c;
        if (std::fabs(b) > std::ldexp(T(1), 48)) {
            a = std::ldexp(a, -48);
            b = std::ldexp(b, -48);
            e += 48;
        }
        h[k + 1] = std::ldexp(b, e);
    }
}

template <class T>
inline void hermite_point(int n, T u, T inv_scale, T* v, T* d1, T* d2) {
    hermite_values(n, u, v);
    if (d1)
        for (int k = 0; k < n; ++k) d1[k] = k >= 1 ? std::sqrt(T(k)) * v[k - 1] * inv_scale : T(0);
    if (d2)
        for (int k = 0; k < n; ++k)
            d2[k] = k >= 2 ? std::sqrt(T(k) * T(k - 1)) * v[k - 2] * inv_scale * inv_scale : T(0);
}

// Knot j of the uniform open cubic knot vector with n functions on [lo, hi] (n >= 4): t_0..t_3 = lo,
// t_n..t_{n+3} = hi, n - 3 equal intervals in between.
template <class T>
inline T knot(int j, int n, T lo, T hi) {
    if (j <= 3) return lo;
    if (j >= n) return hi;
    return lo + (hi - lo) * T(j - 3) / T(n - 3);
}

template <class T>
inline T safe_div(T a, T b) {
    return b > T(0) ? a / b : T(0);
}

// Cubic B-splines by the Cox-de Boor recurrence on the span containing x (x already in [lo, hi]).
template <class T>
inline void bspline_point(int n, T x, T lo, T hi, T* v, T* d1, T* d2) {
    for (int i = 0; i < n; ++i) {
        v[i] = T(0);
        if (d1) d1[i] = T(0);
        if (d2) d2[i] = T(0);
    }
    const T h = (hi - lo) / T(n - 3);
    int s = 3 + static_cast<int>(std::floor((x - lo) / h));
    if (s < 3) s = 3;
    if (s > n - 1) s = n - 1;
    auto t = [&](int j) { return knot(j, n, lo, hi); };
    // N1[j]: N_{s-1+j,1}; N2[j]: N_{s-2+j,2}; N3[j]: N_{s-3+j,3}
    T N1[2], N2[3], N3[4];
    {
        const int i0 = s - 1, i1 = s;  // degree 1 from N_{s,0} = 1
        N1[0] = safe_div(t(i0 + 2) - x, t(i0 + 2) - t(i0 + 1));
        N1[1] = safe_div(x - t(i1), t(i1 + 1) - t(i1));
    }
    for (int j = 0; j < 3; ++j) {
        const int i = s - 2 + j;
        const T left = j >= 1 ? N1[j - 1] : T(0);   // N_{i,1}
        const T right = j <= 1 ? N1[j] : T(0);      // N_{i+1,1}
        N2[j] = safe_div(x - t(i), t(i + 2) - t(i)) * left + safe_div(t(i + 3) - x, t(i + 3) - t(i + 1)) * right;
    }
    for (int j = 0; j < 4; ++j) {
        const int i = s - 3 + j;
        const T left = j >= 1 ? N2[j - 1] : T(0);
        const T right = j <= 2 ? N2[j] : T(0);
        N3[j] = safe_div(x - t(i), t(i + 3) - t(i)) * left + safe_div(t(i + 4) - x, t(i + 4) - t(i + 1)) * right;
    }
    for (int j = 0; j < 4; ++j) v[s - 3 + j] = N3[j];
    if (d1) {
        for (int j = 0; j < 4; ++j) {
            const int i = s - 3 + j;
            const T left = j >= 1 ? N2[j - 1] : T(0);
            const T right = j <= 2 ? N2[j] : T(0);
            d1[i] = T(3) * (safe_div(left, t(i + 3) - t(i)) - safe_div(right, t(i + 4) - t(i + 1)));
        }
    }
    if (d2) {
        T D2[3];  // N'_{s-2+j,2}
        for (int j = 0; j < 3; ++j) {
            const int i = s - 2 + j;
            const T left = j >= 1 ? N1[j - 1] : T(0);
            const T right = j <= 1 ? N1[j] : T(0);
            D2[j] = T(2) * (safe_div(left, t(i + 2) - t(i)) - safe_div(right, t(i + 3) - t(i + 1)));
        }
        for (int j = 0; j < 4; ++j) {
            const int i = s - 3 + j;
            const T left = j >= 1 ? D2[j - 1] : T(0);
            const T right = j <= 2 ? D2[j] : T(0);
            d2[i] = T(3) * (safe_div(left, t(i + 3) - t(i)) - safe_div(right, t(i + 4) - t(i + 1)));
        }
    }
}

// Inside the box (bounded bases).
template <class T>
inline void bounded_inside(const Basis1D<T>& b, T x, T* v, T* d1, T* d2) {
    if (b.kind == kLegendre) {
        const T s = T(2) / (b.p1 - b.p0);
        T z = (x - b.p0) * s - T(1);
        if (z > T(1)) z = T(1);
        if (z < T(-1)) z = T(-1);
        legendre_point(b.n, z, s, v, d1, d2);
    } else {
        bspline_point(b.n, x, b.p0, b.p1, v, d1, d2);
    }
}

}  // namespace detail

// Values (and derivatives where d1 / d2 are non-null) of the n functions of basis b at x, written to
// v[0..n), d1[0..n), d2[0..n). Outside [lo, hi] the bounded bases extend linearly from the edge
// (value + slope * distance, curvature 0) or are clipped (edge value, zero derivatives).
// `scratch` must hold 2 * n values (used for the edge slope when d1 is not requested).
template <class T>
inline void basis_point(const Basis1D<T>& b, T x, T* v, T* d1, T* d2, T* scratch) {
    if (b.kind == kHermite) {
        detail::hermite_point(b.n, (x - b.p0) / b.p1, T(1) / b.p1, v, d1, d2);
        return;
    }
    if (x >= b.p0 && x <= b.p1) {
        detail::bounded_inside(b, x, v, d1, d2);
        return;
    }
    const T e = x < b.p0 ? b.p0 : b.p1;
    T* slope = d1 ? d1 : scratch;
    detail::bounded_inside(b, e, v, slope, static_cast<T*>(nullptr));
    if (b.extrapolate == kClip) {
        for (int i = 0; i < b.n; ++i) slope[i] = T(0);
    } else {
        const T dx = x - e;
        for (int i = 0; i < b.n; ++i) v[i] += slope[i] * dx;
    }
    if (d2)
        for (int i = 0; i < b.n; ++i) d2[i] = T(0);
}

// Values (and derivatives where d1 / d2 are non-null) of basis b at the nb <= B points x[0..nb), structure of
// arrays: function i of point p goes to v[i * B + p]. Legendre points inside the box go through the
// vectorised legendre_block; other kinds and points outside the box go one at a time through basis_point.
// `work` must hold 7 * B + 5 * n values.
template <class T>
inline void basis_block(const Basis1D<T>& b, std::size_t nb, std::size_t B, const T* x, T* v, T* d1, T* d2,
                        T* work) {
    const std::size_t n = static_cast<std::size_t>(b.n);
    T* pv = work + 6 * B;
    T* p1 = pv + n;
    T* p2 = p1 + n;
    T* scratch = p2 + n;
    auto one = [&](std::size_t p) {
        basis_point(b, x[p], pv, d1 ? p1 : static_cast<T*>(nullptr), d2 ? p2 : static_cast<T*>(nullptr), scratch);
        for (std::size_t i = 0; i < n; ++i) v[i * B + p] = pv[i];
        if (d1) for (std::size_t i = 0; i < n; ++i) d1[i * B + p] = p1[i];
        if (d2) for (std::size_t i = 0; i < n; ++i) d2[i * B + p] = p2[i];
    };
    if (b.kind != kLegendre) {
        for (std::size_t p = 0; p < nb; ++p) one(p);
        return;
    }
    const T s = T(2) / (b.p1 - b.p0);
    T* zrow = scratch + 2 * n;  // the clamped coordinates z in [-1, 1]
    std::size_t outside = 0;
    for (std::size_t p = 0; p < nb; ++p) {
        const T xp = x[p];
        if (!(xp >= b.p0 && xp <= b.p1)) ++outside;
        T t = (xp - b.p0) * s - T(1);
        zrow[p] = t > T(1) ? T(1) : (t < T(-1) ? T(-1) : t);
    }
    detail::legendre_block(b.n, nb, B, zrow, s, v, d1, d2, work);
    if (outside)
        for (std::size_t p = 0; p < nb; ++p)
            if (!(x[p] >= b.p0 && x[p] <= b.p1)) one(p);
}

constexpr int kMaxBasisSize = 512;

// Batched: x[m * sx] for m < M; outputs are (M, n) row-major (null to skip an order).
template <class T>
void basis_eval(const Basis1D<T>& b, std::size_t M, const T* x, std::ptrdiff_t sx, T* v, T* d1, T* d2) {
    const std::size_t n = static_cast<std::size_t>(b.n);
    // scratch for the extrapolation slope, sized for the largest supported n (checked by the bindings)
    T scratch[2 * kMaxBasisSize];
    for (std::size_t m = 0; m < M; ++m) {
        basis_point(b, x[static_cast<std::ptrdiff_t>(m) * sx], v + m * n, d1 ? d1 + m * n : nullptr,
                    d2 ? d2 + m * n : nullptr, scratch);
    }
}

}  // namespace numtk::ftt
