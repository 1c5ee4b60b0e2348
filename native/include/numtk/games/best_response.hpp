// Sequence-form best responses, counterfactual values and CFR+ for two-player zero-sum games.
//
// A game is given by its sequence-form payoff matrix A (rows: player 0's sequences, columns: player
// 1's; A[s0, s1] = sum over terminals of chance probability * payoff of player 0), held in CSR
// together with A^T, and by one treeplex per player:
//   parent_sequence[I]  the player's last sequence before infoset I (0 = the empty sequence),
//   first_sequence[I]   infoset I's sequences are first_sequence[I] .. + n_actions[I] - 1,
// with infosets numbered so that a parent precedes its children (DFS discovery order). Reverse id
// order is then a valid bottom-up order and id order a valid top-down order.
//
// Plans are row-major (n_sequences x K): K plans side by side, so one pass over A serves all K.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

namespace numtk::games {

using index_t = std::int32_t;

struct Csr {
    std::size_t n_rows = 0, n_cols = 0;
    std::vector<std::int64_t> indptr;
    std::vector<index_t> indices;
    std::vector<double> data;
};

struct Treeplex {
    std::size_t n_sequences = 0;
    std::vector<index_t> parent_sequence, first_sequence, n_actions;
    std::size_t n_infosets() const { return parent_sequence.size(); }
};

// out (rows x K) = sign * M (rows x cols) * P (cols x K), all row-major.
inline void spmm(const Csr& M, double sign, const double* P, std::size_t K, double* out) {
    for (std::size_t i = 0; i < M.n_rows; ++i) {
        double* o = out + i * K;
        std::fill(o, o + K, 0.0);
        for (std::int64_t e = M.indptr[i]; e < M.indptr[i + 1]; ++e) {
            const double v = sign * M.data[std::size_t(e)];
            const double* p = P + std::size_t(M.indices[std::size_t(e)]) * K;
            for (std::size_t k = 0; k < K; ++k) o[k] += v * p[k];
        }
    }
}

// Best response of one player given the utility of each of its sequences, c (n_sequences x K).
// Writes the values (K), the pure BR plans (n_sequences x K) and the chosen local action index per
// infoset (n_infosets x K). `c` is overwritten (it becomes the counterfactual value of sequences,
// children included). Ties go to the lowest action within 1e-12 * (1 + |max|).
inline void best_response_from_utilities(const Treeplex& T, double* c, std::size_t K, double* values,
                                         double* plan, index_t* actions) {
    const std::size_t nI = T.n_infosets();
    for (std::size_t I = nI; I-- > 0;) {
        const std::size_t f = std::size_t(T.first_sequence[I]);
        const std::size_t na = std::size_t(T.n_actions[I]);
        double* parent = c + std::size_t(T.parent_sequence[I]) * K;
        for (std::size_t k = 0; k < K; ++k) {
            double best = c[f * K + k];
            for (std::size_t a = 1; a < na; ++a) best = std::max(best, c[(f + a) * K + k]);
            const double tol = 1e-12 * (1.0 + std::fabs(best));
            std::size_t arg = 0;
            while (c[(f + arg) * K + k] < best - tol) ++arg;
            actions[I * K + k] = index_t(arg);
            parent[k] += best;
        }
    }
    for (std::size_t k = 0; k < K; ++k) values[k] = c[k];
    std::fill(plan, plan + T.n_sequences * K, 0.0);
    for (std::size_t k = 0; k < K; ++k) plan[k] = 1.0;
    for (std::size_t I = 0; I < nI; ++I) {
        const std::size_t f = std::size_t(T.first_sequence[I]);
        const double* rp = plan + std::size_t(T.parent_sequence[I]) * K;
        for (std::size_t k = 0; k < K; ++k)
            if (rp[k] != 0.0) plan[(f + std::size_t(actions[I * K + k])) * K + k] = rp[k];
    }
}

struct SequenceFormGame {
    Csr A, AT;         // A: Σ0 x Σ1 payoffs of player 0; AT its transpose
    Treeplex tree[2];

    const Csr& utility_matrix(int player) const { return player == 0 ? A : AT; }
    double utility_sign(int player) const { return player == 0 ? 1.0 : -1.0; }

    // Best responses of `player` to K opponent plans (n_sequences[1 - player] x K).
    void best_response(int player, const double* opponent_plans, std::size_t K, double* values,
                       double* plan, index_t* actions, std::vector<double>& scratch) const {
        const Treeplex& T = tree[player];
        scratch.resize(T.n_sequences * K);
        spmm(utility_matrix(player), utility_sign(player), opponent_plans, K, scratch.data());
        best_response_from_utilities(T, scratch.data(), K, values, plan, actions);
    }

    // BR value of `player` against one opponent plan.
    double best_response_value(int player, const double* opponent_plan, std::vector<double>& scratch,
                               std::vector<double>& plan, std::vector<index_t>& actions) const {
        plan.resize(tree[player].n_sequences);
        actions.resize(tree[player].n_infosets());
        double v = 0.0;
        best_response(player, opponent_plan, 1, &v, plan.data(), actions.data(), scratch);
        return v;
    }

