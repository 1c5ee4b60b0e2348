// pybind11 bindings of the sampling metrics kernels in native/include/numtk/sampling/.
// Inputs of float32 or float64 are converted to C-contiguous float64 (copies only when needed); the
// computation is float64. Python validates arguments first; the checks here are the last line of defence
// (no crash on bad input). The GIL is released around every kernel call.
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "numtk/bindings.hpp"
#include "numtk/sampling/mmd.hpp"
#include "numtk/sampling/sinkhorn.hpp"

namespace py = pybind11;
namespace ns = numtk::sampling;

namespace {

using numtk::bindings::darray;
using numtk::bindings::need;

// float32/float64 (any layout) -> C-contiguous float64; other dtypes are refused.
darray as_double(const py::array& a, const char* name) {
    const char kind = a.dtype().kind();
    need(kind == 'f' && (a.itemsize() == 4 || a.itemsize() == 8),
         std::string("`") + name + "` must be a float32 or float64 array");
    return darray::ensure(a);
}

void check_finite(const double* p, std::size_t len, const char* name) {
    for (std::size_t i = 0; i < len; ++i)
        need(std::isfinite(p[i]), std::string("`") + name + "` must be finite (no NaN or inf)");
}

darray cloud(const py::array& a, const char* name) {
    need(a.ndim() == 2, std::string("`") + name + "` must be 2-D (n_points, n_features)");
    darray out = as_double(a, name);
    need(out.shape(0) >= 1, std::string("`") + name + "` must have at least one row");
    need(out.shape(1) >= 1, std::string("`") + name + "` must have at least one column");
    check_finite(out.data(), std::size_t(out.size()), name);
    return out;
}

// log-weights from weights (positive, finite; normalised here to sum 1).
std::vector<double> log_weights(const py::array& w, std::size_t len, const char* name) {
    darray a = as_double(w, name);
    need(a.ndim() == 1 && std::size_t(a.shape(0)) == len,
         std::string("`") + name + "` must be 1-D with one weight per point");
    const double* p = a.data();
    double s = 0.0;
    for (std::size_t i = 0; i < len; ++i) {
        need(std::isfinite(p[i]) && p[i] > 0.0, std::string("`") + name + "` must be finite and positive");
        s += p[i];
    }
    std::vector<double> out(len);
    for (std::size_t i = 0; i < len; ++i) out[i] = std::log(p[i] / s);
    return out;
}

void check_common(double eps, int max_iter, double tol, int threads) {
    need(std::isfinite(eps) && eps > 0.0, "`epsilon` must be finite and > 0");
    need(max_iter >= 0, "`max_iter` must be >= 0");
    need(std::isfinite(tol) && tol >= 0.0, "`tol` must be finite and >= 0");
    need(threads >= 1, "`threads` must be >= 1");
}

py::dict pack(const ns::SinkhornResult<double>& r, py::array_t<double>& f, py::array_t<double>& g) {
    py::dict d;
    d["f"] = f;
    d["g"] = g;
    d["transport"] = r.transport;
    d["objective"] = r.objective;
    d["marginal_error"] = r.marginal_error;
    d["iterations"] = r.iterations;
    d["converged"] = r.converged;
    return d;
}

// Two-sided log-domain Sinkhorn from zero potentials on the cost built by make_cost() (without the GIL).
template <class MakeCost>
py::dict two_sided(MakeCost make_cost, const std::vector<double>& la, const std::vector<double>& lb, double eps,
                   int max_iter, double tol, int threads) {
    const std::size_t n = la.size(), m = lb.size();
    py::array_t<double> f(static_cast<py::ssize_t>(n)), g(static_cast<py::ssize_t>(m));
    double* pf = f.mutable_data();
    double* pg = g.mutable_data();
    ns::SinkhornResult<double> r;
    {
        py::gil_scoped_release release;
        std::fill(pf, pf + n, 0.0);
        std::fill(pg, pg + m, 0.0);
        const auto C = make_cost();
        r = ns::sinkhorn_log(C, la.data(), lb.data(), eps, max_iter, tol, pf, pg, threads);
    }
    return pack(r, f, g);
}

py::dict sinkhorn_points(const py::array& X_, const py::array& Y_, const py::array& a_, const py::array& b_,
                         double eps, int cost, int max_iter, double tol, int threads) {
    darray X = cloud(X_, "X"), Y = cloud(Y_, "Y");
    need(X.shape(1) == Y.shape(1), "`X` and `Y` must have the same number of columns");
    need(cost == ns::kSqEuclidean || cost == ns::kEuclidean, "unknown cost kind");
    check_common(eps, max_iter, tol, threads);
    const auto n = std::size_t(X.shape(0)), m = std::size_t(Y.shape(0)), d = std::size_t(X.shape(1));
    const auto la = log_weights(a_, n, "a"), lb = log_weights(b_, m, "b");
    return two_sided([&] { return ns::PointCost<double>(X.data(), n, Y.data(), m, d, cost); }, la, lb, eps,
                     max_iter, tol, threads);
}

py::dict sinkhorn_symmetric(const py::array& X_, const py::array& a_, double eps, int cost, int max_iter,
                            double tol, int threads) {
    darray X = cloud(X_, "X");
    need(cost == ns::kSqEuclidean || cost == ns::kEuclidean, "unknown cost kind");
    check_common(eps, max_iter, tol, threads);
    const auto n = std::size_t(X.shape(0)), d = std::size_t(X.shape(1));
    const auto la = log_weights(a_, n, "a");
    py::array_t<double> f(static_cast<py::ssize_t>(n));
    double* pf = f.mutable_data();
    ns::SinkhornResult<double> r;
    {
        py::gil_scoped_release release;
        std::fill(pf, pf + n, 0.0);
        const ns::PointCost<double> C(X.data(), n, X.data(), n, d, cost);
        r = ns::sinkhorn_log_symmetric(C, la.data(), eps, max_iter, tol, pf, threads);
    }
    return pack(r, f, f);
}

py::dict sinkhorn_matrix(const py::array& C_, const py::array& a_, const py::array& b_, double eps, int max_iter,
                         double tol, int threads) {
    need(C_.ndim() == 2, "`cost` must be a 2-D matrix");
    darray C = as_double(C_, "cost");
    need(C.shape(0) >= 1 && C.shape(1) >= 1, "`cost` must not be empty");
    check_finite(C.data(), std::size_t(C.size()), "cost");
    check_common(eps, max_iter, tol, threads);
    const auto n = std::size_t(C.shape(0)), m = std::size_t(C.shape(1));
    const auto la = log_weights(a_, n, "a"), lb = log_weights(b_, m, "b");
    return two_sided([&] { return ns::DenseCost<double>(C.data(), n, m); }, la, lb, eps, max_iter, tol, threads);
}

py::tuple kernel_sums(const py::array& X_, const py::array& Y_, int kernel, double bandwidth, int threads) {
    darray X = cloud(X_, "X"), Y = cloud(Y_, "Y");
    need(X.shape(1) == Y.shape(1), "`X` and `Y` must have the same number of columns");
    need(kernel == ns::kRBF || kernel == ns::kIMQ, "unknown kernel kind");
    need(std::isfinite(bandwidth) && bandwidth > 0.0, "`bandwidth` must be finite and > 0");
    need(threads >= 1, "`threads` must be >= 1");
    const auto n = std::size_t(X.shape(0)), m = std::size_t(Y.shape(0)), d = std::size_t(X.shape(1));
    ns::KernelSums<double> s;
    {
        py::gil_scoped_release release;
        s = ns::kernel_sums(X.data(), n, Y.data(), m, d, kernel, bandwidth, threads);
    }
    return py::make_tuple(s.xx, s.yy, s.xy);
}

}  // namespace

