// Least-loaded expert-parallel planning (LLEP; Nguyen et al., "Least-Loaded Expert Parallelism", ICML 2026,
// arXiv 2601.17111, Alg. 2/3): split the routing slots of overloaded experts over the least-loaded devices.
//
// One layer: N experts with loads l[e] >= 0, P devices, native device pi[e] in [0, P), a per-device token
// capacity `capacity` and a minimum chunk `min_chunk`. State per device: pending[p] (slots of p's native
// experts not yet visited), assigned[p] (slots placed on p so far) and eff[p] = assigned[p] + pending[p].
// Experts are visited by decreasing load, ties by increasing id, zero loads skipped. For expert e on g:
//   pending[g] -= l[e]; avail = capacity - eff[g];
//   avail >= l[e]      -> all of e stays on g;
//   0 < avail < l[e]   -> [0, avail) stays on g, the rest r spills;
//   avail <= 0         -> all of e spills.
// While r > 0: o = the device other than g with the least (eff[o], o); a = capacity - eff[o];
//   if a > 0 and (a >= min_chunk or r <= a): o takes c = min(r, a) slots;
//   otherwise (no device has room for a chunk of min_chunk slots) o takes all r, beyond its capacity: a
//   *forced* chunk.
// With one device only (no other device to spill to), the remainder stays on g and counts as forced.
//
// The devices sit in an indexed binary min-heap keyed by (eff, id), updated on every change of eff, so the
// least-loaded device other than g is the root or, when the root is g, one of its two children:
// O(N log N + (N + S) log P) time for S spill chunks and O(N + P) memory besides the chunk list.
//
// Memory-aware variant (numtk's extension): with per-device limits (bytes), expert_bytes and token_bytes,
// a device o may receive c slots of e only if
//   native_bytes[o] + (hosted[o] + new) * expert_bytes + token_bytes * (eff[o] + c) <= limit[o],
// where hosted[o] counts the foreign experts o received so far and new = 0 if o already received e in this
// visit, else 1. eff[o] (slots placed plus native slots still pending) stands for the device's load, so a
// device that passes the test stays within its limit whatever happens later (eff only grows by received
// chunks, which are tested). The native device g is held to the same test: with token_bytes > 0 the share e
// keeps on g is at most the largest k with native_bytes[g] + hosted[g] * expert_bytes
// + token_bytes * (eff[g] + k) <= limit[g] (0 if none; found by bisection on that test, which is monotone in
// k), and the rest spills as usual. The candidates that pass the test are scanned for the least (eff, id),
// with c the chunk the rule above would give that device; when none passes, the remainder stays on g
// (counted as forced) and e is reported as *stranded* (whether g's memory then holds it is the caller's
// check, from the plan's peak memory).
//
// Output: chunks (expert, device, start, stop) appended to a growable vector in plan order; the pieces of one
// expert on one device that follow each other form one chunk. Plain C++17, no Python.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "numtk/parallel.hpp"

