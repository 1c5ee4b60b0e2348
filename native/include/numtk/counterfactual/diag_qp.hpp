// Dual active-set QP with a diagonal Hessian (Goldfarb & Idnani 1983, Math. Prog. 27, 1-33):
//
//   minimise  sum_j h_j z_j^2
//   s.t.      g_i . z >= m_i            i < n   (validity rows, never stored: see below)
//             E_r . z >= e_r            r < n_extra (small dense rows, e.g. output bounds)
//             lo_j <= z_j <= hi_j       (simple bounds, +-inf allowed)
//
// A validity row is g_i = (scale * (x_i - centre), tail): the first f entries come from the row x_i
// of the group matrix X (any strides, float or double), the last p - f entries are the same for every
// row. So the n x p constraint matrix is never formed; one pass over X evaluates every slack.
//
// The method starts from the unconstrained minimiser z = 0 (dual feasible), adds a violated
// constraint, and keeps the factorisation J = L^-T Q, R (Q R = L^-1 N_active, H = 2 diag(h) = L L^T)
// up to date with Givens rotations. The dual objective increases strictly whichever violated
// constraint is added, so it terminates; the active set never exceeds p.
//
// Working set: only vertices of the group's hull can bind and the final active set is small, so the
// solver keeps a working set W of validity rows (their normals cached, a few KB) and iterates on W
// and the small rows alone; a pass over X checks every row only when none of those is violated, and
// moves the `batch` most violated rows into W. A pass costs O(n f); the iterations cost O(|W| p + p^2).
// Python-free; buffers are owned by the solver object.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "numtk/counterfactual/group_stats.hpp"

namespace numtk::counterfactual {

enum class QPStatus : int { optimal = 0, infeasible = 1, max_iter = 2 };

template <class T>
struct DiagQPProblem {
    std::size_t n = 0, f = 0, p = 0;          // validity rows, feature columns, variables (p >= f)
    const T* X = nullptr;                      // n x f, element strides sx0, sx1
    std::ptrdiff_t sx0 = 0, sx1 = 0;
    const double* scale = nullptr;             // f
    const double* centre = nullptr;            // f
    const double* tail = nullptr;              // p - f
    const double* m = nullptr;                 // n
    std::size_t n_extra = 0;
    const double* E = nullptr;                 // n_extra x p, row-major
    const double* e = nullptr;                 // n_extra
    const double* h = nullptr;                 // p, > 0
    const double* lo = nullptr;                // p
    const double* hi = nullptr;                // p
};

struct DiagQPResult {
    QPStatus status = QPStatus::optimal;
    std::vector<double> z;
    std::vector<std::int64_t> active;  // constraint ids: i < n validity, n + r extra, n + n_extra + 2j (+1) box lo (hi)
    std::vector<double> multipliers;
    std::int64_t iterations = 0;
    std::int64_t passes = 0;  // passes over the validity rows
};

template <class T>
class DiagQPSolver {
  public:
    explicit DiagQPSolver(const DiagQPProblem<T>& P, std::size_t batch = 32) : P_(P), batch_(batch ? batch : 1) {}

