// Bindings of the LLEP planner (native/include/numtk/moe/llep_plan.hpp); being written.
#include <pybind11/pybind11.h>

namespace py = pybind11;

void bind_llep(py::module_& m) { (void)m; }
