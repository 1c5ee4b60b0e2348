// Minimal fork-join helper shared by the kernels: split [0, n) into `threads` contiguous chunks and run
// f(thread_index, lo, hi) on each, the calling thread taking chunk 0. Pure C++17, no Python.
#pragma once

#include <cstddef>
#include <exception>
#include <thread>
#include <vector>

namespace numtk {

// Number of hardware threads, at least 1.
inline int hardware_threads() noexcept {
    const unsigned h = std::thread::hardware_concurrency();
    return h ? int(h) : 1;
}

template <class F>
void parallel_for_chunks(std::size_t n, int threads, F&& f) {
    if (threads < 1) threads = 1;
    if (std::size_t(threads) > n) threads = int(n ? n : 1);
    if (threads == 1) {
        f(0, std::size_t(0), n);
        return;
    }
    std::vector<std::thread> pool;
    std::vector<std::exception_ptr> errors(static_cast<std::size_t>(threads));
    pool.reserve(std::size_t(threads) - 1);
    for (int t = 1; t < threads; ++t) {
        pool.emplace_back([&, t] {
            try {
                f(t, n * std::size_t(t) / std::size_t(threads), n * std::size_t(t + 1) / std::size_t(threads));
            } catch (...) {
                errors[std::size_t(t)] = std::current_exception();
            }
        });
    }
    try {
        f(0, std::size_t(0), n / std::size_t(threads));
    } catch (...) {
        errors[0] = std::current_exception();
    }
    for (auto& th : pool) th.join();
    for (auto& e : errors)
        if (e) std::rethrow_exception(e);  // worker exceptions reach the caller
}

}  // namespace numtk
