// Bindings of the bf16 packing kernels (native/include/numtk/moe/bf16_pack.hpp); being written.
#include <pybind11/pybind11.h>

namespace py = pybind11;

void bind_bf16(py::module_& m) { (void)m; }