    DiagQPResult solve(double feas_tol, std::int64_t max_iter) {
        const std::size_t p = P_.p, n = P_.n, ne = P_.n_extra;
        const std::size_t n_con = n + ne + 2 * p;
        DiagQPResult out;
        z_.assign(p, 0.0);
        J_.assign(p * p, 0.0);
        R_.assign(p * p, 0.0);
        for (std::size_t j = 0; j < p; ++j) J_[j * p + j] = 1.0 / std::sqrt(2.0 * P_.h[j]);
        q_ = 0;
        active_.clear();
        u_.assign(p + 1, 0.0);
        is_active_.assign(n_con, 0);
        d_.assign(p, 0.0);
        dz_.assign(p, 0.0);
        r_.assign(p, 0.0);
        np_.assign(p, 0.0);
        v_.assign(P_.f, 0.0);
        in_w_.assign(n, 0);
        wid_.clear();
        wn_.clear();
        winv_.clear();
        passes_ = 0;
        extra_norms();

        std::int64_t it = 0;
        while (true) {
            // Step 1: a violated constraint. The small rows (extra rows and simple bounds) cost O(p)
            // to check, a validity row needs a pass over X: take the most violated small row first
            // (any violated constraint keeps the method finite), and pass over X only when none is.
            // Within a class, the most violated is the one with the least slack over its H^-1 norm.
            std::int64_t ip = -1;
            double best = 0.0, s_ip = 0.0;
            std::size_t wpos = static_cast<std::size_t>(-1);
            for (std::size_t r = 0; r < ne; ++r) {
                const std::size_t id = n + r;
                if (is_active_[id]) continue;
                const double s = extra_slack(r);
                if (!(s < -feas_tol)) continue;
                const double score = s * inv_norm_[id];
                if (ip < 0 || score < best) { best = score; ip = static_cast<std::int64_t>(id); s_ip = s; }
            }
            for (std::size_t j = 0; j < p; ++j) {
                for (int side = 0; side < 2; ++side) {
                    const std::size_t id = n + ne + 2 * j + side;
                    if (is_active_[id]) continue;
                    const double s = side == 0 ? z_[j] - P_.lo[j] : P_.hi[j] - z_[j];
                    if (!(s < -feas_tol)) continue;  // false for infinite bounds
                    const double score = s * std::sqrt(2.0 * P_.h[j]);
                    if (ip < 0 || score < best) { best = score; ip = static_cast<std::int64_t>(id); s_ip = s; }
                }
            }
            if (ip < 0) {
                for (std::size_t j = 0; j < wid_.size(); ++j) {
                    const std::size_t id = static_cast<std::size_t>(wid_[j]);
                    if (is_active_[id]) continue;
                    const double* g = &wn_[j * p];
                    double sj = -P_.m[id];
                    for (std::size_t k = 0; k < p; ++k) sj += g[k] * z_[k];
                    if (!(sj < -feas_tol)) continue;
                    const double score = sj * winv_[j];
                    if (ip < 0 || score < best) { best = score; ip = static_cast<std::int64_t>(id); s_ip = sj; wpos = j; }
                }
            }
            if (ip < 0) {
                ++passes_;
                if (!refill(feas_tol)) { out.status = QPStatus::optimal; break; }
                continue;
            }
            if (it >= max_iter) { out.status = QPStatus::max_iter; break; }
            if (static_cast<std::size_t>(ip) < n) std::copy(&wn_[wpos * p], &wn_[wpos * p] + p, np_.begin());
            else normal(static_cast<std::size_t>(ip), np_.data());
            u_[q_] = 0.0;
            // Step 2: move along the primal/dual directions until ip is active.
            bool added = false, infeasible = false;
            while (!added) {
                ++it;
                compute_d();
                double dz_dot = 0.0, dz_norm2 = 0.0, np_norm2 = 0.0;
                for (std::size_t k = 0; k < p; ++k) {
                    double s = 0.0;
                    for (std::size_t j = q_; j < p; ++j) s += J_[k * p + j] * d_[j];
                    dz_[k] = s;
                    dz_dot += s * np_[k];
                    dz_norm2 += s * s;
                    np_norm2 += np_[k] * np_[k];
                }
                // r = R^-1 d[:q] (back substitution)
                for (std::size_t i = q_; i-- > 0;) {
                    double s = d_[i];
                    for (std::size_t j = i + 1; j < q_; ++j) s -= R_[i * p + j] * r_[j];
                    r_[i] = s / R_[i * p + i];
                }
                const double inf = std::numeric_limits<double>::infinity();
                double t1 = inf;
                std::size_t l = 0;
                for (std::size_t j = 0; j < q_; ++j) {
                    if (r_[j] > 0.0) {
                        const double t = u_[j] / r_[j];
                        if (t < t1) { t1 = t; l = j; }
                    }
                }
                double t2 = inf;
                if (dz_norm2 > 1e-28 * np_norm2 && dz_dot > 0.0) t2 = -s_ip / dz_dot;
                if (t1 == inf && t2 == inf) { infeasible = true; break; }
                if (t2 == inf) {
                    for (std::size_t j = 0; j < q_; ++j) u_[j] -= t1 * r_[j];
                    u_[q_] += t1;
                    drop(l);
                    continue;
                }
                const double t = std::min(t1, t2);
                for (std::size_t k = 0; k < p; ++k) z_[k] += t * dz_[k];
                for (std::size_t j = 0; j < q_; ++j) u_[j] -= t * r_[j];
                u_[q_] += t;
                if (t2 <= t1) {
                    add(static_cast<std::size_t>(ip));
                    added = true;
                } else {
                    drop(l);
                    s_ip = slack_of(static_cast<std::size_t>(ip));
                    if (!(s_ip < 0.0)) {  // became satisfied through rounding: leave it inactive
                        break;
                    }
                }
            }
            if (infeasible) { out.status = QPStatus::infeasible; break; }
        }
        out.z = z_;
        out.active.assign(active_.begin(), active_.end());
        out.multipliers.assign(u_.begin(), u_.begin() + static_cast<std::ptrdiff_t>(q_));
        out.iterations = it;
        out.passes = passes_;
        return out;
    }

