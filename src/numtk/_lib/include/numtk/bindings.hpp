// Helpers shared by numtk's pybind11 binding files (src/numtk/<area>/_<area>_ext.cpp, *_bind.cpp).
//
// This header is on the bindings' side of the layers: it includes pybind11 and may only be included by
// binding files. The kernels under native/ stay plain C++ (no Python, pybind11 or NumPy header; CI checks
// it). Each area's meson.build adds this directory through `numtk_bindings_dep` (src/numtk/_lib/meson.build).
//
// What is here: the array types the bindings take, the last-line-of-defence checks every binding repeats
// (a ValueError with the parameter's name in backquotes, as numtk's Python checks word it), the `threads`
// argument, the float32/float64 dispatch, strides in elements, and NumPy arrays made from std::vector.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "numtk/parallel.hpp"

namespace numtk::bindings {

namespace py = pybind11;

// float64, C-contiguous: any other dtype or layout is converted on the way in (a copy only when needed).
using darray = py::array_t<double, py::array::c_style | py::array::forcecast>;

// C-contiguous T without conversion: a binding that takes index arrays registers one overload per index
// type (int32 and int64), so that neither is copied.
template <class T>
using carray = py::array_t<T, py::array::c_style>;

// Throws std::invalid_argument (ValueError in Python) with `msg` unless `ok`.
inline void need(bool ok, const std::string& msg) {
    if (!ok) throw std::invalid_argument(msg);
}

// The `threads` argument of a kernel: a positive count, or -1 for every hardware thread.
inline int check_threads(int threads) {
    if (threads == -1) return numtk::hardware_threads();
    if (threads < 1) throw std::invalid_argument("`threads` must be a positive int or -1");
    return threads;
}

// `a` is 1-D of length `len`.
template <class A>
void check_len(const A& a, std::size_t len, const char* name) {
    if (a.ndim() != 1 || static_cast<std::size_t>(a.shape(0)) != len)
        throw std::invalid_argument(std::string("`") + name + "` must be 1-D of length " + std::to_string(len));
}

// Whether every stride of `a` is a whole number of T elements (false for a misaligned view).
template <class T>
bool strides_are_multiples(const py::array& a) {
    for (py::ssize_t k = 0; k < a.ndim(); ++k)
        if (a.strides(k) % static_cast<py::ssize_t>(sizeof(T)) != 0) return false;
    return true;
}

// The stride of `axis` of `a`, in elements of T (check strides_are_multiples<T> first).
template <class T>
std::ptrdiff_t element_stride(const py::array& a, py::ssize_t axis) {
    return a.strides(axis) / static_cast<py::ssize_t>(sizeof(T));
}

// Calls f(T{}) with T = float or double, the dtype of `a` (native byte order), and returns its result; any
// other dtype throws E(message) (std::invalid_argument is a ValueError in Python, py::type_error a TypeError).
template <class E = std::invalid_argument, class F>
decltype(auto) dispatch_float(const py::array& a, const std::string& message, F&& f) {
    if (py::isinstance<py::array_t<float>>(a)) return f(float{});
    if (py::isinstance<py::array_t<double>>(a)) return f(double{});
    throw E(message);
}

// A 1-D NumPy array that takes over the vector's buffer (no copy); the array frees it.
template <class T>
py::array_t<T> to_numpy(std::vector<T>&& v) {
    auto* owned = new std::vector<T>(std::move(v));
    py::capsule free_when_done(owned, [](void* p) { delete static_cast<std::vector<T>*>(p); });
    return py::array_t<T>({static_cast<py::ssize_t>(owned->size())}, {static_cast<py::ssize_t>(sizeof(T))},
                          owned->data(), free_when_done);
}

// A 1-D NumPy array holding a copy of the vector.
template <class T>
py::array_t<T> to_numpy(const std::vector<T>& v) {
    return py::array_t<T>(static_cast<py::ssize_t>(v.size()), v.data());
}

}  // namespace numtk::bindings
