// pybind11 bindings of the counterfactual kernels in native/include/numtk/counterfactual/.
// Shapes and finiteness are validated in Python first; these checks are the last line of defence.
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "numtk/bindings.hpp"
#include "numtk/counterfactual/diag_qp.hpp"
#include "numtk/counterfactual/group_stats.hpp"
#include "numtk/counterfactual/knapsack.hpp"

namespace py = pybind11;
namespace cf = numtk::counterfactual;

namespace {

using numtk::bindings::darray;
using numtk::bindings::dispatch_float;
using numtk::bindings::element_stride;
using numtk::bindings::need;
using numtk::bindings::strides_are_multiples;
using numtk::bindings::to_numpy;

// Rows of lo/hi are per problem; w is shared. Returns (c, mu, status) with status 0 optimal,
// 1 trivial (clip(0, lo, hi) already valid), 2 infeasible.
py::tuple quadratic_knapsack(darray w, darray M, darray lo, darray hi) {
    need(w.ndim() == 1, "`w` must be 1-D");
    need(M.ndim() == 1, "`M` must be 1-D");
    need(lo.ndim() == 2 && hi.ndim() == 2, "`lo` and `hi` must be 2-D");
    const auto d = static_cast<std::size_t>(w.shape(0));
    const auto n = static_cast<std::size_t>(M.shape(0));
    need(static_cast<std::size_t>(lo.shape(0)) == n && static_cast<std::size_t>(lo.shape(1)) == d &&
             static_cast<std::size_t>(hi.shape(0)) == n && static_cast<std::size_t>(hi.shape(1)) == d,
         "`lo` and `hi` must have shape (len(M), len(w))");
    py::array_t<double> c({static_cast<py::ssize_t>(n), static_cast<py::ssize_t>(d)});
    py::array_t<double> mu(static_cast<py::ssize_t>(n));
    py::array_t<std::int8_t> status(static_cast<py::ssize_t>(n));
    const double *pw = w.data(), *pM = M.data(), *pl = lo.data(), *ph = hi.data();
    double *pc = c.mutable_data(), *pmu = mu.mutable_data();
    std::int8_t* ps = status.mutable_data();
    {
        py::gil_scoped_release release;
        cf::KnapsackWork work;
        for (std::size_t i = 0; i < n; ++i) {
            ps[i] = static_cast<std::int8_t>(
                cf::quadratic_knapsack(d, pw, pM[i], pl + i * d, ph + i * d, pc + i * d, pmu + i, work));
        }
    }
    return py::make_tuple(c, mu, status);
}

template <class T>
py::tuple diag_qp_impl(py::array X, darray scale, darray centre, darray tail, darray m, darray E, darray e,
                       darray h, darray lo, darray hi, double feas_tol, std::int64_t max_iter, std::int64_t batch) {
    need(X.ndim() == 2, "`X` must be 2-D");
    const auto n = static_cast<std::size_t>(X.shape(0));
    const auto f = static_cast<std::size_t>(X.shape(1));
    need(scale.ndim() == 1 && static_cast<std::size_t>(scale.shape(0)) == f, "`scale` must have length X.shape[1]");
    need(centre.ndim() == 1 && static_cast<std::size_t>(centre.shape(0)) == f, "`centre` must have length X.shape[1]");
    need(tail.ndim() == 1, "`tail` must be 1-D");
    const std::size_t p = f + static_cast<std::size_t>(tail.shape(0));
    need(p > 0, "the problem has no variables");
    need(m.ndim() == 1 && static_cast<std::size_t>(m.shape(0)) == n, "`m` must have length X.shape[0]");
    need(E.ndim() == 2 && (E.shape(0) == 0 || static_cast<std::size_t>(E.shape(1)) == p),
         "`E` must have shape (n_extra, p)");
    need(e.ndim() == 1 && e.shape(0) == E.shape(0), "`e` must have length E.shape[0]");
    for (auto* a : {&h, &lo, &hi}) need(a->ndim() == 1 && static_cast<std::size_t>(a->shape(0)) == p,
                                        "`h`, `lo` and `hi` must have length p");
    const double* ph = h.data();
    for (std::size_t j = 0; j < p; ++j) need(ph[j] > 0.0 && std::isfinite(ph[j]), "`h` must be positive and finite");
    need(max_iter >= 0, "`max_iter` must be non-negative");
    need(batch >= 1, "`batch` must be positive");
    cf::DiagQPProblem<T> P;
    P.n = n;
    P.f = f;
    P.p = p;
    P.X = static_cast<const T*>(X.data());
    P.sx0 = element_stride<T>(X, 0);
    P.sx1 = element_stride<T>(X, 1);
    P.scale = scale.data();
    P.centre = centre.data();
    P.tail = tail.data();
    P.m = m.data();
    P.n_extra = static_cast<std::size_t>(E.shape(0));
    P.E = E.data();
    P.e = e.data();
    P.h = ph;
    P.lo = lo.data();
    P.hi = hi.data();
    cf::DiagQPResult res;
    {
        py::gil_scoped_release release;
        cf::DiagQPSolver<T> solver(P, static_cast<std::size_t>(batch));
        res = solver.solve(feas_tol, max_iter);
    }
    return py::make_tuple(to_numpy(std::move(res.z)), to_numpy(std::move(res.active)),
                          to_numpy(std::move(res.multipliers)), res.iterations, static_cast<int>(res.status),
                          res.passes);
}

py::tuple diag_qp(py::array X, darray scale, darray centre, darray tail, darray m, darray E, darray e, darray h,
                  darray lo, darray hi, double feas_tol, std::int64_t max_iter, std::int64_t batch) {
    return dispatch_float(X, "`X` must be float32 or float64", [&](auto t) {
        using T = decltype(t);
        need(strides_are_multiples<T>(X), "`X` strides must be multiples of its item size");
        return diag_qp_impl<T>(X, scale, centre, tail, m, E, e, h, lo, hi, feas_tol, max_iter, batch);
    });
}

using farray = py::array_t<double, py::array::forcecast>;

// X (n, d) float64 with any strides: X @ v + offset; with `absmax`, also max |X| (same pass).
py::object scores(farray X, darray v, double offset, bool absmax) {
    need(X.ndim() == 2, "`X` must be 2-D");
    need(v.ndim() == 1 && v.shape(0) == X.shape(1), "`v` must have length X.shape[1]");
    const auto n = static_cast<std::size_t>(X.shape(0)), d = static_cast<std::size_t>(X.shape(1));
    py::array_t<double> out(static_cast<py::ssize_t>(n));
    const double* px = X.data();
    const auto s0 = element_stride<double>(X, 0);
    const auto s1 = element_stride<double>(X, 1);
    const double* pv = v.data();
    double* po = out.mutable_data();
    double m = 0.0;
    {
        py::gil_scoped_release release;
        m = cf::scores(n, d, px, s0, s1, pv, offset, po, absmax);
    }
    if (absmax) return py::make_tuple(out, m);
    return std::move(out);
}

// Weighted column means and scatters sum_i p_i (x_ik - mean_k)^2.
py::tuple weighted_moments(farray X, darray p) {
    need(X.ndim() == 2, "`X` must be 2-D");
    need(p.ndim() == 1 && p.shape(0) == X.shape(0), "`p` must have length X.shape[0]");
    const auto n = static_cast<std::size_t>(X.shape(0)), d = static_cast<std::size_t>(X.shape(1));
    py::array_t<double> mean(static_cast<py::ssize_t>(d)), scatter(static_cast<py::ssize_t>(d));
    const double* px = X.data();
    const auto s0 = element_stride<double>(X, 0);
    const auto s1 = element_stride<double>(X, 1);
    const double* pp = p.data();
    double *pm = mean.mutable_data(), *ps = scatter.mutable_data();
    {
        py::gil_scoped_release release;
        cf::weighted_moments(n, d, px, s0, s1, pp, pm, ps);
    }
    return py::make_tuple(mean, scatter);
}

}  // namespace

PYBIND11_MODULE(_counterfactual_ext, mod) {
    mod.doc() = "Compiled kernels of numtk.counterfactual (private).";
    mod.def("quadratic_knapsack", &quadratic_knapsack, py::arg("w"), py::arg("M"), py::arg("lo"), py::arg("hi"));
    mod.def("scores", &scores, py::arg("X"), py::arg("v"), py::arg("offset"), py::arg("absmax") = false);
    mod.def("weighted_moments", &weighted_moments, py::arg("X"), py::arg("p"));
    mod.def("diag_qp", &diag_qp, py::arg("X"), py::arg("scale"), py::arg("centre"), py::arg("tail"), py::arg("m"),
            py::arg("E"), py::arg("e"), py::arg("h"), py::arg("lo"), py::arg("hi"), py::arg("feas_tol"),
            py::arg("max_iter"), py::arg("batch") = 32);
}