namespace numtk::moe {

// The memory model of the memory-aware variant (all per-device arrays of length P).
struct LlepMemory {
    const double* limit = nullptr;  // bytes per device
    double expert_bytes = 0.0;      // weights of one expert
    double token_bytes = 0.0;       // activations per routed slot
};

struct LlepLayerStats {
    std::int64_t forced = 0;  // chunks placed beyond capacity (forced branch, or a remainder kept native)
};

// Min-heap of device ids keyed by (key[id], id), with the position of every id (decrease/increase key).
class DeviceHeap {
public:
    void reset(const std::int64_t* key, std::size_t P) {
        key_ = key;
        heap_.resize(P);
        pos_.resize(P);
        for (std::size_t i = 0; i < P; ++i) heap_[i] = i;
        for (std::size_t i = 0; i < P; ++i) pos_[i] = i;
        for (std::size_t i = P / 2; i-- > 0;) down(i);
    }
    // Restore the heap order after key[id] changed (either way).
    void update(std::size_t id) {
        const std::size_t i = pos_[id];
        if (i > 0 && less(heap_[i], heap_[(i - 1) / 2]))
            up(i);
        else
            down(i);
    }
    // The device with the least (key, id) other than `exclude`; `none` if there is no other device.
    std::size_t min_except(std::size_t exclude) const {
        const std::size_t n = heap_.size();
        if (n == 0) return none;
        if (heap_[0] != exclude) return heap_[0];
        // The second least element of a binary heap is a child of the root.
        if (n == 1) return none;
        if (n == 2) return heap_[1];
        return less(heap_[1], heap_[2]) ? heap_[1] : heap_[2];
    }
    static constexpr std::size_t none = std::numeric_limits<std::size_t>::max();

private:
    bool less(std::size_t a, std::size_t b) const {
        return key_[a] < key_[b] || (key_[a] == key_[b] && a < b);
    }
    void place(std::size_t i, std::size_t id) {
        heap_[i] = id;
        pos_[id] = i;
    }
    void up(std::size_t i) {
        const std::size_t id = heap_[i];
        while (i > 0) {
            const std::size_t parent = (i - 1) / 2;
            if (!less(id, heap_[parent])) break;
            place(i, heap_[parent]);
            i = parent;
        }
        place(i, id);
    }
    void down(std::size_t i) {
        const std::size_t n = heap_.size(), id = heap_[i];
        for (;;) {
            std::size_t child = 2 * i + 1;
            if (child >= n) break;
            if (child + 1 < n && less(heap_[child + 1], heap_[child])) ++child;
            if (!less(heap_[child], id)) break;
            place(i, heap_[child]);
            i = child;
        }
        place(i, id);
    }
    const std::int64_t* key_ = nullptr;
    std::vector<std::size_t> heap_, pos_;
};

// Scratch space of one planning thread (reused across layers: no allocation once grown).
struct LoadId {
    std::int64_t load;
    std::size_t id;
};

struct LlepWorkspace {
    std::vector<LoadId> order, scratch;
    std::vector<std::int64_t> pending, assigned, eff, hosted, last_received;
    std::vector<double> native_bytes;
    DeviceHeap heap;
};

namespace detail {

// Appends (expert, device, start, stop), or extends the previous chunk when it is the same expert on the same
// device and ends at `start`.
inline void emit(std::vector<std::int64_t>& chunks, std::size_t first_of_layer, std::int64_t e, std::int64_t d,
                 std::int64_t start, std::int64_t stop) {
    const std::size_t n = chunks.size();
    if (n >= first_of_layer + 4 && chunks[n - 4] == e && chunks[n - 3] == d && chunks[n - 1] == start) {
        chunks[n - 1] = stop;
        return;
    }
    chunks.insert(chunks.end(), {e, d, start, stop});
}

// Sorts by decreasing load, ties by increasing id. `items` arrive in increasing id. Small inputs: std::sort;
// larger ones: a stable least-significant-digit radix sort on (max load - load), one pass per byte of the
// largest load, which keeps the id order of ties.
inline void sort_by_load(std::vector<LoadId>& items, std::vector<LoadId>& scratch) {
    const std::size_t n = items.size();
    if (n < 256) {
        std::sort(items.begin(), items.end(), [](const LoadId& a, const LoadId& b) {
            return a.load > b.load || (a.load == b.load && a.id < b.id);
        });
        return;
    }
    std::int64_t top = 0, bottom = items[0].load;
    for (const LoadId& it : items) {
        top = std::max(top, it.load);
        bottom = std::min(bottom, it.load);
    }
    const std::uint64_t span = std::uint64_t(top - bottom);
    scratch.resize(n);
    std::size_t count[257];
    for (unsigned shift = 0; shift < 64 && (span >> shift) != 0; shift += 8) {
        std::fill(count, count + 257, std::size_t(0));
        for (const LoadId& it : items) ++count[((std::uint64_t(top - it.load) >> shift) & 0xff) + 1];
        for (std::size_t b = 1; b < 257; ++b) count[b] += count[b - 1];
        for (const LoadId& it : items) scratch[count[(std::uint64_t(top - it.load) >> shift) & 0xff]++] = it;
        items.swap(scratch);
    }
}

}  // namespace detail

// Plans one layer and appends its chunks (4 int64 per chunk) to `chunks`, and to `stranded` the experts whose
// remainder found no device with the memory to take it (memory-aware only). `loads` (N), `placement` (N, ids
// in [0, P)); `memory` null for the plain planner. Loads must be >= 0 with a total below 2**62, `capacity`
// >= 0, `min_chunk` >= 1 (the caller checks).
template <class Count, class Index>
LlepLayerStats llep_plan_layer(const Count* loads, const Index* placement, std::size_t N, std::size_t P,
                               std::int64_t capacity, std::int64_t min_chunk, const LlepMemory* memory,
                               LlepWorkspace& ws, std::vector<std::int64_t>& chunks,
                               std::vector<std::int64_t>& stranded) {
    LlepLayerStats stats;
    const std::size_t first = chunks.size();
    ws.pending.assign(P, 0);
    ws.assigned.assign(P, 0);
    ws.order.clear();
    for (std::size_t e = 0; e < N; ++e) {
        const std::int64_t l = std::int64_t(loads[e]);
        if (l > 0) {
            ws.order.push_back({l, e});
            ws.pending[std::size_t(placement[e])] += l;
        }
    }
    detail::sort_by_load(ws.order, ws.scratch);
    ws.eff = ws.pending;
    std::int64_t* eff = ws.eff.data();
    const bool aware = memory != nullptr;
    if (aware) {
        ws.hosted.assign(P, 0);
        ws.last_received.assign(P, -1);
        ws.native_bytes.assign(P, 0.0);
        std::vector<std::int64_t>& count = ws.assigned;  // borrowed: native expert counts, reset below
        for (std::size_t e = 0; e < N; ++e) count[std::size_t(placement[e])] += 1;
        for (std::size_t p = 0; p < P; ++p) ws.native_bytes[p] = double(count[p]) * memory->expert_bytes;
        ws.assigned.assign(P, 0);
    } else {
        ws.heap.reset(eff, P);
    }
    for (const LoadId& item : ws.order) {
        const std::size_t e = item.id;
        const std::int64_t l = item.load;
        const std::size_t g = std::size_t(placement[e]);
        const std::int64_t ee = std::int64_t(e), gg = std::int64_t(g);
        ws.pending[g] -= l;
        const std::int64_t avail = capacity - ws.assigned[g] - ws.pending[g];
        std::int64_t keep = avail >= l ? l : (avail > 0 ? avail : 0);
        if (aware && keep > 0 && memory->token_bytes > 0.0) {  // g's memory room caps its share too
            const double base = ws.native_bytes[g] + double(ws.hosted[g]) * memory->expert_bytes;
            const double tb = memory->token_bytes, lim = memory->limit[g];
            const std::int64_t effg = ws.assigned[g] + ws.pending[g];
            auto fits = [&](std::int64_t k) { return base + tb * double(effg + k) <= lim; };
            if (!fits(keep)) {  // the largest k in [0, keep) that fits, or 0: fits(lo) or lo < 0, !fits(hi)
                std::int64_t lo = -1, hi = keep;
                while (hi - lo > 1) {
                    const std::int64_t mid = lo + (hi - lo) / 2;
                    if (fits(mid))
                        lo = mid;
                    else
                        hi = mid;
                }
                keep = lo > 0 ? lo : 0;
            }
        }
        std::int64_t off = 0, r = l - keep;
        if (keep > 0) {
            detail::emit(chunks, first, ee, gg, 0, keep);
            ws.assigned[g] += keep;
            off = keep;
        }
        eff[g] = ws.assigned[g] + ws.pending[g];
        if (!aware) ws.heap.update(g);
        while (r > 0) {
            std::size_t o = DeviceHeap::none;
            std::int64_t c = 0;
            if (!aware) {
                o = ws.heap.min_except(g);
                if (o != DeviceHeap::none) {
                    const std::int64_t a = capacity - eff[o];
                    c = (a > 0 && (a >= min_chunk || r <= a)) ? std::min(r, a) : r;
                }
            } else {
                const double eb = memory->expert_bytes, tb = memory->token_bytes;
                for (std::size_t q = 0; q < P; ++q) {
                    if (q == g) continue;
                    const std::int64_t a = capacity - eff[q];
                    const std::int64_t cq = (a > 0 && (a >= min_chunk || r <= a)) ? std::min(r, a) : r;
                    const std::int64_t fresh = ws.last_received[q] == ee ? 0 : 1;
                    const double need =
                        ws.native_bytes[q] + double(ws.hosted[q] + fresh) * eb + tb * double(eff[q] + cq);
                    if (!(need <= memory->limit[q])) continue;
                    if (o == DeviceHeap::none || eff[q] < eff[o]) {  // ascending q: ties keep the lower id
                        o = q;
                        c = cq;
                    }
                }
            }
            if (o == DeviceHeap::none) {  // nowhere to go: the remainder stays native, beyond capacity
                detail::emit(chunks, first, ee, gg, off, l);
                ws.assigned[g] += r;
                eff[g] += r;
                if (!aware) ws.heap.update(g);
                stats.forced += 1;
                if (aware) stranded.push_back(ee);
                break;
            }
            if (c > capacity - eff[o]) stats.forced += 1;
            detail::emit(chunks, first, ee, std::int64_t(o), off, off + c);
            if (aware && ws.last_received[o] != ee) {
                ws.last_received[o] = ee;
                ws.hosted[o] += 1;
            }
            ws.assigned[o] += c;
            eff[o] += c;
            if (!aware) ws.heap.update(o);
            off += c;
            r -= c;
        }
    }
    return stats;
}

// Plans L layers: loads (L x N, row-major), one capacity per layer, the same placement for all. The chunks of
// layer i go to chunks[offsets[i] .. offsets[i + 1]) (4 int64 per chunk; offsets count chunks), layer by layer;
// `stranded` receives pairs (layer, expert), in layer order, for the remainders the memory-aware variant kept
// native for lack of memory elsewhere. `threads` spread the layers (contiguous blocks per thread); the output
// does not depend on it.
template <class Count, class Index>
void llep_plan_layers(const Count* loads, const Index* placement, std::size_t L, std::size_t N, std::size_t P,
                      const std::int64_t* capacity, std::int64_t min_chunk, const LlepMemory* memory, int threads,
                      std::vector<std::int64_t>& chunks, std::vector<std::int64_t>& offsets,
                      std::vector<std::int64_t>& forced, std::vector<std::int64_t>& stranded) {
    offsets.assign(L + 1, 0);
    forced.assign(L, 0);
    stranded.clear();
    chunks.clear();
    if (threads < 1) threads = 1;
    if (threads > numtk::kMaxThreads) threads = numtk::kMaxThreads;  // as parallel_for_chunks caps it
    if (std::size_t(threads) > L) threads = int(L ? L : 1);
    // Each layer has at most one chunk per expert on its native device, one last piece per expert elsewhere,
    // one filling piece per device it fills (a full device stays full) and forced pieces: N + P is typical.
    const std::size_t guess = 4 * (N + P);
    auto plan_block = [&](std::vector<std::int64_t>& out, std::vector<std::int64_t>& strand, std::size_t lo,
                          std::size_t hi) {
        LlepWorkspace ws;
        std::vector<std::int64_t> experts;
        for (std::size_t i = lo; i < hi; ++i) {
            if (out.capacity() - out.size() < guess) out.reserve(std::max(out.size() + guess, 2 * out.capacity()));
            experts.clear();
            const LlepLayerStats s =
                llep_plan_layer(loads + i * N, placement, N, P, capacity[i], min_chunk, memory, ws, out, experts);
            offsets[i + 1] = std::int64_t(out.size() / 4);  // within `out`; rebased below for threads
            forced[i] = s.forced;
            for (const std::int64_t e : experts) strand.insert(strand.end(), {std::int64_t(i), e});
        }
    };
    if (threads == 1) {
        plan_block(chunks, stranded, 0, L);
        return;
    }
    std::vector<std::vector<std::int64_t>> parts(static_cast<std::size_t>(threads));
    std::vector<std::vector<std::int64_t>> strands(static_cast<std::size_t>(threads));
    numtk::parallel_for_chunks(L, threads, [&](int t, std::size_t lo, std::size_t hi) {
        plan_block(parts[std::size_t(t)], strands[std::size_t(t)], lo, hi);
    });
    std::size_t total = 0;
    for (const auto& part : parts) total += part.size();
    chunks.reserve(total);
    // Thread t handled layers [L t / T, L (t + 1) / T): rebase each part's offsets on what precedes it.
    for (int t = 0; t < threads; ++t) {
        const std::size_t lo = L * std::size_t(t) / std::size_t(threads);
        const std::size_t hi = L * std::size_t(t + 1) / std::size_t(threads);
        const std::int64_t base = std::int64_t(chunks.size() / 4);
        for (std::size_t i = lo; i < hi; ++i) offsets[i + 1] += base;
        chunks.insert(chunks.end(), parts[std::size_t(t)].begin(), parts[std::size_t(t)].end());
        stranded.insert(stranded.end(), strands[std::size_t(t)].begin(), strands[std::size_t(t)].end());
    }
}

}  // namespace numtk::moe
