// pybind11 bindings of the exact extensive-form games in native/include/numtk/games/efg_tree.hpp.
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "numtk/bindings.hpp"
#include "numtk/games/efg_tree.hpp"

namespace py = pybind11;
namespace ng = numtk::games;

namespace {

using numtk::bindings::to_numpy;  // moves the vector's buffer into the array (no copy)

// Calls f(game) with the game named `name` ("kuhn_poker", "leduc_poker" or "goofspiel").
template <class F>
auto with_game(const std::string& name, int n_cards, F&& f) {
    if (name == "kuhn_poker") return f(ng::KuhnPoker());
    if (name == "leduc_poker") return f(ng::LeducPoker());
    if (name == "goofspiel") {
        if (n_cards < 2 || n_cards > 5) throw std::invalid_argument("`n_cards` must lie in [2, 5]");
        return f(ng::Goofspiel(n_cards));
    }
    throw std::invalid_argument("unknown game '" + name + "'");
}

py::tuple csr_tuple(ng::Csr&& a) {
    const std::int32_t r = a.n_rows, c = a.n_cols;
    return py::make_tuple(to_numpy(std::move(a.data)), to_numpy(std::move(a.indices)), to_numpy(std::move(a.indptr)),
                          py::make_tuple(r, c));
}

py::dict player_dict(ng::PlayerSequences&& ps) {
    py::dict d;
    d["parent_sequence"] = to_numpy(std::move(ps.parent_sequence));
    d["first_sequence"] = to_numpy(std::move(ps.first_sequence));
    d["n_actions"] = to_numpy(std::move(ps.n_actions));
    d["keys"] = to_numpy(std::move(ps.keys));
    d["sequence_infoset"] = to_numpy(std::move(ps.sequence_infoset));
    d["sequence_action"] = to_numpy(std::move(ps.sequence_action));
    return d;
}

py::dict efg_build(const std::string& name, int n_cards) {
    ng::SequenceForm sf;
    {
        py::gil_scoped_release release;
        sf = with_game(name, n_cards, [](const auto& game) { return ng::build_sequence_form(game); });
    }
    py::dict out;
    out["players"] = py::make_tuple(player_dict(std::move(sf.player[0])), player_dict(std::move(sf.player[1])));
    out["payoff"] = csr_tuple(std::move(sf.payoff));
    out["payoff_T"] = csr_tuple(std::move(sf.payoff_T));
    out["infoset_reach"] = py::make_tuple(csr_tuple(std::move(sf.infoset_reach[0])),
                                          csr_tuple(std::move(sf.infoset_reach[1])));
    out["n_nodes"] = sf.n_nodes;
    out["n_terminals"] = sf.n_terminals;
    out["max_actions"] = sf.max_actions;
    return out;
}

py::list efg_key_strings(const std::string& name, int n_cards, int player,
                         py::array_t<std::uint64_t, py::array::c_style | py::array::forcecast> keys) {
    if (player != 0 && player != 1) throw std::invalid_argument("`player` must be 0 or 1");
    if (keys.ndim() != 1) throw std::invalid_argument("`keys` must be 1-D");
    const std::uint64_t* k = keys.data();
    const auto n = static_cast<std::size_t>(keys.shape(0));
    std::vector<std::string> strings;
    {
        py::gil_scoped_release release;
        strings.reserve(n);
        with_game(name, n_cards, [&](const auto& game) {
            for (std::size_t i = 0; i < n; ++i) strings.push_back(game.key_string(k[i], player));
            return 0;
        });
    }
    py::list out(n);
    for (std::size_t i = 0; i < n; ++i) {
        PyObject* s = PyUnicode_FromStringAndSize(strings[i].data(), static_cast<py::ssize_t>(strings[i].size()));
        if (!s) throw py::error_already_set();
        PyList_SET_ITEM(out.ptr(), static_cast<py::ssize_t>(i), s);
    }
    return out;
}

// r[:, first[I] + j] = r[:, parent[I]] * policy[:, row_offset + I, action[first[I] + j]] for all infosets
// in id order (parents precede children). policy: (k, N_I, A) C-contiguous; returns r as (n_seq, k).
py::array_t<double> efg_policy_to_sequence(
    py::array_t<double, py::array::c_style> policy, int row_offset,
    py::array_t<std::int32_t, py::array::c_style> parent_sequence,
    py::array_t<std::int32_t, py::array::c_style> first_sequence,
    py::array_t<std::int32_t, py::array::c_style> n_actions,
    py::array_t<std::int32_t, py::array::c_style> sequence_action) {
    if (policy.ndim() != 3) throw std::invalid_argument("`policy` must be 3-D (k, N_I, A)");
    const auto K = static_cast<std::size_t>(policy.shape(0));
    const auto NI = static_cast<std::int64_t>(policy.shape(1));
    const auto A = static_cast<std::int64_t>(policy.shape(2));
    const auto n = static_cast<std::int64_t>(parent_sequence.shape(0));
    const auto S = static_cast<std::int64_t>(sequence_action.shape(0));
    if (parent_sequence.ndim() != 1 || first_sequence.ndim() != 1 || n_actions.ndim() != 1 ||
        sequence_action.ndim() != 1 || first_sequence.shape(0) != n || n_actions.shape(0) != n)
        throw std::invalid_argument("per-infoset arrays must be 1-D of one length");
    if (row_offset < 0 || row_offset + n > NI) throw std::invalid_argument("`row_offset` out of range");
    const std::int32_t *ps = parent_sequence.data(), *fs = first_sequence.data(), *na = n_actions.data(),
                       *sa = sequence_action.data();
    // Bounds checks before the unchecked pass (cheap, O(n + S)).
    for (std::int64_t I = 0; I < n; ++I) {
        if (fs[I] < 1 || na[I] < 0 || std::int64_t(fs[I]) + na[I] > S || ps[I] < 0 || ps[I] >= fs[I])
            throw std::invalid_argument("inconsistent sequence-form arrays");
        for (std::int32_t j = 0; j < na[I]; ++j)
            if (sa[fs[I] + j] < 0 || sa[fs[I] + j] >= A) throw std::invalid_argument("action id out of range");
    }
    py::array_t<double> r({static_cast<py::ssize_t>(S), static_cast<py::ssize_t>(K)});
    double* out = r.mutable_data();
    const double* pol = policy.data();
    {
        py::gil_scoped_release release;
        std::fill(out, out + S * std::int64_t(K), 0.0);
        for (std::size_t q = 0; q < K; ++q) out[q] = 1.0;
        for (std::int64_t I = 0; I < n; ++I) {
            const double* parent = out + std::int64_t(ps[I]) * std::int64_t(K);
            for (std::int32_t j = 0; j < na[I]; ++j) {
                const std::int64_t s = fs[I] + j;
                double* dst = out + s * std::int64_t(K);
                const std::int64_t col = (row_offset + I) * A + sa[s];
                for (std::size_t q = 0; q < K; ++q) dst[q] = parent[q] * pol[std::int64_t(q) * NI * A + col];
            }
        }
    }
    return r;
}

// policy[q, row_offset + I, action(s)] = r[s, q] / sum_{s' of I} r[s', q] for every sequence s of infoset
// I, or 1 / n_actions[I] where that sum is <= tiny (unreached). r: (n_seq, k); policy: (k, N_I, A),
// written in place (the caller zeroes it).
void efg_sequence_to_policy(py::array_t<double, py::array::c_style> r, py::array_t<double, py::array::c_style> policy,
                            int row_offset, py::array_t<std::int32_t, py::array::c_style> first_sequence,
                            py::array_t<std::int32_t, py::array::c_style> n_actions,
                            py::array_t<std::int32_t, py::array::c_style> sequence_action, double tiny) {
    if (r.ndim() != 2 || policy.ndim() != 3) throw std::invalid_argument("`r` must be 2-D and `policy` 3-D");
    if (!policy.writeable()) throw std::invalid_argument("`policy` must be writeable");
    const auto S = static_cast<std::int64_t>(r.shape(0));
    const auto K = static_cast<std::int64_t>(r.shape(1));
    const auto NI = static_cast<std::int64_t>(policy.shape(1));
    const auto A = static_cast<std::int64_t>(policy.shape(2));
    const auto n = static_cast<std::int64_t>(first_sequence.shape(0));
    if (policy.shape(0) != K) throw std::invalid_argument("`r` and `policy` hold different numbers of members");
    if (first_sequence.ndim() != 1 || n_actions.ndim() != 1 || sequence_action.ndim() != 1 ||
        n_actions.shape(0) != n || sequence_action.shape(0) != S)
        throw std::invalid_argument("inconsistent sequence-form arrays");
    if (row_offset < 0 || row_offset + n > NI) throw std::invalid_argument("`row_offset` out of range");
    const std::int32_t *fs = first_sequence.data(), *na = n_actions.data(), *sa = sequence_action.data();
    for (std::int64_t I = 0; I < n; ++I) {
        if (fs[I] < 1 || na[I] < 1 || std::int64_t(fs[I]) + na[I] > S)
            throw std::invalid_argument("inconsistent sequence-form arrays");
        for (std::int32_t j = 0; j < na[I]; ++j)
            if (sa[fs[I] + j] < 0 || sa[fs[I] + j] >= A) throw std::invalid_argument("action id out of range");
    }
    const double* rr = r.data();
    double* out = policy.mutable_data();
    py::gil_scoped_release release;
    for (std::int64_t q = 0; q < K; ++q) {
        double* pol = out + q * NI * A;
        for (std::int64_t I = 0; I < n; ++I) {
            double sum = 0.0;
            for (std::int32_t j = 0; j < na[I]; ++j) sum += rr[(fs[I] + j) * K + q];
            double* row = pol + (row_offset + I) * A;
            if (sum > tiny) {
                for (std::int32_t j = 0; j < na[I]; ++j) row[sa[fs[I] + j]] = rr[(fs[I] + j) * K + q] / sum;
            } else {
                for (std::int32_t j = 0; j < na[I]; ++j) row[sa[fs[I] + j]] = 1.0 / double(na[I]);
            }
        }
    }
}

// Checks a stack of tabular policies (k, N_I, A) in place, row by row: entries finite and >= 0, zero on
// illegal actions (legal: (N_I, A) bool), row sums within tol of 1; rows off by more than 1e-13 are
// renormalised. Returns (code, member, row, value): code 0 = valid, 1 = non-finite entry, 2 = negative
// entry, 3 = mass on an illegal action, 4 = row sum off by more than tol (value = that sum).
py::tuple efg_check_policy(py::array_t<double, py::array::c_style> policy,
                           py::array_t<bool, py::array::c_style> legal, double tol) {
    if (policy.ndim() != 3 || legal.ndim() != 2 || policy.shape(1) != legal.shape(0) ||
        policy.shape(2) != legal.shape(1))
        throw std::invalid_argument("`policy` must be (k, N_I, A) and `legal` (N_I, A)");
    if (!policy.writeable()) throw std::invalid_argument("`policy` must be writeable");
    const auto K = static_cast<std::int64_t>(policy.shape(0));
    const auto NI = static_cast<std::int64_t>(policy.shape(1));
    const auto A = static_cast<std::int64_t>(policy.shape(2));
    double* pol = policy.mutable_data();
    const bool* ok = legal.data();
    int code = 0;
    std::int64_t member = -1, row = -1;
    double value = 0.0;
    {
        py::gil_scoped_release release;
        for (std::int64_t q = 0; q < K && code == 0; ++q) {
            for (std::int64_t i = 0; i < NI && code == 0; ++i) {
                double* x = pol + (q * NI + i) * A;
                const bool* l = ok + i * A;
                double sum = 0.0;
                for (std::int64_t a = 0; a < A; ++a) {
                    const double v = x[a];
                    if (!std::isfinite(v)) code = 1;
                    else if (v < 0.0) code = 2;
                    else if (v != 0.0 && !l[a]) code = 3;
                    if (code) {
                        value = v;
                        break;
                    }
                    sum += v;
                }
                if (code == 0 && !(std::fabs(sum - 1.0) <= tol)) {
                    code = 4;
                    value = sum;
                }
                if (code) {
                    member = q;
                    row = i;
                } else if (std::fabs(sum - 1.0) > 1e-13) {
                    for (std::int64_t a = 0; a < A; ++a) x[a] /= sum;
                }
            }
        }
    }
    return py::make_tuple(code, member, row, value);
}

}  // namespace

