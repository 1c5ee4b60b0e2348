// Bindings of the LLEP planner (native/include/numtk/moe/llep_plan.hpp). The Python layer
// (numtk/moe/_llep.py) validates first and applies the imbalance gate; these re-check what could corrupt
// memory or overflow (shapes, lengths, device ids, signs, totals) and release the GIL while planning.
#include <cmath>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "numtk/bindings.hpp"
#include "numtk/moe/llep_plan.hpp"

namespace py = pybind11;

namespace {

using numtk::bindings::carray;
using numtk::bindings::check_len;
using numtk::bindings::darray;
using numtk::bindings::need;
using numtk::bindings::to_numpy;

constexpr std::int64_t kMaxTotal = std::int64_t(1) << 62;  // as numtk.moe._plan.MAX_TOTAL

template <class Count>
py::tuple plan_layers(carray<Count> loads, carray<std::int64_t> placement, carray<std::int64_t> capacity,
                      std::int64_t min_chunk, std::int64_t num_devices, std::optional<darray> memory_limit,
                      double expert_bytes, double token_bytes, int threads) {
    need(loads.ndim() == 2, "`loads` must be 2-D (layers, experts)");
    const std::size_t L = std::size_t(loads.shape(0)), N = std::size_t(loads.shape(1));
    need(N >= 1, "`loads` must hold at least one expert");
    need(num_devices >= 1 && num_devices <= std::int64_t(0x7fffffff), "`num_devices` must lie in [1, 2**31 - 1]");
    const std::size_t P = std::size_t(num_devices);
    check_len(placement, N, "placement");
    check_len(capacity, L, "capacity");
    need(min_chunk >= 1, "`min_chunk` must be >= 1");
    const Count* pl = loads.data();
    const std::int64_t* pp = placement.data();
    const std::int64_t* pc = capacity.data();
    // (The conditions are tested before `need` builds its message string: these loops run over every entry.)
    bool ok = true;
    for (std::size_t e = 0; e < N; ++e) ok = ok && pp[e] >= 0 && pp[e] < num_devices;
    need(ok, "`placement` must hold device ids in [0, num_devices)");
    for (std::size_t i = 0; i < L; ++i) ok = ok && pc[i] >= 0 && pc[i] <= kMaxTotal;
    need(ok, "`capacity` must lie in [0, 2**62]");
    for (std::size_t i = 0; i < L && ok; ++i) {
        std::int64_t total = 0;
        for (std::size_t e = 0; e < N; ++e) {
            const std::int64_t l = std::int64_t(pl[i * N + e]);
            if (l < 0 || l >= kMaxTotal - total) {
                ok = false;
                break;
            }
            total += l;
        }
    }
    need(ok, "`loads` must be non-negative with totals below 2**62");
    numtk::moe::LlepMemory mem;
    const numtk::moe::LlepMemory* pmem = nullptr;
    if (memory_limit) {
        check_len(*memory_limit, P, "memory_limit");
        need(std::isfinite(expert_bytes) && expert_bytes >= 0.0, "`expert_bytes` must be finite and >= 0");
        need(std::isfinite(token_bytes) && token_bytes >= 0.0, "`token_bytes` must be finite and >= 0");
        mem.limit = memory_limit->data();
        mem.expert_bytes = expert_bytes;
        mem.token_bytes = token_bytes;
        pmem = &mem;
    }
    threads = numtk::bindings::check_threads(threads);
    std::vector<std::int64_t> chunks, offsets, forced, stranded;
    {
        py::gil_scoped_release release;
        numtk::moe::llep_plan_layers(pl, pp, L, N, P, pc, min_chunk, pmem, threads, chunks, offsets, forced,
                                     stranded);
    }
    py::array_t<std::int64_t> flat = to_numpy(std::move(chunks));
    py::array_t<std::int64_t> pairs = to_numpy(std::move(stranded));
    return py::make_tuple(flat.reshape({py::ssize_t(flat.shape(0) / 4), py::ssize_t(4)}), to_numpy(std::move(offsets)),
                          to_numpy(std::move(forced)),
                          pairs.reshape({py::ssize_t(pairs.shape(0) / 2), py::ssize_t(2)}));
}

constexpr const char* kDoc =
    "LLEP plans of L layers: `loads` (L, N) int32 or int64, C-contiguous (not converted), `placement` (N,)\n"
    "int64 device ids in [0, num_devices), `capacity` (L,) int64 per layer, `min_chunk` >= 1; with\n"
    "`memory_limit` (P,) bytes the memory-aware variant (`expert_bytes`, `token_bytes`). Returns (chunks,\n"
    "offsets, forced, stranded): chunks (K, 4) int64 rows (expert, device, start, stop), layer i's rows\n"
    "offsets[i]:offsets[i + 1]; forced (L,) chunks placed beyond capacity; stranded (S, 2) int64 rows\n"
    "(layer, expert), in layer order, for each remainder the memory-aware variant kept on its native device\n"
    "because no other device had the memory to take it. `threads` spread the layers.";

}  // namespace

void bind_llep(py::module_& m) {
    m.def("llep_plan_layers", &plan_layers<std::int32_t>, py::arg("loads").noconvert(), py::arg("placement"),
          py::arg("capacity"), py::arg("min_chunk"), py::arg("num_devices"), py::arg("memory_limit") = py::none(),
          py::arg("expert_bytes") = 0.0, py::arg("token_bytes") = 0.0, py::arg("threads") = 1, kDoc);
    m.def("llep_plan_layers", &plan_layers<std::int64_t>, py::arg("loads").noconvert(), py::arg("placement"),
          py::arg("capacity"), py::arg("min_chunk"), py::arg("num_devices"), py::arg("memory_limit") = py::none(),
          py::arg("expert_bytes") = 0.0, py::arg("token_bytes") = 0.0, py::arg("threads") = 1, kDoc);
}
