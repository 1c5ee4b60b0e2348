// Bindings of native/include/numtk/games/best_response.hpp: a sequence-form game object whose
// methods run best responses (batched), NashConv and CFR+ without the GIL.
#include <cstdint>
#include <stdexcept>
#include <string>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "numtk/bindings.hpp"
#include "numtk/games/best_response.hpp"

namespace py = pybind11;
using numtk::games::Csr;
using numtk::games::index_t;
using numtk::games::SequenceFormGame;
using numtk::games::Treeplex;

namespace {

using numtk::bindings::darray;
using iarray = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>;

Csr make_csr(const iarray& indptr, const iarray& indices, const darray& data, std::size_t n_rows,
             std::size_t n_cols, const char* name) {
    if (indptr.ndim() != 1 || std::size_t(indptr.shape(0)) != n_rows + 1)
        throw std::invalid_argument(std::string("`") + name + "`: indptr must have length n_rows + 1");
    if (indices.ndim() != 1 || data.ndim() != 1 || indices.shape(0) != data.shape(0))
        throw std::invalid_argument(std::string("`") + name + "`: indices and data must be 1-D of equal length");
    Csr M;
    M.n_rows = n_rows;
    M.n_cols = n_cols;
    M.indptr.assign(indptr.data(), indptr.data() + indptr.shape(0));
    if (M.indptr.front() != 0 || M.indptr.back() != indices.shape(0))
        throw std::invalid_argument(std::string("`") + name + "`: indptr must run from 0 to nnz");
    for (std::size_t i = 0; i < n_rows; ++i)
        if (M.indptr[i + 1] < M.indptr[i])
            throw std::invalid_argument(std::string("`") + name + "`: indptr must be non-decreasing");
    M.indices.resize(std::size_t(indices.shape(0)));
    for (py::ssize_t e = 0; e < indices.shape(0); ++e) {
        const std::int64_t j = indices.data()[e];
        if (j < 0 || std::size_t(j) >= n_cols)
            throw std::out_of_range(std::string("`") + name + "`: column index out of range");
        M.indices[std::size_t(e)] = index_t(j);
    }
    M.data.assign(data.data(), data.data() + data.shape(0));
    return M;
}

Treeplex make_tree(const iarray& parent, const iarray& first, const iarray& n_actions,
                   std::size_t n_sequences, int player) {
    const std::string who = "player " + std::to_string(player) + " treeplex";
    const auto n = std::size_t(parent.shape(0));
    if (parent.ndim() != 1 || first.ndim() != 1 || n_actions.ndim() != 1 ||
        std::size_t(first.shape(0)) != n || std::size_t(n_actions.shape(0)) != n)
        throw std::invalid_argument(who + ": arrays must be 1-D of one length");
    Treeplex T;
    T.n_sequences = n_sequences;
    std::int64_t next = 1;
    for (std::size_t I = 0; I < n; ++I) {
        const std::int64_t ps = parent.data()[I], f = first.data()[I], na = n_actions.data()[I];
        if (na < 1 || f != next) throw std::invalid_argument(who + ": sequences must be contiguous per infoset");
        if (ps < 0 || ps >= f) throw std::invalid_argument(who + ": a parent sequence must precede its infoset");
        next = f + na;
        T.parent_sequence.push_back(index_t(ps));
        T.first_sequence.push_back(index_t(f));
        T.n_actions.push_back(index_t(na));
    }
    if (std::size_t(next) != n_sequences) throw std::invalid_argument(who + ": sequence count mismatch");
    return T;
}

void check_plans(const darray& plans, std::size_t n_sequences, const char* name) {
    if (plans.ndim() != 2 || std::size_t(plans.shape(0)) != n_sequences)
        throw std::invalid_argument(std::string("`") + name + "` must have shape (" +
                                    std::to_string(n_sequences) + ", K)");
}

}  // namespace

