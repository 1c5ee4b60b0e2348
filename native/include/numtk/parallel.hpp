// Minimal fork-join helper shared by the kernels: split [0, n) into `threads` contiguous chunks and run
// f(thread_index, lo, hi) on each, the calling thread taking chunk 0. Pure C++17, no Python.
//
// The thread count is capped (kMaxThreads, and one chunk per item), and a thread that cannot be started
// (std::system_error: the process or the machine is out of threads) never leaves a joinable std::thread
// behind: the threads that did start are joined, then a std::runtime_error says so, which the bindings
// turn into a Python exception. Exceptions thrown by f in any thread reach the caller the same way.
#pragma once

#include <cstddef>
#include <exception>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace numtk {

// The most threads one call starts, whatever it is asked for (the Python layer refuses more before).
inline constexpr int kMaxThreads = 1024;

// Number of hardware threads, at least 1.
inline int hardware_threads() noexcept {
    const unsigned h = std::thread::hardware_concurrency();
    return h ? int(h) : 1;
}

template <class F>
void parallel_for_chunks(std::size_t n, int threads, F&& f) {
    if (threads < 1) threads = 1;
    if (threads > kMaxThreads) threads = kMaxThreads;
    if (std::size_t(threads) > n) threads = int(n ? n : 1);
    if (threads == 1) {
        f(0, std::size_t(0), n);
        return;
    }
    std::vector<std::thread> pool;
    std::vector<std::exception_ptr> errors(static_cast<std::size_t>(threads));
    pool.reserve(std::size_t(threads) - 1);
    std::string start_error;
    for (int t = 1; t < threads; ++t) {
        try {
            pool.emplace_back([&, t] {
                try {
                    f(t, n * std::size_t(t) / std::size_t(threads), n * std::size_t(t + 1) / std::size_t(threads));
                } catch (...) {
                    errors[std::size_t(t)] = std::current_exception();
                }
            });
        } catch (const std::system_error& e) {
            start_error = "could not start thread " + std::to_string(t + 1) + " of " + std::to_string(threads) +
                          " (" + e.what() + "); pass fewer `workers`";
            break;
        }
    }
    if (start_error.empty()) {
        try {
            f(0, std::size_t(0), n / std::size_t(threads));
        } catch (...) {
            errors[0] = std::current_exception();
        }
    }
    for (auto& th : pool) th.join();
    if (!start_error.empty()) throw std::runtime_error(start_error);
    for (auto& e : errors)
        if (e) std::rethrow_exception(e);  // worker exceptions reach the caller
}

}  // namespace numtk