    // NashConv of the plan pair = BR_0(r1) + BR_1(r0) (zero-sum).
    double nash_conv(const double* r0, const double* r1, std::vector<double>& scratch) const {
        std::vector<double> plan;
        std::vector<index_t> actions;
        return best_response_value(0, r1, scratch, plan, actions) +
               best_response_value(1, r0, scratch, plan, actions);
    }
};

struct CfrPlusResult {
    std::vector<double> average[2];
    std::size_t n_iter = 0;
    double gap = std::numeric_limits<double>::infinity();
    std::vector<double> gaps;           // NashConv of the averages at each check
    std::vector<std::size_t> checked;   // the iteration of each check
};

// CFR+ (Tammelin et al. 2015) in sequence form: alternating updates, regret matching+, average plans
// weighted by max(t - delay, 0). Stops at `max_iter` or when the averages' NashConv <= tol (checked
// every `check_every` iterations and at the end).
inline CfrPlusResult cfr_plus(const SequenceFormGame& g, std::size_t max_iter, double tol,
                              std::size_t check_every, std::size_t delay) {
    CfrPlusResult out;
    std::vector<double> regret[2], policy[2], plan[2], cfv;
    for (int p = 0; p < 2; ++p) {
        const Treeplex& T = g.tree[p];
        regret[p].assign(T.n_sequences, 0.0);
        policy[p].assign(T.n_sequences, 0.0);
        plan[p].assign(T.n_sequences, 0.0);
        out.average[p].assign(T.n_sequences, 0.0);
        for (std::size_t I = 0; I < T.n_infosets(); ++I) {
            const std::size_t f = std::size_t(T.first_sequence[I]), na = std::size_t(T.n_actions[I]);
            for (std::size_t a = 0; a < na; ++a) policy[p][f + a] = 1.0 / double(na);
        }
    }
    auto plan_from_policy = [&](int p) {
        const Treeplex& T = g.tree[p];
        plan[p][0] = 1.0;
        for (std::size_t I = 0; I < T.n_infosets(); ++I) {
            const std::size_t f = std::size_t(T.first_sequence[I]), na = std::size_t(T.n_actions[I]);
            const double rp = plan[p][std::size_t(T.parent_sequence[I])];
            for (std::size_t a = 0; a < na; ++a) plan[p][f + a] = rp * policy[p][f + a];
        }
    };
    plan_from_policy(0);
    plan_from_policy(1);
    std::vector<double> scratch, avg_norm[2];
    double weight_sum = 0.0;
    auto check = [&](std::size_t t) {
        for (int p = 0; p < 2; ++p) {
            avg_norm[p] = out.average[p];
            if (weight_sum > 0)
                for (double& v : avg_norm[p]) v /= weight_sum;
            else
                avg_norm[p] = plan[p];
        }
        out.gap = g.nash_conv(avg_norm[0].data(), avg_norm[1].data(), scratch);
        out.gaps.push_back(out.gap);
        out.checked.push_back(t);
    };
    std::size_t t = 0;
    while (t < max_iter) {
        ++t;
        for (int p = 0; p < 2; ++p) {
            const Treeplex& T = g.tree[p];
            cfv.resize(T.n_sequences);
            spmm(g.utility_matrix(p), g.utility_sign(p), plan[1 - p].data(), 1, cfv.data());
            for (std::size_t I = T.n_infosets(); I-- > 0;) {
                const std::size_t f = std::size_t(T.first_sequence[I]), na = std::size_t(T.n_actions[I]);
                double v = 0.0;
                for (std::size_t a = 0; a < na; ++a) v += policy[p][f + a] * cfv[f + a];
                double total = 0.0;
                for (std::size_t a = 0; a < na; ++a) {
                    double& q = regret[p][f + a];
                    q = std::max(q + cfv[f + a] - v, 0.0);
                    total += q;
                }
                for (std::size_t a = 0; a < na; ++a)
                    policy[p][f + a] = total > 0.0 ? regret[p][f + a] / total : 1.0 / double(na);
                cfv[std::size_t(T.parent_sequence[I])] += v;
            }
            plan_from_policy(p);
            const double w = t > delay ? double(t - delay) : 0.0;
            if (w > 0)
                for (std::size_t s = 0; s < T.n_sequences; ++s) out.average[p][s] += w * plan[p][s];
        }
        weight_sum += t > delay ? double(t - delay) : 0.0;
        if (check_every > 0 && t % check_every == 0) {
            check(t);
            if (out.gap <= tol) break;
        }
    }
    if (out.checked.empty() || out.checked.back() != t) check(t);
    out.n_iter = t;
    out.average[0] = avg_norm[0];
    out.average[1] = avg_norm[1];
    return out;
}

}  // namespace numtk::games