void bind_solvers(py::module_& m) {
    py::class_<SequenceFormGame>(m, "SequenceFormGame")
        .def(py::init([](iarray A_indptr, iarray A_indices, darray A_data, iarray AT_indptr, iarray AT_indices,
                         darray AT_data, iarray ps0, iarray fs0, iarray na0, iarray ps1, iarray fs1,
                         iarray na1, std::size_t s0, std::size_t s1) {
                 auto g = std::make_unique<SequenceFormGame>();
                 g->A = make_csr(A_indptr, A_indices, A_data, s0, s1, "payoff");
                 g->AT = make_csr(AT_indptr, AT_indices, AT_data, s1, s0, "payoff_T");
                 g->tree[0] = make_tree(ps0, fs0, na0, s0, 0);
                 g->tree[1] = make_tree(ps1, fs1, na1, s1, 1);
                 return g;
             }))
        .def(
            "best_response",
            [](const SequenceFormGame& g, int player, darray opponent_plans) {
                if (player != 0 && player != 1) throw std::invalid_argument("`player` must be 0 or 1");
                check_plans(opponent_plans, g.tree[1 - player].n_sequences, "opponent_plans");
                const auto K = std::size_t(opponent_plans.shape(1));
                const Treeplex& T = g.tree[player];
                py::array_t<double> values{py::ssize_t(K)};
                py::array_t<double> plan({py::ssize_t(T.n_sequences), py::ssize_t(K)});
                py::array_t<index_t> actions({py::ssize_t(T.n_infosets()), py::ssize_t(K)});
                {
                    py::gil_scoped_release release;
                    std::vector<double> scratch;
                    g.best_response(player, opponent_plans.data(), K, values.mutable_data(), plan.mutable_data(),
                                    actions.mutable_data(), scratch);
                }
                return py::make_tuple(values, plan, actions);
            },
            py::arg("player"), py::arg("opponent_plans"),
            "Best responses of `player` to K opponent plans (n_sequences x K): (values, plans, local actions).")
        .def(
            "best_response_from_utilities",
            [](const SequenceFormGame& g, int player, darray c) {
                if (player != 0 && player != 1) throw std::invalid_argument("`player` must be 0 or 1");
                const Treeplex& T = g.tree[player];
                check_plans(c, T.n_sequences, "c");
                const auto K = std::size_t(c.shape(1));
                py::array_t<double> values{py::ssize_t(K)};
                py::array_t<double> plan({py::ssize_t(T.n_sequences), py::ssize_t(K)});
                py::array_t<index_t> actions({py::ssize_t(T.n_infosets()), py::ssize_t(K)});
                {
                    py::gil_scoped_release release;
                    // The kernel overwrites its utilities: work on a copy, never on the caller's array.
                    std::vector<double> scratch(c.data(), c.data() + T.n_sequences * K);
                    numtk::games::best_response_from_utilities(T, scratch.data(), K, values.mutable_data(),
                                                               plan.mutable_data(), actions.mutable_data());
                }
                return py::make_tuple(values, plan, actions);
            },
            py::arg("player"), py::arg("c"),
            "Best responses of `player` given K columns of sequence utilities c (n_sequences x K), e.g. "
            "A r1 plus a bonus: (values, plans, local actions). `c` is not modified.")
        .def(
            "nash_conv",
            [](const SequenceFormGame& g, darray r0, darray r1) {
                if (r0.ndim() != 1 || std::size_t(r0.shape(0)) != g.tree[0].n_sequences)
                    throw std::invalid_argument("`r0` must be a 1-D plan of player 0");
                if (r1.ndim() != 1 || std::size_t(r1.shape(0)) != g.tree[1].n_sequences)
                    throw std::invalid_argument("`r1` must be a 1-D plan of player 1");
                py::gil_scoped_release release;
                std::vector<double> scratch;
                return g.nash_conv(r0.data(), r1.data(), scratch);
            },
            py::arg("r0"), py::arg("r1"))
        .def(
            "cfr_plus",
            [](const SequenceFormGame& g, std::size_t max_iter, double tol, std::size_t check_every,
               std::size_t delay) {
                numtk::games::CfrPlusResult res;
                {
                    py::gil_scoped_release release;
                    res = numtk::games::cfr_plus(g, max_iter, tol, check_every, delay);
                }
                py::array_t<double> r0(py::ssize_t(res.average[0].size()), res.average[0].data());
                py::array_t<double> r1(py::ssize_t(res.average[1].size()), res.average[1].data());
                py::array_t<double> gaps(py::ssize_t(res.gaps.size()), res.gaps.data());
                py::array_t<std::int64_t> checked(py::ssize_t(res.checked.size()));
                for (std::size_t i = 0; i < res.checked.size(); ++i)
                    checked.mutable_data()[i] = std::int64_t(res.checked[i]);
                return py::make_tuple(r0, r1, res.n_iter, res.gap, gaps, checked);
            },
            py::arg("max_iter"), py::arg("tol"), py::arg("check_every"), py::arg("delay"),
            "CFR+ with alternating updates and linear averaging: (r0, r1, n_iter, gap, gaps, checked).")
        .def_property_readonly("n_sequences", [](const SequenceFormGame& g) {
            return py::make_tuple(g.tree[0].n_sequences, g.tree[1].n_sequences);
        });
}
