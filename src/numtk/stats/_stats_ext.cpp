// pybind11 bindings of the Kendall kernels in native/include/numtk/stats/kendall.hpp.
//
// All Python work (dtype dispatch, shape and stride checks) happens with the GIL held; the kernels run
// with it released. Inputs of any numeric dtype and any 1-D stride are read in place (no copy).
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "numtk/bindings.hpp"
#include "numtk/parallel.hpp"
#include "numtk/stats/kendall.hpp"

namespace py = pybind11;
namespace ks = numtk::stats;

namespace {

using numtk::bindings::check_threads;
using numtk::bindings::to_numpy;

// A 1-D view: base pointer and stride in elements.
struct View {
    const void* data;
    std::ptrdiff_t stride;
    char kind;
    int itemsize;
};

View view_of(const py::array& a, const char* name) {
    if (a.ndim() != 1) throw std::invalid_argument(std::string("`") + name + "` must be 1-D");
    const py::dtype dt = a.dtype();
    const char kind = dt.kind();
    const int size = int(dt.itemsize());
    if (kind != 'b' && kind != 'i' && kind != 'u' && kind != 'f')
        throw std::invalid_argument(std::string("`") + name + "` must have a boolean, integer or float dtype");
    if (kind == 'f' && size != 4 && size != 8)
        throw std::invalid_argument(std::string("`") + name + "` must be float32 or float64");
    if (reinterpret_cast<std::uintptr_t>(a.data()) % std::uintptr_t(size) != 0 || dt.byteorder() == '>')
        throw std::invalid_argument(std::string("`") + name + "` must be aligned and in native byte order");
    const std::ptrdiff_t st = a.shape(0) > 1 ? a.strides(0) : size;
    if (st % size != 0) throw std::invalid_argument(std::string("`") + name + "` has a stride that is not a multiple of its item size");
    return View{a.data(), st / size, kind, size};
}

// Calls f(static_cast<const T*>(v.data)) with T the element type of v.
template <class F>
decltype(auto) dispatch(const View& v, F&& f) {
    switch (v.kind) {
        case 'b': return f(static_cast<const bool*>(v.data));
        case 'f':
            if (v.itemsize == 4) return f(static_cast<const float*>(v.data));
            return f(static_cast<const double*>(v.data));
        case 'i':
            switch (v.itemsize) {
                case 1: return f(static_cast<const std::int8_t*>(v.data));
                case 2: return f(static_cast<const std::int16_t*>(v.data));
                case 4: return f(static_cast<const std::int32_t*>(v.data));
                default: return f(static_cast<const std::int64_t*>(v.data));
            }
        default:
            switch (v.itemsize) {
                case 1: return f(static_cast<const std::uint8_t*>(v.data));
                case 2: return f(static_cast<const std::uint16_t*>(v.data));
                case 4: return f(static_cast<const std::uint32_t*>(v.data));
                default: return f(static_cast<const std::uint64_t*>(v.data));
            }
    }
}

std::size_t checked_length(const py::array& x, const py::array& y) {
    if (x.shape(0) != y.shape(0)) throw std::invalid_argument("`x` and `y` must have the same length");
    const auto n = std::size_t(x.shape(0));
    if (n >= (std::size_t(1) << 32)) throw std::length_error("inputs longer than 2**32 - 1 are not supported");
    return n;
}

py::tuple kendall_counts(const py::array& x, const py::array& y, int threads) {
    const View vx = view_of(x, "x"), vy = view_of(y, "y");
    const std::size_t n = checked_length(x, y);
    threads = check_threads(threads);
    ks::KendallCounts c;
    {
        py::gil_scoped_release release;
        ks::KendallWork w;
        dispatch(vy, [&](auto* p) { ks::kendall_pass_y(p, vy.stride, n, threads, w, c); });
        dispatch(vx, [&](auto* p) { ks::kendall_pass_x(p, vx.stride, n, threads, w, c); });
    }
    return py::make_tuple(c.discordant, c.xtie, c.ytie, c.ntie, c.x_distinct, c.y_distinct, to_numpy(std::move(c.x_groups)),
                          to_numpy(std::move(c.y_groups)));
}

py::tuple kendall_lexsort(const py::array& x, const py::array& y, int threads) {
    const View vx = view_of(x, "x"), vy = view_of(y, "y");
    const std::size_t n = checked_length(x, y);
    threads = check_threads(threads);
    const auto len = static_cast<py::ssize_t>(n);
    py::array_t<std::int64_t> perm(len), xr(len), yr(len);
    std::int64_t *pp = perm.mutable_data(), *px = xr.mutable_data(), *py_ = yr.mutable_data();
    {
        py::gil_scoped_release release;
        ks::KendallWork w;
        dispatch(vy, [&](auto* p) { ks::lexsort_pass_y(p, vy.stride, n, threads, w); });
        dispatch(vx, [&](auto* p) { ks::lexsort_pass_x(p, vx.stride, n, threads, w, pp, px, py_); });
    }
    return py::make_tuple(perm, xr, yr);
}

}  // namespace

PYBIND11_MODULE(_stats_ext, m) {
    m.doc() = "Compiled Kendall kernels (private; use numtk.stats).";
    m.def("kendall_counts", &kendall_counts, py::arg("x"), py::arg("y"), py::arg("threads") = 1,
          R"doc(Discordant pairs and tie statistics of two 1-D numeric arrays in O(n log n).

Returns (discordant, xtie, ytie, ntie, x_distinct, y_distinct, x_groups, y_groups), where
x_groups / y_groups are the sizes (> 1) of the tie groups in ascending value order. NaN must
have been removed by the caller. Runs with the GIL released.)doc");
    m.def("kendall_lexsort", &kendall_lexsort, py::arg("x"), py::arg("y"), py::arg("threads") = 1,
          R"doc(Lexicographic (x, y) order: (perm, x_rank, y_rank), 0-based dense ranks in that order.)doc");
    m.def("hardware_threads", &numtk::hardware_threads, "Number of hardware threads.");
}
