// pybind11 bindings of the seriation kernels in native/include/numtk/seriation/.
#include <cstdint>
#include <stdexcept>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "numtk/parallel.hpp"
#include "numtk/seriation/local_pca.hpp"

namespace py = pybind11;

namespace {

template <class I>
py::tuple local_pca(py::array_t<double, py::array::c_style> X, py::array_t<I, py::array::c_style> nb, int threads,
                    int max_steps, double tol) {
    if (X.ndim() != 2) throw std::invalid_argument("`X` must be 2-D");
    if (nb.ndim() != 2) throw std::invalid_argument("`neighbors` must be 2-D (one row of indices per neighbourhood)");
    if (threads == -1) threads = numtk::hardware_threads();
    if (threads < 1) throw std::invalid_argument("`threads` must be a positive int or -1");
    if (max_steps < 2) throw std::invalid_argument("`max_steps` must be at least 2");
    const auto rows = static_cast<std::size_t>(X.shape(0));
    const auto d = static_cast<std::size_t>(X.shape(1));
    const auto n = static_cast<std::size_t>(nb.shape(0));
    const auto k = static_cast<std::size_t>(nb.shape(1));
    if (n > 0 && (d == 0 || k == 0)) throw std::invalid_argument("`X` and `neighbors` need at least one column");
    const I* pn = nb.data();
    for (std::size_t i = 0; i < n * k; ++i)
        if (pn[i] < 0 || static_cast<std::size_t>(pn[i]) >= rows)
            throw std::out_of_range("`neighbors` holds an index outside the rows of `X`");
    const auto len = static_cast<py::ssize_t>(n);
    py::array_t<double> tangents({len, static_cast<py::ssize_t>(d)});
    py::array_t<double> ratio(len);
    const double* px = X.data();
    double* pt = tangents.mutable_data();
    double* pr = ratio.mutable_data();
    int steps = 0;
    {
        py::gil_scoped_release release;
        steps = numtk::seriation::local_pca(px, n, d, pn, k, pt, pr, threads, max_steps, tol);
    }
    return py::make_tuple(tangents, ratio, steps);
}

}  // namespace

PYBIND11_MODULE(_seriation_ext, m) {
    m.doc() = "Compiled seriation kernels (private; use numtk.seriation).";
    const char* doc = R"doc(Batched local PCA by Lanczos: (tangents (n, d), ratio lambda_2/lambda_1 (n,), max steps).

X float64 (rows, d) C-contiguous; neighbors int32/int64 (n, k): row indices into X, one neighbourhood
per output row. tol = 0 runs every
neighbourhood to the full Krylov space (exact). Runs with the GIL released.)doc";
    m.def("local_pca", &local_pca<std::int32_t>, py::arg("X"), py::arg("neighbors"), py::arg("threads") = 1,
          py::arg("max_steps") = 64, py::arg("tol") = 1e-10, doc);
    m.def("local_pca", &local_pca<std::int64_t>, py::arg("X"), py::arg("neighbors"), py::arg("threads") = 1,
          py::arg("max_steps") = 64, py::arg("tol") = 1e-10, doc);
}