void bind_efg(py::module_& m) {
    m.def("efg_build", &efg_build, py::arg("name"), py::arg("n_cards") = 0,
          "Walk the game tree once and return its sequence form (per-player arrays, CSR A and A^T, and "
          "the per-player opponent-and-chance reach matrices W_p).");
    m.def("efg_key_strings", &efg_key_strings, py::arg("name"), py::arg("n_cards"), py::arg("player"),
          py::arg("keys"), "Infoset key strings of `player` from the compact uint64 keys.");
    m.def("efg_policy_to_sequence", &efg_policy_to_sequence, py::arg("policy"), py::arg("row_offset"),
          py::arg("parent_sequence"), py::arg("first_sequence"), py::arg("n_actions"), py::arg("sequence_action"),
          "Realization plans (n_sequences, k) of a stack of behavioural policies (k, N_I, A).");
    m.def("efg_check_policy", &efg_check_policy, py::arg("policy"), py::arg("legal"), py::arg("tol"),
          "Validate and renormalise a stack of tabular policies (k, N_I, A) in place; "
          "returns (code, member, row, value).");
    m.def("efg_sequence_to_policy", &efg_sequence_to_policy, py::arg("r"), py::arg("policy"), py::arg("row_offset"),
          py::arg("first_sequence"), py::arg("n_actions"), py::arg("sequence_action"), py::arg("tiny"),
          "Write the behavioural rows of plans r (n_sequences, k) into policy (k, N_I, A) in place.");
}