PYBIND11_MODULE(_sampling_ext, m) {
    m.doc() = "Compiled kernels of numtk.sampling (private; use numtk.sampling).";
    m.attr("SQEUCLIDEAN") = int(ns::kSqEuclidean);
    m.attr("EUCLIDEAN") = int(ns::kEuclidean);
    m.attr("RBF") = int(ns::kRBF);
    m.attr("IMQ") = int(ns::kIMQ);
    m.def("sinkhorn_points", &sinkhorn_points, py::arg("X"), py::arg("Y"), py::arg("a"), py::arg("b"),
          py::arg("epsilon"), py::arg("cost"), py::arg("max_iter"), py::arg("tol"), py::arg("threads") = 1,
          "Log-domain Sinkhorn with costs computed on the fly from the clouds X (n, d) and Y (m, d).\n"
          "Returns a dict: f, g (dual potentials, P_ij = a_i b_j exp((f_i + g_j - C_ij)/eps)), transport\n"
          "(<P, C>), objective (<a, f> + <b, g>), marginal_error (L1 row violation), iterations, converged.");
    m.def("sinkhorn_symmetric", &sinkhorn_symmetric, py::arg("X"), py::arg("a"), py::arg("epsilon"),
          py::arg("cost"), py::arg("max_iter"), py::arg("tol"), py::arg("threads") = 1,
          "OT_eps(a, a) on one cloud by the averaged symmetric iteration; f == g, objective = 2 <a, f>.");
    m.def("sinkhorn_matrix", &sinkhorn_matrix, py::arg("cost"), py::arg("a"), py::arg("b"), py::arg("epsilon"),
          py::arg("max_iter"), py::arg("tol"), py::arg("threads") = 1,
          "Log-domain Sinkhorn on a given cost matrix (n, m); same output as sinkhorn_points.");
    m.def("kernel_sums", &kernel_sums, py::arg("X"), py::arg("Y"), py::arg("kernel"), py::arg("bandwidth"),
          py::arg("threads") = 1,
          "(sum_{i != j} k(x_i, x_j), sum_{i != j} k(y_i, y_j), sum_{i, j} k(x_i, y_j)).");
}
