// Regret Matching+ (RM+) and predictive RM+ (PRM+) for dense two-player zero-sum matrix games.
//
// Tammelin, O. (2014). "Solving large imperfect information games using CFR+". arXiv:1407.5042.
// Farina, G., Kroer, C. & Sandholm, T. (2021). "Faster game solving via predictive Blackwell
// approachability: connecting regret matching and mirror descent". AAAI 2021, arXiv:2007.14358.
//
// Conventions: player 0 (the row player, strategy x over m rows) maximises x'Ay, player 1 (the column
// player, y over n columns) minimises it. The gap of a profile is NashConv = max_i (Ay)_i - min_j (x'A)_j,
// in payoff units (exploitability in OpenSpiel's convention is half of it).
//
// One iteration t = 1, 2, ... (alternating updates, the column player first):
//   u_y = -A'x;  Q_y <- [Q_y + u_y - <y,u_y> 1]^+;  y <- Q_y / sum(Q_y)   (uniform if the sum is 0)
//   u_x =  A y;  Q_x <- [Q_x + u_x - <x,u_x> 1]^+;  x <- Q_x / sum(Q_x)
//   S_x += t x;  S_y += t y                                                (linear averaging)
// PRM+ keeps the same Q update but plays x <- [Q_x + r_x]^+ normalised, where r_x = u_x - <x,u_x> 1 is
// the last instantaneous regret (the prediction of the next one).
//
// Cost: each iteration runs two matrix-vector products, A y and A'x. Both are computed as sums of rows
// weighted by the *non-zero* entries of the strategy (A'x = sum_i x_i A[i,:], A y = sum_j y_j A'[j,:]),
// which skips the rows (or columns) outside the current support: RM+ iterates on a random
// dense game keep about half of the strategies at zero, so this halves the memory traffic that bounds
// the run time. A y needs the rows of A' for that, so a transposed copy is kept when it is affordable
// (`transpose_limit` entries); otherwise A y is a dense row-by-row dot product over A.
//
// The gap of the averages is checked every `check_every` iterations without extra products: since
// x_bar = S_x / W and y_bar = S_y / W with W = sum t, A y_bar = (sum_t t A y_t) / W and
// A'x_bar = (sum_t t A'x_t) / W, and both sums are accumulated from the products the iteration
// computes anyway (O(m + n) per iteration). When that running gap reaches `tol`, the gap is recomputed
// exactly from x_bar and y_bar (two products) and the run stops only if the exact gap is <= tol. The
// returned gap is always the exact one.
//
// Pure C++17: no Python, no pybind11; single-threaded (parallelism belongs to the callers).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

