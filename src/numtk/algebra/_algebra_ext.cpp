// pybind11 module of numtk.algebra: Reisner's criterion over GF(2) (native/include/numtk/algebra/reisner.hpp).
// The Python layer (numtk/algebra/_reisner.py) validates first; this re-checks what could corrupt memory or
// exhaust it (dimensions, purity, the number of faces) and releases the GIL while it runs.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "numtk/algebra/reisner.hpp"
#include "numtk/bindings.hpp"

namespace py = pybind11;

namespace {

using numtk::bindings::carray;
using numtk::bindings::need;
using numtk::bindings::to_numpy;

py::tuple reisner_gf2_failures(const carray<std::uint64_t>& facets, bool first_only) {
    need(facets.ndim() == 1, "`facets` must be 1-D");
    const auto m = static_cast<std::size_t>(facets.shape(0));
    std::vector<std::uint64_t> F(facets.data(), facets.data() + m);
    for (std::size_t i = 0; i < m; ++i) {
        need(F[i] >> 62 == 0, "`facets` must be subsets of [62]");
        need(numtk::algebra::popcount64(F[i]) == numtk::algebra::popcount64(F[0]),
             "`facets` must all have the same number of vertices (a pure complex)");
    }
    need(numtk::algebra::face_bound(F) <= numtk::algebra::kMaxFaces,
         "`facets`: the complex may have more than 2**16 faces, more than the kernel enumerates");
    std::vector<numtk::algebra::Failure> fails;
    {
        py::gil_scoped_release release;
        fails = numtk::algebra::reisner_gf2_failures(F, first_only);
    }
    std::vector<std::uint64_t> sigma(fails.size());
    std::vector<std::int64_t> k(fails.size());
    for (std::size_t i = 0; i < fails.size(); ++i) {
        sigma[i] = fails[i].sigma;
        k[i] = fails[i].k;
    }
    return py::make_tuple(to_numpy(std::move(sigma)), to_numpy(std::move(k)));
}

}  // namespace

PYBIND11_MODULE(_algebra_ext, m) {
    m.doc() = "Compiled kernels of numtk.algebra (private).";
    m.def("reisner_gf2_failures", &reisner_gf2_failures, py::arg("facets"), py::arg("first_only"),
          "(sigma, k) pairs, larger faces first, where the link of sigma has nonzero reduced GF(2) homology in "
          "dimension k - 1 below its top; the pure complex with these facets (distinct masks) is Cohen-Macaulay "
          "over GF(2) exactly when there is none.");
}