  private:
    const DiagQPProblem<T>& P_;
    std::size_t batch_;
    std::vector<double> z_, J_, R_, u_, d_, dz_, r_, np_, v_, inv_norm_;
    std::vector<std::int64_t> active_;
    std::vector<char> is_active_, in_w_;
    std::vector<std::int64_t> wid_;             // working set: validity row ids
    std::vector<double> wn_, winv_;             // their normals (|W| x p) and inverse H^-1 norms
    std::vector<std::pair<double, std::int64_t>> cand_;
    std::int64_t passes_ = 0;
    std::size_t q_ = 0;

    double x(std::size_t i, std::size_t k) const {
        return static_cast<double>(P_.X[static_cast<std::ptrdiff_t>(i) * P_.sx0 + static_cast<std::ptrdiff_t>(k) * P_.sx1]);
    }

    void extra_norms() {
        const std::size_t n = P_.n, p = P_.p, ne = P_.n_extra;
        inv_norm_.assign(n + ne, 0.0);
        for (std::size_t r = 0; r < ne; ++r) {
            double s = 0.0;
            for (std::size_t j = 0; j < p; ++j) s += P_.E[r * p + j] * P_.E[r * p + j] / (2.0 * P_.h[j]);
            inv_norm_[n + r] = s > 0.0 ? 1.0 / std::sqrt(s) : 0.0;
        }
    }

    // One pass over X: the slack g_i . z - m_i of every validity row outside W; the `batch` most
    // violated (by slack over H^-1 norm) join W. Returns false when no row outside W is violated.
    bool refill(double feas_tol) {
        const std::size_t n = P_.n, f = P_.f, p = P_.p;
        double off = 0.0;
        for (std::size_t k = 0; k < f; ++k) {
            v_[k] = P_.scale[k] * z_[k];
            off -= P_.centre[k] * v_[k];
        }
        for (std::size_t j = f; j < p; ++j) off += P_.tail[j - f] * z_[j];
        double tail2 = 0.0;
        for (std::size_t j = f; j < p; ++j) tail2 += P_.tail[j - f] * P_.tail[j - f] / (2.0 * P_.h[j]);
        cand_.clear();
        for (std::size_t i = 0; i < n; ++i) {
            if (in_w_[i]) continue;
            double s = 0.0;
            if (P_.sx1 == 1) {
                s = dot_contiguous(P_.X + static_cast<std::ptrdiff_t>(i) * P_.sx0, v_.data(), f);
            } else {
                for (std::size_t k = 0; k < f; ++k) s += x(i, k) * v_[k];
            }
            s += off - P_.m[i];
            if (!(s < -feas_tol)) continue;
            double nrm = tail2;
            for (std::size_t k = 0; k < f; ++k) {
                const double a = P_.scale[k] * (x(i, k) - P_.centre[k]);
                nrm += a * a / (2.0 * P_.h[k]);
            }
            cand_.emplace_back(nrm > 0.0 ? s / std::sqrt(nrm) : s, static_cast<std::int64_t>(i));
        }
        if (cand_.empty()) return false;
        const std::size_t take = std::min(batch_, cand_.size());
        std::nth_element(cand_.begin(), cand_.begin() + static_cast<std::ptrdiff_t>(take - 1), cand_.end());
        for (std::size_t c = 0; c < take; ++c) {
            const std::size_t i = static_cast<std::size_t>(cand_[c].second);
            in_w_[i] = 1;
            wid_.push_back(static_cast<std::int64_t>(i));
            const std::size_t j = wn_.size();
            wn_.resize(j + p);
            normal(i, &wn_[j]);
            double nrm = 0.0;
            for (std::size_t k = 0; k < p; ++k) nrm += wn_[j + k] * wn_[j + k] / (2.0 * P_.h[k]);
            winv_.push_back(nrm > 0.0 ? 1.0 / std::sqrt(nrm) : 0.0);
        }
        return true;
    }

    double extra_slack(std::size_t r) const {
        double s = -P_.e[r];
        for (std::size_t j = 0; j < P_.p; ++j) s += P_.E[r * P_.p + j] * z_[j];
        return s;
    }