namespace numtk::games {

struct RMPlusOptions {
    std::int64_t max_iter = 100000;   // >= 0
    double tol = 1e-6;                // stop when the exact gap of the averages is <= tol
    std::int64_t check_every = 10;    // >= 1
    bool predictive = false;          // PRM+
    std::size_t transpose_limit = std::size_t(1) << 27;  // keep A' when m * n <= this (1 GiB in double)
    // Iterate on a float copy of A (half the memory traffic of the products that bound the run time).
    // The averages' gap is still certified on A itself, in T; the caller enables it only when tol is
    // well above the rounding of A to float (2 * 2^-24 * max|A| on any gap).
    bool float_storage = false;
};

template <class T>
struct RMPlusResult {
    std::vector<T> x_avg, y_avg;  // linear averages (the returned profile)
    std::vector<T> x_last, y_last;  // last iterates
    std::int64_t n_iter = 0;
    T gap = T(0);                 // exact NashConv of (x_avg, y_avg)
    std::vector<T> history;       // the gap at every check (iterations check_every, 2 check_every, ...)
};

namespace detail {

#ifndef NUMTK_RESTRICT
#if defined(__GNUC__) || defined(__clang__) || defined(_MSC_VER)
#define NUMTK_RESTRICT __restrict
#else
#define NUMTK_RESTRICT
#endif
#endif

// out[0:cols] = sum over k of w[idx[k]] * M[idx[k], 0:cols]   (M row-major with leading dimension ld).
// Rows are taken four at a time so that `out` is loaded and stored once per four rows.
// M may be stored in a narrower type S than the accumulation type T.
template <class S, class T, class I>
void weighted_row_sum(const S* M, std::size_t ld, std::size_t cols, const T* w, const I* idx, std::size_t nidx,
                      T* NUMTK_RESTRICT out) {
    std::fill(out, out + cols, T(0));
    std::size_t k = 0;
    for (; k + 4 <= nidx; k += 4) {
        const S* NUMTK_RESTRICT r0 = M + std::size_t(idx[k]) * ld;
        const S* NUMTK_RESTRICT r1 = M + std::size_t(idx[k + 1]) * ld;
        const S* NUMTK_RESTRICT r2 = M + std::size_t(idx[k + 2]) * ld;
        const S* NUMTK_RESTRICT r3 = M + std::size_t(idx[k + 3]) * ld;
        const T w0 = w[idx[k]], w1 = w[idx[k + 1]], w2 = w[idx[k + 2]], w3 = w[idx[k + 3]];
        for (std::size_t j = 0; j < cols; ++j)
            out[j] += (w0 * T(r0[j]) + w1 * T(r1[j])) + (w2 * T(r2[j]) + w3 * T(r3[j]));
    }
    for (; k < nidx; ++k) {
        const S* NUMTK_RESTRICT r0 = M + std::size_t(idx[k]) * ld;
        const T w0 = w[idx[k]];
        for (std::size_t j = 0; j < cols; ++j) out[j] += w0 * T(r0[j]);
    }
}

// out[i] = sum_j M[i, j] v[j] for i < rows (dense; four independent partial sums per row).
template <class S, class T>
void row_dots(const S* M, std::size_t rows, std::size_t cols, const T* v, T* NUMTK_RESTRICT out) {
    for (std::size_t i = 0; i < rows; ++i) {
        const S* NUMTK_RESTRICT r = M + i * cols;
        T s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        std::size_t j = 0;
        for (; j + 4 <= cols; j += 4) {
            s0 += T(r[j]) * v[j];
            s1 += T(r[j + 1]) * v[j + 1];
            s2 += T(r[j + 2]) * v[j + 2];
            s3 += T(r[j + 3]) * v[j + 3];
        }
        for (; j < cols; ++j) s0 += T(r[j]) * v[j];
        out[i] = (s0 + s1) + (s2 + s3);
    }
}

// Indices of the non-zero entries of v[0:len] into idx; returns their count.
template <class T, class I>
std::size_t support(const T* v, std::size_t len, I* idx) {
    std::size_t c = 0;
    for (std::size_t i = 0; i < len; ++i)
        if (v[i] != T(0)) idx[c++] = I(i);
    return c;
}

template <class T>
T dot(const T* a, const T* b, std::size_t len) {
    T s0 = 0, s1 = 0;
    std::size_t i = 0;
    for (; i + 2 <= len; i += 2) {
        s0 += a[i] * b[i];
        s1 += a[i + 1] * b[i + 1];
    }
    if (i < len) s0 += a[i] * b[i];
    return s0 + s1;
}

// One regret-matching+ step of a player with utilities u, current (played) strategy s, cumulative
// regrets Q and a scratch vector r for the instantaneous regret:
//   r = u - <s,u> 1;  Q <- [Q + r]^+;  s <- normalise(Q) (RM+) or normalise([Q + r]^+) (PRM+).
template <class T>
void rm_plus_step(const T* u, T* s, T* Q, T* r, std::size_t len, bool predictive) {
    const T value = dot(s, u, len);
    for (std::size_t i = 0; i < len; ++i) {
        r[i] = u[i] - value;
        const T q = Q[i] + r[i];
        Q[i] = q > T(0) ? q : T(0);
    }
    T total = 0;
    if (predictive) {
        for (std::size_t i = 0; i < len; ++i) {
            const T p = Q[i] + r[i];
            s[i] = p > T(0) ? p : T(0);
            total += s[i];
        }
    } else {
        for (std::size_t i = 0; i < len; ++i) {
            s[i] = Q[i];
            total += s[i];
        }
    }
    if (total > T(0)) {
        const T inv = T(1) / total;
        for (std::size_t i = 0; i < len; ++i) s[i] *= inv;
    } else {
        std::fill(s, s + len, T(1) / T(len));
    }
}

}  // namespace detail

// The gap max_i (A y)_i - min_j (x'A)_j of a profile, with two dense products (no transposed copy).
template <class T>
T matrix_game_gap(const T* A, std::size_t m, std::size_t n, const T* x, const T* y) {
    std::vector<T> Ay(m), xA(n);
    std::vector<std::uint32_t> idx(m);
    detail::row_dots(A, m, n, y, Ay.data());
    const std::size_t nx = detail::support(x, m, idx.data());
    detail::weighted_row_sum(A, n, n, x, idx.data(), nx, xA.data());
    return *std::max_element(Ay.begin(), Ay.end()) - *std::min_element(xA.begin(), xA.end());
}

namespace detail {

// The iteration, with the products read from Ai (A in storage type S; Ai == A when S == T) and the
// certification read from A in T.
template <class T, class S>
RMPlusResult<T> rm_plus_impl(const T* A, const S* Ai, std::size_t m, std::size_t n, const T* x0, const T* y0,
                             const RMPlusOptions& opt) {
    using detail::weighted_row_sum;
    using Index = std::uint32_t;
    RMPlusResult<T> res;
    const std::size_t check_every = std::size_t(opt.check_every < 1 ? 1 : opt.check_every);
    const std::int64_t max_iter = opt.max_iter < 0 ? 0 : opt.max_iter;

    // A transposed copy makes A y a sum of rows too (skipping the columns outside y's support).
    std::vector<S> At;
    const bool transposed = m * n <= opt.transpose_limit;
    if (transposed) {
        At.resize(m * n);
        constexpr std::size_t B = 32;  // cache-blocked transpose
        for (std::size_t i0 = 0; i0 < m; i0 += B)
            for (std::size_t j0 = 0; j0 < n; j0 += B) {
                const std::size_t i1 = std::min(m, i0 + B), j1 = std::min(n, j0 + B);
                for (std::size_t i = i0; i < i1; ++i)
                    for (std::size_t j = j0; j < j1; ++j) At[j * m + i] = Ai[i * n + j];
            }
    }

    std::vector<T> x(m), y(n), Qx(m, T(0)), Qy(n, T(0)), Sx(m, T(0)), Sy(n, T(0));
    std::vector<T> Ay(m), Atx(n), SAy(m, T(0)), SAtx(n, T(0)), ux(m), uy(n), rx(m), ry(n);
    std::vector<Index> idx(std::max(m, n));
    if (x0) std::copy(x0, x0 + m, x.begin()); else std::fill(x.begin(), x.end(), T(1) / T(m));
    if (y0) std::copy(y0, y0 + n, y.begin()); else std::fill(y.begin(), y.end(), T(1) / T(n));

    auto product_Ay = [&](const T* yy, T* out) {  // out = A yy
        if (transposed) {
            const std::size_t ny = detail::support(yy, n, idx.data());
            weighted_row_sum(At.data(), m, m, yy, idx.data(), ny, out);
        } else {
            detail::row_dots(Ai, m, n, yy, out);
        }
    };
    auto product_Atx = [&](const T* xx, T* out) {  // out = A'xx
        const std::size_t nx = detail::support(xx, m, idx.data());
        weighted_row_sum(Ai, n, n, xx, idx.data(), nx, out);
    };
    auto exact_gap = [&]() {
        std::vector<T> xb(m), yb(n);
        T sx = 0, sy = 0;
        for (std::size_t i = 0; i < m; ++i) sx += Sx[i];
        for (std::size_t j = 0; j < n; ++j) sy += Sy[j];
        for (std::size_t i = 0; i < m; ++i) xb[i] = Sx[i] / sx;
        for (std::size_t j = 0; j < n; ++j) yb[j] = Sy[j] / sy;
        T gap;
        if constexpr (std::is_same_v<S, T>) {
            product_Ay(yb.data(), Ay.data());
            product_Atx(xb.data(), Atx.data());
            gap = *std::max_element(Ay.begin(), Ay.end()) - *std::min_element(Atx.begin(), Atx.end());
        } else {
            gap = matrix_game_gap(A, m, n, xb.data(), yb.data());  // certified on A itself
        }
        res.x_avg = std::move(xb);
        res.y_avg = std::move(yb);
        return gap;
    };

    product_Atx(x.data(), Atx.data());  // A'x of the current x; the next y step reads it
    T W = 0;                           // sum of the weights t
    bool stopped = false;
    std::int64_t t = 1;
    for (; t <= max_iter; ++t) {
        const T wt = T(t);
        for (std::size_t j = 0; j < n; ++j) uy[j] = -Atx[j];
        detail::rm_plus_step(uy.data(), y.data(), Qy.data(), ry.data(), n, opt.predictive);
        product_Ay(y.data(), Ay.data());
        detail::rm_plus_step(Ay.data(), x.data(), Qx.data(), rx.data(), m, opt.predictive);
        product_Atx(x.data(), Atx.data());
        for (std::size_t i = 0; i < m; ++i) {
            Sx[i] += wt * x[i];
            SAy[i] += wt * Ay[i];
        }
        for (std::size_t j = 0; j < n; ++j) {
            Sy[j] += wt * y[j];
            SAtx[j] += wt * Atx[j];
        }
        W += wt;
        if (std::size_t(t) % check_every == 0) {
            T gap = (*std::max_element(SAy.begin(), SAy.end()) - *std::min_element(SAtx.begin(), SAtx.end())) / W;
            if (gap <= T(opt.tol)) {
                gap = exact_gap();  // certify before stopping; leaves Ay/Atx holding the averages' products
                if (gap <= T(opt.tol)) {
                    res.history.push_back(gap);
                    res.gap = gap;
                    stopped = true;
                    break;
                }
                product_Atx(x.data(), Atx.data());  // restore A'x of the current iterate
            }
            res.history.push_back(gap);
        }
    }
    res.n_iter = stopped ? t : max_iter;
    if (!stopped) {
        if (res.n_iter == 0) {  // nothing was averaged: the profile is (x0, y0)
            Sx = x;
            Sy = y;
        }
        res.gap = exact_gap();
    }
    res.x_last = std::move(x);
    res.y_last = std::move(y);
    return res;
}

}  // namespace detail

// RM+ / PRM+ on the zero-sum game with row payoffs A (m x n, row-major, m, n >= 1). x0 and y0 are the
// first strategies played (nullptr: uniform); they must be probability vectors.
template <class T>
RMPlusResult<T> rm_plus(const T* A, std::size_t m, std::size_t n, const T* x0, const T* y0,
                        const RMPlusOptions& opt) {
    if constexpr (!std::is_same_v<T, float>) {
        if (opt.float_storage) {
            std::vector<float> Af(A, A + m * n);
            return detail::rm_plus_impl<T, float>(A, Af.data(), m, n, x0, y0, opt);
        }
    }
    return detail::rm_plus_impl<T, T>(A, A, m, n, x0, y0, opt);
}

}  // namespace numtk::games
