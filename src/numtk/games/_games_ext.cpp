// pybind11 module of numtk.games: the kernels in native/include/numtk/games/, registered by room.
#include <pybind11/pybind11.h>

namespace py = pybind11;

void bind_efg(py::module_& m);      // _efg_bind.cpp: game trees and sequence forms
void bind_meta(py::module_& m);     // _meta_bind.cpp: replicator dynamics, dense regret matching
void bind_solvers(py::module_& m);  // _solvers_bind.cpp: best response, payoffs, CFR+

PYBIND11_MODULE(_games_ext, m) {
    m.doc() = "Compiled kernels of numtk.games (private).";
    bind_efg(m);
    bind_meta(m);
    bind_solvers(m);
}
