// Exact two-player zero-sum extensive-form games and their sequence form (pure C++17, no Python).
//
// Three games with the rules of OpenSpiel's kuhn_poker, leduc_poker and goofspiel (num_cards=n,
// points_order=random, returns_type=win_loss, imp_info=False, turn-based: player 0 bids, then player 1
// bids without seeing that bid), written from the rules, and one generic builder, build_sequence_form(),
// that walks a game tree once, depth first with an explicit stack, and returns per player the
// infosets numbered in discovery order (a parent infoset precedes its children), their parent and
// first sequences, legal actions and compact keys, plus the payoff matrix
//     A[s0, s1] = sum over terminals z with seq_0(z) = s0, seq_1(z) = s1 of p_chance(z) * u_0(z)
// in CSR form (duplicates summed, explicit zeros kept) and its transpose, and per player p the
// opponent-and-chance reach matrix
//     W_p[I, s] = sum over histories h in infoset I of p whose opponent sequence is s of p_chance(h),
// so that w(I) = (W_p r_{1-p})[I] is the probability that chance and the opponent (playing plan
// r_{1-p}) bring the game into I, given that p plays to reach it.
//
// The tree is never stored: the walk keeps one root-to-node path. Infosets are identified by a 64-bit
// key: the player's own observation history packed as 4-bit tokens (all tokens are non-zero, so the
// packing is injective). Key strings are made on demand from those integers (key_string()); for Kuhn
// and Leduc they equal OpenSpiel's information_state_string, for Goofspiel they spell the player's
// action-observation history (perfect recall).
//
// A game type G provides:
//   using State = ...;                              a small copyable value
//   State initial() const;
//   int player(const State&) const;                 0, 1, kChance or kTerminal
//   int chance_outcomes(const State&, ChanceOutcome* out) const;   count, at most max_chance_outcomes()
//   int legal_actions(const State&, std::int32_t* out) const;      ascending ids, count <= max_actions()
//   void apply(State&, std::int32_t action) const;  an action id or a chance outcome id
//   double returns0(const State&) const;            player 0's payoff at a terminal
//   std::uint64_t infoset_key(const State&, int player) const;
//   std::string key_string(std::uint64_t key, int player) const;
//   int max_actions() const;  int max_chance_outcomes() const;
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace numtk {
namespace games {

constexpr int kChance = -1;
constexpr int kTerminal = -2;

struct ChanceOutcome {
    std::int32_t outcome;
    double prob;
};

// ---------------------------------------------------------------------------------------------------
// Keys: a history of non-zero 4-bit tokens packed into a uint64 (oldest token in the highest nibble).

inline std::uint64_t push_token(std::uint64_t key, unsigned token) noexcept {
    return (key << 4) | std::uint64_t(token & 0xFu);
}

// The tokens of a key, oldest first.
inline std::vector<int> key_tokens(std::uint64_t key) {
    std::vector<int> out;
    while (key != 0) {
        out.push_back(int(key & 0xFu));
        key >>= 4;
    }
    std::reverse(out.begin(), out.end());
    return out;
}

// ---------------------------------------------------------------------------------------------------
// Kuhn poker (2 players). Cards J, Q, K = 0, 1, 2; ante 1; actions 0 = pass, 1 = bet.
// Key tokens: own card + 1, then every action + 1. Key string: the card digit, then 'p'/'b' per action.

class KuhnPoker {
public:
    struct State {
        std::int8_t card[2] = {-1, -1};
        std::int8_t n_hist = 0;
        std::int8_t hist[3] = {0, 0, 0};
        std::uint64_t key[2] = {0, 0};
    };

    int max_actions() const noexcept { return 2; }
    int max_chance_outcomes() const noexcept { return 3; }
    State initial() const noexcept { return State{}; }

    static bool is_terminal(const State& s) noexcept {
        if (s.n_hist == 2) return !(s.hist[0] == 0 && s.hist[1] == 1);  // all but "pb" end the game
        return s.n_hist == 3;
    }

    int player(const State& s) const noexcept {
        if (s.card[0] < 0 || s.card[1] < 0) return kChance;
        if (is_terminal(s)) return kTerminal;
        return s.n_hist % 2;
    }

    int chance_outcomes(const State& s, ChanceOutcome* out) const noexcept {
        int n = 0;
        if (s.card[0] < 0) {
            for (int c = 0; c < 3; ++c) out[n++] = {c, 1.0 / 3.0};
        } else {
            for (int c = 0; c < 3; ++c)
                if (c != s.card[0]) out[n++] = {c, 0.5};
        }
        return n;
    }

    int legal_actions(const State&, std::int32_t* out) const noexcept {
        out[0] = 0;
        out[1] = 1;
        return 2;
    }

    void apply(State& s, std::int32_t a) const noexcept {
        if (s.card[0] < 0) {
            s.card[0] = std::int8_t(a);
            s.key[0] = push_token(s.key[0], unsigned(a + 1));
        } else if (s.card[1] < 0) {
            s.card[1] = std::int8_t(a);
            s.key[1] = push_token(s.key[1], unsigned(a + 1));
        } else {
            s.hist[s.n_hist++] = std::int8_t(a);
            s.key[0] = push_token(s.key[0], unsigned(a + 1));
            s.key[1] = push_token(s.key[1], unsigned(a + 1));
        }
    }

    double returns0(const State& s) const noexcept {
        const double show = s.card[0] > s.card[1] ? 1.0 : -1.0;
        if (s.n_hist == 2) {
            if (s.hist[0] == 0) return show;          // pass, pass
            if (s.hist[1] == 0) return 1.0;           // bet, fold
            return 2.0 * show;                        // bet, call
        }
        return s.hist[2] == 0 ? -1.0 : 2.0 * show;    // pass, bet, then fold or call
    }

    std::uint64_t infoset_key(const State& s, int p) const noexcept { return s.key[p]; }

    std::string key_string(std::uint64_t key, int /*player*/) const {
        const std::vector<int> t = key_tokens(key);
        if (t.empty()) throw std::invalid_argument("empty Kuhn poker key");
        std::string out(1, char('0' + t[0] - 1));
        for (std::size_t i = 1; i < t.size(); ++i) out += (t[i] == 1 ? 'p' : 'b');
        return out;
    }
};

// ---------------------------------------------------------------------------------------------------
// Leduc poker (2 players). Cards 0..5, rank = card / 2 (J, J, Q, Q, K, K); ante 1, stacks 100.
// Two betting rounds, raise 2 then 4, at most two raises per round, player 0 opens both rounds;
// a public card is dealt between them. Actions 0 = fold (only when facing a bet), 1 = call/check,
// 2 = raise. Showdown: a pair with the public card wins, else the higher rank, else a split pot.
// Key tokens: own card + 1 (1..6), every action + 1 (1..3), public card + 8 (8..13).

class LeducPoker {
public:
    struct State {
        std::int8_t card[2] = {-1, -1};
        std::int8_t pub = -1;
        std::int8_t round = 1;
        std::int8_t to_move = 0;
        std::int8_t n_raises = 0;
        std::int8_t n_round_actions = 0;
        std::int8_t folder = -1;     // the player who folded, or -1
        std::int8_t done = 0;        // 1 once the game is over
        std::int16_t contrib[2] = {1, 1};
        std::uint64_t key[2] = {0, 0};
    };

    static constexpr int kStack = 100;

    int max_actions() const noexcept { return 3; }
    int max_chance_outcomes() const noexcept { return 6; }
    State initial() const noexcept { return State{}; }

    int player(const State& s) const noexcept {
        if (s.done) return kTerminal;
        if (s.card[0] < 0 || s.card[1] < 0) return kChance;
        if (s.round == 2 && s.pub < 0) return kChance;
        return s.to_move;
    }

    int chance_outcomes(const State& s, ChanceOutcome* out) const noexcept {
        int n = 0;
        const int dealt = (s.card[0] >= 0) + (s.card[1] >= 0);
        const double p = 1.0 / double(6 - dealt);
        for (int c = 0; c < 6; ++c)
            if (c != s.card[0] && c != s.card[1]) out[n++] = {c, p};
        return n;
    }

    int legal_actions(const State& s, std::int32_t* out) const noexcept {
        int n = 0;
        if (s.contrib[0] != s.contrib[1]) out[n++] = 0;
        out[n++] = 1;
        if (s.n_raises < 2) out[n++] = 2;
        return n;
    }

    void apply(State& s, std::int32_t a) const noexcept {
        if (s.card[0] < 0) {
            s.card[0] = std::int8_t(a);
            s.key[0] = push_token(s.key[0], unsigned(a + 1));
            return;
        }
        if (s.card[1] < 0) {
            s.card[1] = std::int8_t(a);
            s.key[1] = push_token(s.key[1], unsigned(a + 1));
            return;
        }
        if (s.round == 2 && s.pub < 0) {
            s.pub = std::int8_t(a);
            s.key[0] = push_token(s.key[0], unsigned(a + 8));
            s.key[1] = push_token(s.key[1], unsigned(a + 8));
            return;
        }
        const int p = s.to_move;
        s.key[0] = push_token(s.key[0], unsigned(a + 1));
        s.key[1] = push_token(s.key[1], unsigned(a + 1));
        const std::int16_t top = std::max(s.contrib[0], s.contrib[1]);
        if (a == 0) {
            s.folder = std::int8_t(p);
            s.done = 1;
            return;
        }
        if (a == 2) {
            s.contrib[p] = std::int16_t(top + (s.round == 1 ? 2 : 4));
            ++s.n_raises;
        } else {
            s.contrib[p] = top;
        }
        const bool closes = (a == 1 && s.n_round_actions > 0);  // a call after the opening action
        ++s.n_round_actions;
        s.to_move = std::int8_t(1 - p);
        if (closes) {
            if (s.round == 2) {
                s.done = 1;
            } else {
                s.round = 2;
                s.to_move = 0;
                s.n_raises = 0;
                s.n_round_actions = 0;
            }
        }
    }

    double returns0(const State& s) const noexcept {
        if (s.folder == 0) return -double(s.contrib[0]);
        if (s.folder == 1) return double(s.contrib[1]);
        const int r0 = s.card[0] / 2, r1 = s.card[1] / 2, rp = s.pub / 2;
        int winner = -1;
        if (r0 == rp) winner = 0;
        else if (r1 == rp) winner = 1;
        else if (r0 > r1) winner = 0;
        else if (r1 > r0) winner = 1;
        if (winner == 0) return double(s.contrib[1]);
        if (winner == 1) return -double(s.contrib[0]);
        return 0.5 * double(s.contrib[0] + s.contrib[1]) - double(s.contrib[0]);
    }

    std::uint64_t infoset_key(const State& s, int p) const noexcept { return s.key[p]; }

    // OpenSpiel's information_state_string, rebuilt from the tokens by replaying the bets.
    std::string key_string(std::uint64_t key, int player) const {
        const std::vector<int> t = key_tokens(key);
        if (t.empty() || t[0] < 1 || t[0] > 6) throw std::invalid_argument("malformed Leduc poker key");
        int contrib[2] = {1, 1};
        int round = 1, mover = 0, n_actions = 0, pub = -1;
        std::string acts[2];
        for (std::size_t i = 1; i < t.size(); ++i) {
            if (t[i] >= 8) {
                pub = t[i] - 8;
                continue;
            }
            const int a = t[i] - 1;
            const int top = std::max(contrib[0], contrib[1]);
            if (a == 2) contrib[mover] = top + (round == 1 ? 2 : 4);
            else contrib[mover] = top;
            std::string& h = acts[round - 1];
            if (!h.empty()) h += ' ';
            h += std::to_string(a);
            const bool closes = (a == 1 && n_actions > 0);
            ++n_actions;
            mover = 1 - mover;
            if (closes && round == 1) {
                round = 2;
                mover = 0;
                n_actions = 0;
            }
        }
        std::string out = "[Observer: " + std::to_string(player) + "][Private: " + std::to_string(t[0] - 1) +
                          "][Round " + std::to_string(round) + "][Player: " + std::to_string(player) +
                          "][Pot: " + std::to_string(contrib[0] + contrib[1]) + "][Money: " +
                          std::to_string(kStack - contrib[0]) + " " + std::to_string(kStack - contrib[1]) + "]";
        if (pub >= 0) out += "[Public: " + std::to_string(pub) + "]";
        out += "[Round1: " + acts[0] + "][Round2: " + acts[1] + "]";
        return out;
    }
};

// ---------------------------------------------------------------------------------------------------
// Goofspiel(n), turn-based. Prize cards 1..n are revealed one per round in uniformly random order;
// each player bids one of its remaining cards 1..n (action id = card - 1), player 0 first, player 1
// without seeing that bid; the higher bid takes the prize's points, equal bids discard it. Bids are
// public after the round. The last round (one card each) plays itself, as in OpenSpiel. Returns:
// +1 / -1 / 0 for player 0 by the sign of the points difference (win_loss).
// Key tokens of player p: for each finished round, prize, own bid, opponent's bid; then the current
// prize (all as card values 1..n). Key string: "p<p>|<prize>:<own>v<opp>|...|<current prize>".

class Goofspiel {
public:
    struct State {
        std::uint8_t hand[2] = {0, 0};   // bit v-1 set while card v is in hand
        std::uint8_t prizes = 0;         // bit v-1 set while prize v is still face down
        std::int8_t prize = 0;           // the prize of the current round (1..n)
        std::int8_t phase = 0;           // 0 chance, 1 player 0 bids, 2 player 1 bids, 3 over
        std::int8_t bid0 = 0;            // player 0's pending bid (card value)
        std::int8_t round = 0;           // finished rounds
        std::int16_t points[2] = {0, 0};
        std::uint64_t key[2] = {0, 0};
    };

    explicit Goofspiel(int n_cards) : n_(n_cards) {
        if (n_cards < 2 || n_cards > 6) throw std::invalid_argument("Goofspiel needs 2 <= n_cards <= 6");
    }

    int n_cards() const noexcept { return n_; }
    int max_actions() const noexcept { return n_; }
    int max_chance_outcomes() const noexcept { return n_; }

    State initial() const noexcept {
        State s;
        const std::uint8_t all = std::uint8_t((1u << n_) - 1u);
        s.hand[0] = s.hand[1] = s.prizes = all;
        return s;
    }

    int player(const State& s) const noexcept {
        switch (s.phase) {
            case 0: return kChance;
            case 1: return 0;
            case 2: return 1;
            default: return kTerminal;
        }
    }

    int chance_outcomes(const State& s, ChanceOutcome* out) const noexcept {
        int n = 0;
        for (int v = 0; v < n_; ++v)
            if (s.prizes >> v & 1u) out[n++] = {v, 0.0};
        for (int i = 0; i < n; ++i) out[i].prob = 1.0 / double(n);
        return n;
    }

    int legal_actions(const State& s, std::int32_t* out) const noexcept {
        const std::uint8_t h = s.hand[s.phase == 1 ? 0 : 1];
        int n = 0;
        for (int v = 0; v < n_; ++v)
            if (h >> v & 1u) out[n++] = v;
        return n;
    }

    void apply(State& s, std::int32_t a) const noexcept {
        if (s.phase == 0) {
            s.prize = std::int8_t(a + 1);
            s.prizes = std::uint8_t(s.prizes & ~(1u << a));
            s.key[0] = push_token(s.key[0], unsigned(a + 1));
            s.key[1] = push_token(s.key[1], unsigned(a + 1));
            s.phase = 1;
            return;
        }
        if (s.phase == 1) {
            s.bid0 = std::int8_t(a + 1);
            s.phase = 2;
            return;
        }
        const int b0 = s.bid0, b1 = a + 1;
        play_round(s, b0, b1);
        s.key[0] = push_token(push_token(s.key[0], unsigned(b0)), unsigned(b1));
        s.key[1] = push_token(push_token(s.key[1], unsigned(b1)), unsigned(b0));
        if (s.round == n_ - 1) {  // the last round is forced: one prize, one card each
            s.prize = std::int8_t(lowest(s.prizes) + 1);
            s.prizes = 0;
            play_round(s, lowest(s.hand[0]) + 1, lowest(s.hand[1]) + 1);
            s.phase = 3;
        } else {
            s.phase = 0;
        }
    }

    double returns0(const State& s) const noexcept {
        return s.points[0] > s.points[1] ? 1.0 : (s.points[0] < s.points[1] ? -1.0 : 0.0);
    }

    std::uint64_t infoset_key(const State& s, int p) const noexcept { return s.key[p]; }

    std::string key_string(std::uint64_t key, int player) const {
        const std::vector<int> t = key_tokens(key);
        if (t.size() % 3 != 1) throw std::invalid_argument("malformed Goofspiel key");
        std::string out = "p" + std::to_string(player);
        for (std::size_t i = 0; i + 1 < t.size(); i += 3)
            out += "|" + std::to_string(t[i]) + ":" + std::to_string(t[i + 1]) + "v" + std::to_string(t[i + 2]);
        out += "|" + std::to_string(t.back());
        return out;
    }

private:
    int n_;

    static int lowest(unsigned bits) noexcept {
        int v = 0;
        while (!(bits >> v & 1u)) ++v;
        return v;
    }

    static void play_round(State& s, int b0, int b1) noexcept {
        s.hand[0] = std::uint8_t(s.hand[0] & ~(1u << (b0 - 1)));
        s.hand[1] = std::uint8_t(s.hand[1] & ~(1u << (b1 - 1)));
        if (b0 > b1) s.points[0] = std::int16_t(s.points[0] + s.prize);
        else if (b1 > b0) s.points[1] = std::int16_t(s.points[1] + s.prize);
        ++s.round;
    }
};

// ---------------------------------------------------------------------------------------------------
// Sparse matrix in CSR form: int32 ids, float64 values, columns sorted within each row.

struct Csr {
    std::int32_t n_rows = 0, n_cols = 0;
    std::vector<std::int32_t> indptr, indices;
    std::vector<double> data;
};

struct Triplet {
    std::int32_t row, col;
    double value;
};

// CSR of the triplets (consumed), duplicates summed, explicit zeros kept.
inline Csr csr_from_triplets(std::int32_t n_rows, std::int32_t n_cols, std::vector<Triplet>&& trip) {
    if (trip.size() > std::size_t(2147483647)) throw std::length_error("too many nonzeros for int32 ids");
    Csr out;
    out.n_rows = n_rows;
    out.n_cols = n_cols;
    std::vector<std::int32_t> start(std::size_t(n_rows) + 1, 0);
    for (const Triplet& t : trip) ++start[std::size_t(t.row) + 1];
    for (std::size_t r = 0; r < std::size_t(n_rows); ++r) start[r + 1] += start[r];
    std::vector<std::pair<std::int32_t, double>> bucket(trip.size());
    {
        std::vector<std::int32_t> fill(start.begin(), start.end() - 1);
        for (const Triplet& t : trip) bucket[std::size_t(fill[std::size_t(t.row)]++)] = {t.col, t.value};
    }
    std::vector<Triplet>().swap(trip);
    out.indptr.assign(std::size_t(n_rows) + 1, 0);
    out.indices.reserve(bucket.size());
    out.data.reserve(bucket.size());
    for (std::size_t r = 0; r < std::size_t(n_rows); ++r) {
        auto b = bucket.begin() + start[r], e = bucket.begin() + start[r + 1];
        std::sort(b, e, [](const auto& x, const auto& y) { return x.first < y.first; });
        for (auto it = b; it != e; ++it) {
            if (!out.indices.empty() && std::size_t(out.indptr[r]) < out.indices.size() &&
                out.indices.back() == it->first) {
                out.data.back() += it->second;
            } else {
                out.indices.push_back(it->first);
                out.data.push_back(it->second);
            }
        }
        out.indptr[r + 1] = std::int32_t(out.indices.size());
    }
    return out;
}

inline Csr csr_transpose(const Csr& a) {
    Csr t;
    t.n_rows = a.n_cols;
    t.n_cols = a.n_rows;
    const std::size_t nnz = a.indices.size();
    t.indptr.assign(std::size_t(a.n_cols) + 1, 0);
    for (std::int32_t c : a.indices) ++t.indptr[std::size_t(c) + 1];
    for (std::size_t c = 0; c < std::size_t(a.n_cols); ++c) t.indptr[c + 1] += t.indptr[c];
    t.indices.resize(nnz);
    t.data.resize(nnz);
    std::vector<std::int32_t> fill(t.indptr.begin(), t.indptr.end() - 1);
    for (std::size_t r = 0; r < std::size_t(a.n_rows); ++r)
        for (std::int32_t e = a.indptr[r]; e < a.indptr[r + 1]; ++e) {
            const std::size_t k = std::size_t(fill[std::size_t(a.indices[std::size_t(e)])]++);
            t.indices[k] = std::int32_t(r);
            t.data[k] = a.data[std::size_t(e)];
        }
    return t;
}

// ---------------------------------------------------------------------------------------------------
// Open-addressing map uint64 key -> int32 id (linear probing, load factor <= 1/2).

class KeyIndex {
public:
    KeyIndex() { resize(1024); }

    std::size_t size() const noexcept { return size_; }

    // The id stored under `key`, or -1 if absent; in that case `slot` is where it would go.
    std::int32_t find(std::uint64_t key, std::size_t& slot) const noexcept {
        std::size_t i = std::size_t(mix(key)) & mask_;
        while (vals_[i] >= 0) {
            if (keys_[i] == key) return vals_[i];
            i = (i + 1) & mask_;
        }
        slot = i;
        return -1;
    }

    void insert_at(std::size_t slot, std::uint64_t key, std::int32_t id) {
        keys_[slot] = key;
        vals_[slot] = id;
        if (++size_ * 2 > keys_.size()) resize(keys_.size() * 2);
    }

private:
    std::vector<std::uint64_t> keys_;
    std::vector<std::int32_t> vals_;
    std::size_t mask_ = 0, size_ = 0;

    static std::uint64_t mix(std::uint64_t x) noexcept {  // splitmix64 finaliser
        x ^= x >> 30;
        x *= 0xbf58476d1ce4e5b9ULL;
        x ^= x >> 27;
        x *= 0x94d049bb133111ebULL;
        return x ^ (x >> 31);
    }

    void resize(std::size_t cap) {
        std::vector<std::uint64_t> old_keys(cap);
        std::vector<std::int32_t> old_vals(cap, -1);
        old_keys.swap(keys_);
        old_vals.swap(vals_);
        mask_ = cap - 1;
        for (std::size_t j = 0; j < old_keys.size(); ++j) {
            if (old_vals[j] < 0) continue;
            std::size_t i = std::size_t(mix(old_keys[j])) & mask_;
            while (vals_[i] >= 0) i = (i + 1) & mask_;
            keys_[i] = old_keys[j];
            vals_[i] = old_vals[j];
        }
    }
};

// ---------------------------------------------------------------------------------------------------
// The sequence form of one game.

struct PlayerSequences {
    std::vector<std::int32_t> parent_sequence;   // per infoset
    std::vector<std::int32_t> first_sequence;    // per infoset
    std::vector<std::int32_t> n_actions;         // per infoset
    std::vector<std::uint64_t> keys;             // per infoset
    std::vector<std::int32_t> sequence_infoset;  // per sequence, -1 for the empty sequence
    std::vector<std::int32_t> sequence_action;   // per sequence, -1 for the empty sequence

    std::int32_t n_infosets() const noexcept { return std::int32_t(parent_sequence.size()); }
    std::int32_t n_sequences() const noexcept { return std::int32_t(sequence_action.size()); }
};

struct SequenceForm {
    PlayerSequences player[2];
    Csr payoff;    // A, n_sequences[0] x n_sequences[1]
    Csr payoff_T;  // A transposed
    // infoset_reach[p]: n_infosets[p] x n_sequences[1 - p]; entry (I, s) sums the chance probability
    // of the histories in p's infoset I at which the opponent's last sequence is s.
    Csr infoset_reach[2];
    std::int64_t n_nodes = 0, n_terminals = 0;
    int max_actions = 0;
};

// Walks the whole tree of `game` once (iterative depth-first search: chance outcomes and actions in
// the game's order) and returns its sequence form. Throws std::logic_error if the game is not perfect
// recall (one key reached with two different own histories or action counts) or breaks its contract.
template <class Game>
SequenceForm build_sequence_form(const Game& game) {
    using State = typename Game::State;
    constexpr std::int64_t kMaxId = 2147483647;

    struct Frame {
        State state;
        double prob;
        std::int32_t seq[2];
        int player;                  // 0, 1 or kChance
        std::int32_t first_seq;      // decision: the infoset's first sequence
        std::uint32_t child_begin;   // chance: offset in `outcomes`
        std::int32_t n_children, next;
    };

    SequenceForm sf;
    sf.max_actions = game.max_actions();
    KeyIndex index[2];
    for (PlayerSequences& ps : sf.player) {
        ps.sequence_infoset.push_back(-1);
        ps.sequence_action.push_back(-1);
    }
    std::vector<Triplet> terminals;
    std::vector<Triplet> reach[2];  // (infoset of p, opponent sequence, chance probability) per history
    std::vector<Frame> stack;
    std::vector<ChanceOutcome> outcomes;
    std::vector<ChanceOutcome> chance_buf(std::size_t(std::max(1, game.max_chance_outcomes())));
    std::vector<std::int32_t> action_buf(std::size_t(std::max(1, game.max_actions())));

    // Enters one node: records a terminal, or pushes a frame for a chance or decision node.
    auto enter = [&](const State& s, double prob, std::int32_t seq0, std::int32_t seq1) {
        ++sf.n_nodes;
        const int p = game.player(s);
        if (p == kTerminal) {
            ++sf.n_terminals;
            terminals.push_back({seq0, seq1, prob * game.returns0(s)});
            return;
        }
        Frame f{s, prob, {seq0, seq1}, p, 0, 0, 0, 0};
        if (p == kChance) {
            const int n = game.chance_outcomes(s, chance_buf.data());
            if (n < 1 || n > game.max_chance_outcomes()) throw std::logic_error("chance node without outcomes");
            f.child_begin = std::uint32_t(outcomes.size());
            f.n_children = n;
            outcomes.insert(outcomes.end(), chance_buf.begin(), chance_buf.begin() + n);
        } else if (p == 0 || p == 1) {
            PlayerSequences& ps = sf.player[p];
            const std::uint64_t key = game.infoset_key(s, p);
            std::size_t slot = 0;
            std::int32_t id = index[p].find(key, slot);
            if (id < 0) {
                const int n = game.legal_actions(s, action_buf.data());
                if (n < 1 || n > game.max_actions()) throw std::logic_error("decision node with a bad action count");
                for (int k = 0; k < n; ++k)
                    if (action_buf[std::size_t(k)] < 0 || action_buf[std::size_t(k)] >= game.max_actions() ||
                        (k > 0 && action_buf[std::size_t(k)] <= action_buf[std::size_t(k) - 1]))
                        throw std::logic_error("legal actions must be ascending ids in [0, max_actions)");
                if (std::int64_t(ps.sequence_action.size()) + n > kMaxId)
                    throw std::length_error("too many sequences for int32 ids");
                id = ps.n_infosets();
                index[p].insert_at(slot, key, id);
                ps.parent_sequence.push_back(f.seq[p]);
                ps.first_sequence.push_back(ps.n_sequences());
                ps.n_actions.push_back(n);
                ps.keys.push_back(key);
                for (int k = 0; k < n; ++k) {
                    ps.sequence_infoset.push_back(id);
                    ps.sequence_action.push_back(action_buf[std::size_t(k)]);
                }
            } else if (ps.parent_sequence[std::size_t(id)] != f.seq[p]) {
                throw std::logic_error("an infoset is reached with two different own histories "
                                       "(the game is not perfect recall)");
            }
            reach[p].push_back({id, f.seq[1 - p], prob});
            f.first_seq = ps.first_sequence[std::size_t(id)];
            f.n_children = ps.n_actions[std::size_t(id)];
        } else {
            throw std::logic_error("player() returned an unknown value");
        }
        stack.push_back(f);
    };

    enter(game.initial(), 1.0, 0, 0);
    while (!stack.empty()) {
        Frame& top = stack.back();
        if (top.next == top.n_children) {
            if (top.player == kChance) outcomes.resize(top.child_begin);
            stack.pop_back();
            continue;
        }
        const std::int32_t k = top.next++;
        State child = top.state;
        double prob = top.prob;
        std::int32_t seq[2] = {top.seq[0], top.seq[1]};
        if (top.player == kChance) {
            const ChanceOutcome o = outcomes[top.child_begin + std::uint32_t(k)];
            game.apply(child, o.outcome);
            prob *= o.prob;
        } else {
            const std::int32_t s = top.first_seq + k;
            game.apply(child, sf.player[top.player].sequence_action[std::size_t(s)]);
            seq[top.player] = s;
        }
        enter(child, prob, seq[0], seq[1]);  // may reallocate `stack`: `top` is not used after this
    }

    sf.payoff = csr_from_triplets(sf.player[0].n_sequences(), sf.player[1].n_sequences(), std::move(terminals));
    sf.payoff_T = csr_transpose(sf.payoff);
    for (int p = 0; p < 2; ++p)
        sf.infoset_reach[p] = csr_from_triplets(sf.player[p].n_infosets(), sf.player[1 - p].n_sequences(),
                                                std::move(reach[p]));
    return sf;
}

}  // namespace games
}  // namespace numtk