    double slack_of(std::size_t id) {
        const std::size_t n = P_.n, ne = P_.n_extra;
        if (id < n) {
            double s = -P_.m[id];
            for (std::size_t k = 0; k < P_.p; ++k) s += np_[k] * z_[k];
            return s;
        }
        if (id < n + ne) return extra_slack(id - n);
        const std::size_t j = (id - n - ne) / 2;
        return (id - n - ne) % 2 == 0 ? z_[j] - P_.lo[j] : P_.hi[j] - z_[j];
    }

    void normal(std::size_t id, double* out) const {
        const std::size_t n = P_.n, ne = P_.n_extra, f = P_.f, p = P_.p;
        if (id < n) {
            for (std::size_t k = 0; k < f; ++k) out[k] = P_.scale[k] * (x(id, k) - P_.centre[k]);
            for (std::size_t j = f; j < p; ++j) out[j] = P_.tail[j - f];
        } else if (id < n + ne) {
            for (std::size_t j = 0; j < p; ++j) out[j] = P_.E[(id - n) * p + j];
        } else {
            std::fill(out, out + p, 0.0);
            const std::size_t j = (id - n - ne) / 2;
            out[j] = (id - n - ne) % 2 == 0 ? 1.0 : -1.0;
        }
    }

    void compute_d() {
        const std::size_t p = P_.p;
        std::fill(d_.begin(), d_.end(), 0.0);
        for (std::size_t k = 0; k < p; ++k) {
            const double a = np_[k];
            if (a == 0.0) continue;
            const double* Jk = &J_[k * p];
            for (std::size_t j = 0; j < p; ++j) d_[j] += Jk[j] * a;
        }
    }

    // Rotate columns a, b of J: (Ja, Jb) <- (c Ja + s Jb, -s Ja + c Jb).
    void rotate_J(std::size_t a, std::size_t b, double c, double s) {
        const std::size_t p = P_.p;
        for (std::size_t k = 0; k < p; ++k) {
            const double ja = J_[k * p + a], jb = J_[k * p + b];
            J_[k * p + a] = c * ja + s * jb;
            J_[k * p + b] = -s * ja + c * jb;
        }
    }

    void add(std::size_t id) {
        const std::size_t p = P_.p;
        for (std::size_t j = p - 1; j > q_; --j) {
            const double a = d_[j - 1], b = d_[j];
            if (b == 0.0) continue;
            const double hyp = std::hypot(a, b);
            const double c = a / hyp, s = b / hyp;
            d_[j - 1] = hyp;
            d_[j] = 0.0;
            rotate_J(j - 1, j, c, s);
        }
        for (std::size_t i = 0; i <= q_; ++i) R_[i * p + q_] = d_[i];
        active_.push_back(static_cast<std::int64_t>(id));
        is_active_[id] = 1;
        ++q_;
    }

    // Remove the l-th active constraint; u_[q_] (the multiplier of the entering one) shifts down too.
    void drop(std::size_t l) {
        const std::size_t p = P_.p;
        is_active_[static_cast<std::size_t>(active_[l])] = 0;
        active_.erase(active_.begin() + static_cast<std::ptrdiff_t>(l));
        for (std::size_t j = l; j < q_; ++j) u_[j] = u_[j + 1];
        u_[q_] = 0.0;
        // delete column l of R (q x q upper triangular)
        for (std::size_t i = 0; i < q_; ++i) {
            for (std::size_t j = l; j + 1 < q_; ++j) R_[i * p + j] = R_[i * p + j + 1];
            R_[i * p + q_ - 1] = 0.0;
        }
        --q_;
        // restore the triangle: zero R[j+1][j] for j = l .. q-1
        for (std::size_t j = l; j < q_; ++j) {
            const double a = R_[j * p + j], b = R_[(j + 1) * p + j];
            if (b == 0.0) continue;
            const double hyp = std::hypot(a, b);
            const double c = a / hyp, s = b / hyp;
            for (std::size_t k = j; k < q_; ++k) {
                const double ra = R_[j * p + k], rb = R_[(j + 1) * p + k];
                R_[j * p + k] = c * ra + s * rb;
                R_[(j + 1) * p + k] = -s * ra + c * rb;
            }
            R_[(j + 1) * p + j] = 0.0;
            rotate_J(j, j + 1, c, s);
        }
        // the row q (old last) of R is now zero in the remaining columns
        for (std::size_t k = 0; k < p; ++k) R_[q_ * p + k] = 0.0;
    }
};

}  // namespace numtk::counterfactual
