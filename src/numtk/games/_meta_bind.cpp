// Bindings of the meta-solver kernels: dense RM+/PRM+ (native/include/numtk/games/regret_matching.hpp)
// and projected replicator dynamics (native/include/numtk/games/replicator.hpp). The Python layer
// (numtk/games/_meta_solvers.py, _nash_equilibrium.py) validates first; these re-check what could
// corrupt memory or hang (shapes, lengths, probability vectors, counts) and release the GIL.
#include <cmath>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "numtk/bindings.hpp"
#include "numtk/games/regret_matching.hpp"
#include "numtk/games/replicator.hpp"

namespace py = pybind11;

namespace {

using numtk::bindings::check_len;
using numtk::bindings::darray;
using numtk::bindings::to_numpy;

// A 2-D, non-empty payoff matrix; returns (rows, cols).
std::pair<std::size_t, std::size_t> check_matrix(const darray& A, const char* name) {
    if (A.ndim() != 2) throw std::invalid_argument(std::string("`") + name + "` must be 2-D");
    if (A.shape(0) < 1 || A.shape(1) < 1) throw std::invalid_argument(std::string("`") + name + "` must not be empty");
    if (std::uint64_t(A.shape(0)) > 0xffffffffULL || std::uint64_t(A.shape(1)) > 0xffffffffULL)
        throw std::invalid_argument(std::string("`") + name + "` may have at most 2**32 - 1 rows and columns");
    return {std::size_t(A.shape(0)), std::size_t(A.shape(1))};
}

// A probability vector of length len (entries >= -1e-9 and summing to 1 within 1e-6).
void check_simplex(const darray& v, std::size_t len, const char* name) {
    check_len(v, len, name);
    double total = 0.0;
    for (std::size_t i = 0; i < len; ++i) {
        const double e = v.data()[i];
        if (!std::isfinite(e) || e < -1e-9)
            throw std::invalid_argument(std::string("`") + name + "` must hold finite, non-negative probabilities");
        total += e;
    }
    if (std::abs(total - 1.0) > 1e-6)
        throw std::invalid_argument(std::string("`") + name + "` must sum to 1");
}

py::tuple rm_plus(darray A, std::int64_t max_iter, double tol, std::int64_t check_every, bool predictive,
                  std::optional<darray> x0, std::optional<darray> y0, std::int64_t transpose_limit,
                  int float_storage) {
    const auto [m, n] = check_matrix(A, "A");
    if (max_iter < 0) throw std::invalid_argument("`max_iter` must be >= 0");
    if (check_every < 1) throw std::invalid_argument("`check_every` must be >= 1");
    if (x0) check_simplex(*x0, m, "x0");
    if (y0) check_simplex(*y0, n, "y0");
    numtk::games::RMPlusOptions opt;
    opt.max_iter = max_iter;
    opt.tol = tol;
    opt.check_every = check_every;
    opt.predictive = predictive;
    if (transpose_limit >= 0) opt.transpose_limit = std::size_t(transpose_limit);
    const double* pa = A.data();
    if (float_storage < 0) {
        // auto: iterate on float32 when tol leaves 8x room over the rounding of A to float, which moves any
        // gap by at most 2 * 2^-24 * max|A|; the averages' gap is certified on A in double either way.
        double amax = 0.0;
        for (std::size_t e = 0; e < m * n; ++e) amax = std::max(amax, std::abs(pa[e]));
        opt.float_storage = tol >= 8.0 * 2.0 * std::ldexp(1.0, -24) * amax && m * n >= 4096;
    } else {
        opt.float_storage = float_storage != 0;
    }
    const double* px = x0 ? x0->data() : nullptr;
    const double* py_ = y0 ? y0->data() : nullptr;
    numtk::games::RMPlusResult<double> res;
    {
        py::gil_scoped_release release;
        res = numtk::games::rm_plus<double>(pa, m, n, px, py_, opt);
    }
    return py::make_tuple(to_numpy(res.x_avg), to_numpy(res.y_avg), res.n_iter, res.gap, to_numpy(res.history));
}

py::tuple projected_replicator_dynamics(darray A0, darray A1, darray x0, darray x1, std::int64_t n_iter, double dt,
                                        double gamma) {
    const auto [m, n] = check_matrix(A0, "A0");
    if (A1.ndim() != 2 || std::size_t(A1.shape(0)) != m || std::size_t(A1.shape(1)) != n)
        throw std::invalid_argument("`A1` must have the shape of `A0` (both laid out [row action, column action])");
    check_simplex(x0, m, "x0");
    check_simplex(x1, n, "x1");
    if (n_iter < 0) throw std::invalid_argument("`n_iter` must be >= 0");
    if (!std::isfinite(dt) || dt <= 0.0) throw std::invalid_argument("`dt` must be a positive finite number");
    if (!std::isfinite(gamma) || gamma < 0.0 || gamma * double(std::max(m, n)) >= 1.0)
        throw std::invalid_argument("`gamma` must satisfy 0 <= gamma < 1 / (number of strategies)");
    py::array_t<double> last0{py::ssize_t(m)}, last1{py::ssize_t(n)}, avg0{py::ssize_t(m)}, avg1{py::ssize_t(n)};
    std::copy(x0.data(), x0.data() + m, last0.mutable_data());
    std::copy(x1.data(), x1.data() + n, last1.mutable_data());
    const double *p0 = A0.data(), *p1 = A1.data();
    double *l0 = last0.mutable_data(), *l1 = last1.mutable_data(), *a0 = avg0.mutable_data(),
           *a1 = avg1.mutable_data();
    {
        py::gil_scoped_release release;
        numtk::games::projected_replicator_dynamics<double>(p0, p1, m, n, l0, l1, std::size_t(n_iter), dt, gamma,
                                                            a0, a1);
    }
    return py::make_tuple(avg0, avg1, last0, last1);
}

}  // namespace

void bind_meta(py::module_& m) {
    m.def("rm_plus", &rm_plus, py::arg("A"), py::kw_only(), py::arg("max_iter") = 100000, py::arg("tol") = 1e-6,
          py::arg("check_every") = 10, py::arg("predictive") = false, py::arg("x0") = py::none(),
          py::arg("y0") = py::none(), py::arg("transpose_limit") = -1, py::arg("float_storage") = -1,
          "RM+ (PRM+ if `predictive`) on the zero-sum game with row payoffs `A`, alternating updates and\n"
          "linear averaging. Returns (x_avg, y_avg, n_iter, gap, gaps): `gap` = max(A y_avg) - min(x_avg' A),\n"
          "the exact NashConv of the averages; `gaps` holds the gap at every `check_every`-th iteration.\n"
          "A transposed copy of `A` is kept when m * n <= `transpose_limit` (-1: the kernel's default, 2**27).\n"
          "`float_storage` (-1 auto, 0, 1): iterate on a float32 copy of `A` (auto: when tol >= 9.5e-7 max|A|,\n"
          "8x the effect of rounding A to float on a gap); the returned gap is always computed on `A` in double.");
    m.def("projected_replicator_dynamics", &projected_replicator_dynamics, py::arg("A0"), py::arg("A1"),
          py::arg("x0"), py::arg("x1"), py::arg("n_iter"), py::arg("dt"), py::arg("gamma"),
          "Projected replicator dynamics with payoff tables A0, A1 both laid out [row action, column action]\n"
          "(a zero-sum game passes (G, -G)). Returns (avg0, avg1, last0, last1): the averages of the\n"
          "iterates and the last iterates.");
}
