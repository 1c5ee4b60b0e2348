// pybind11 module of numtk.moe: the kernels in native/include/numtk/moe/, registered by room.
#include <pybind11/pybind11.h>

namespace py = pybind11;

void bind_llep(py::module_& m);  // _llep_bind.cpp: the least-loaded expert-parallel planner
void bind_bf16(py::module_& m);  // _bf16_bind.cpp: bf16 packing of merged expert pairs, the packed mat-vec

PYBIND11_MODULE(_moe_ext, m) {
    m.doc() = "Compiled kernels of numtk.moe (private).";
    bind_llep(m);
    bind_bf16(m);
}
