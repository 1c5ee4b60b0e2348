// Kendall's tau in O(n log n): order-preserving radix keys, LSD radix sorts, and a strict-inversion
// count (merge sort, or a Fenwick tree when the second variable has few distinct values).
//
// Knight, W. R. (1966). "A computer method for calculating Kendall's tau with ungrouped data".
// JASA 61(314), 436-439.
//
// Pure C++17: no Python, no pybind11. Everything is templated on the element type of the input; inputs
// are read through a (pointer, element stride) pair so strided NumPy views need no copy.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <type_traits>
#include <vector>

#include "numtk/parallel.hpp"

namespace numtk::stats {

// A heap array left uninitialised (std::vector would zero it: a wasted pass over memory that the
// kernels overwrite anyway; first touch then happens in the threads that use the pages).
template <class T>
class Buffer {
  public:
    Buffer() = default;
    explicit Buffer(std::size_t n) : data_(n ? new T[n] : nullptr), size_(n) {}
    T* data() noexcept { return data_.get(); }
    const T* data() const noexcept { return data_.get(); }
    T& operator[](std::size_t i) noexcept { return data_[i]; }
    const T& operator[](std::size_t i) const noexcept { return data_[i]; }
    std::size_t size() const noexcept { return size_; }
    void reset() noexcept { data_.reset(); size_ = 0; }

  private:
    std::unique_ptr<T[]> data_;
    std::size_t size_ = 0;
};

// ---------------------------------------------------------------------------------------------------
// Fork-join over tasks that threads claim one at a time (an atomic counter), the calling thread
// claiming too. On a machine whose cores are busy with other processes, a thread that has been started
// may wait milliseconds (a scheduler tick) before it runs; with a static split the caller would then
// wait for it idle, and a threaded call could take several times the one-thread time. Here the caller
// keeps taking tasks, so a late helper finds none left and the call costs about the one-thread time; the
// caller waits only for tasks a helper has claimed. Helpers are detached and hold the shared state, so
// one that starts after the call has returned touches nothing of it but the counter. A helper that
// cannot be started (std::system_error) makes the call throw std::runtime_error, as parallel_for_chunks.

namespace detail {

struct TaskState {
    std::atomic<std::size_t> next{0};
    std::atomic<std::size_t> done{0};
    std::size_t n = 0;
    void (*call)(void*, std::size_t) = nullptr;
    void* fn = nullptr;  // valid while done < n (the caller is waiting)
    std::mutex mutex;
    std::exception_ptr error;
};

// Helper threads started and not yet finished, over every call (detached helpers may outlive their call).
inline std::atomic<int> live_helpers{0};

inline void run_claimed(TaskState& s) noexcept {
    for (std::size_t i; (i = s.next.fetch_add(1, std::memory_order_relaxed)) < s.n;) {
        try {
            s.call(s.fn, i);
        } catch (...) {
            std::lock_guard<std::mutex> lock(s.mutex);
            if (!s.error) s.error = std::current_exception();
        }
        s.done.fetch_add(1, std::memory_order_acq_rel);
    }
}

}  // namespace detail

// Runs f(i) for every i in [0, ntasks) on up to `threads` threads (the caller included).
template <class F>
void run_tasks(std::size_t ntasks, int threads, F&& f) {
    using Fn = std::remove_reference_t<F>;
    if (ntasks == 0) return;
    const std::size_t helpers = std::min(std::size_t(std::max(threads, 1) - 1), ntasks - 1);
    if (helpers == 0) {
        for (std::size_t i = 0; i < ntasks; ++i) f(i);
        return;
    }
    auto state = std::make_shared<detail::TaskState>();
    state->n = ntasks;
    state->fn = const_cast<void*>(static_cast<const void*>(std::addressof(f)));
    state->call = [](void* fn, std::size_t i) { (*static_cast<Fn*>(fn))(i); };
    std::vector<std::thread> pool;
    pool.reserve(helpers);
    for (std::size_t h = 0; h < helpers; ++h) {
        detail::live_helpers.fetch_add(1);
        try {
            pool.emplace_back([state] {
                detail::run_claimed(*state);
                detail::live_helpers.fetch_sub(1);
            });
        } catch (const std::system_error& e) {
            // Out of threads: as parallel_for_chunks, refuse (the caller asked for more than the process
            // can start). No task starts from here on; the helpers of this call are joined and those of
            // earlier calls that have not run yet waited for, so their stacks are free when this throws.
            detail::live_helpers.fetch_sub(1);
            state->next.exchange(ntasks);
            for (auto& th : pool) th.join();
            while (detail::live_helpers.load() > 0) std::this_thread::yield();
            std::this_thread::sleep_for(std::chrono::milliseconds(1));  // let the last ones exit
            throw std::runtime_error("could not start thread " + std::to_string(h + 2) + " of " +
                                     std::to_string(helpers + 1) + " (" + e.what() + "); pass fewer `workers`");
        }
    }
    for (auto& th : pool) th.detach();
    detail::run_claimed(*state);
    while (state->done.load(std::memory_order_acquire) < ntasks) std::this_thread::yield();
    if (state->error) std::rethrow_exception(state->error);
}

// Runs f(lo, hi) over [0, n) cut into chunks of `chunk` elements, on up to `threads` threads.
template <class F>
void run_chunks(std::size_t n, std::size_t chunk, int threads, F&& f) {
    const std::size_t tasks = (n + chunk - 1) / chunk;
    run_tasks(tasks, threads, [&](std::size_t c) { f(c * chunk, std::min(n, (c + 1) * chunk)); });
}

// ---------------------------------------------------------------------------------------------------
// Order-preserving unsigned keys: a < b (as numbers) iff key(a) < key(b), a == b iff key(a) == key(b).
// -0.0 and +0.0 map to one key (they tie); +-inf are ordinary values. NaN must be removed beforehand.

template <class T>
using key_t = std::conditional_t<(sizeof(T) <= 4), std::uint32_t, std::uint64_t>;

template <class T>
inline key_t<T> order_key(T v) noexcept {
    using K = key_t<T>;
    if constexpr (std::is_floating_point_v<T>) {
        static_assert(sizeof(T) == sizeof(K), "float keys need a same-width unsigned type");
        if (v == T(0)) v = T(0);  // canonicalise -0.0
        K bits;
        std::memcpy(&bits, &v, sizeof bits);
        constexpr K sign = K(1) << (8 * sizeof(K) - 1);
        return (bits & sign) ? K(~bits) : K(bits | sign);
    } else if constexpr (std::is_same_v<T, bool>) {
        return K(v ? 1 : 0);
    } else if constexpr (std::is_signed_v<T>) {
        using S = std::make_signed_t<K>;
        constexpr K sign = K(1) << (8 * sizeof(K) - 1);
        return K(static_cast<K>(static_cast<S>(v)) ^ sign);
    } else {
        return K(v);
    }
}

// ---------------------------------------------------------------------------------------------------
// Stable radix sort of (key, payload) pairs by key.
//
// Large ranges take one most-significant-digit pass on the top 8 bits in which the keys differ (so a
// narrow value range costs no extra passes), then every bucket, small enough to sit in cache, is sorted
// on the remaining bits; buckets that are still large recurse. Small ranges take least-significant-digit
// passes of 8 bits, skipping digits on which all keys agree. Every step is stable, so equal keys keep
// their input order. The top level can run on several threads (per-thread histograms and scatters,
// buckets shared out dynamically).

namespace detail {

constexpr int kDigitBits = 8;                                // top level of the threaded sort
constexpr std::size_t kBuckets = std::size_t(1) << kDigitBits;
constexpr int kMaxDigitBits = 10;                            // serial levels: adaptive width up to this
constexpr std::size_t kMaxBuckets = std::size_t(1) << kMaxDigitBits;
constexpr std::size_t kParallelMin = std::size_t(1) << 16;  // below this, threads cost more than they save
constexpr std::size_t kChunk = std::size_t(1) << 15;        // elements per task of the threaded passes
constexpr std::size_t kCacheRange = std::size_t(1) << 14;   // merge sort: blocks sorted in cache first
constexpr std::size_t kSmallRange = 48;                      // radix: insertion sort below this

template <class K>
inline K low_mask(int bits) noexcept {
    return bits >= int(8 * sizeof(K)) ? ~K(0) : K((K(1) << bits) - 1);
}

template <class K>
inline int highest_bit(K v) noexcept {  // v != 0
    int b = 0;
    while (v >>= 1) ++b;
    return b;
}

// Stable insertion sort of a short range by key.
template <class K, class P>
inline void insertion_sort_pairs(K* ak, P* ap, std::size_t n) noexcept {
    for (std::size_t i = 1; i < n; ++i) {
        const K k = ak[i];
        const P p = ap[i];
        std::size_t j = i;
        while (j > 0 && ak[j - 1] > k) {
            ak[j] = ak[j - 1];
            ap[j] = ap[j - 1];
            --j;
        }
        ak[j] = k;
        ap[j] = p;
    }
}

// Sorts a[0:n) by the low `bits` bits of its keys (the higher bits are equal within the range);
// scratch b; result in a. The digit width grows with the range (up to kMaxDigitBits) so that buckets
// hold a few dozen keys on average; ranges of at most kSmallRange keys are insertion-sorted.
template <class K, class P>
void radix_range(K* ak, P* ap, K* bk, P* bp, std::size_t n, int bits) {
    if (n < 2 || bits <= 0) return;
    if (n <= kSmallRange) {
        insertion_sort_pairs(ak, ap, n);
        return;
    }
    const K mask = low_mask<K>(bits);
    K diff = 0;
    const K k0 = ak[0] & mask;
    for (std::size_t i = 1; i < n; ++i) diff |= (ak[i] & mask) ^ k0;
    if (diff == 0) return;
    const int top = highest_bit(diff) + 1;  // bits that still vary
    const int width = std::min({kMaxDigitBits, top, std::max(4, highest_bit(n) - 4)});
    const int shift = top - width;
    const std::size_t nb = std::size_t(1) << width, dmask = nb - 1;
    std::size_t off[kMaxBuckets + 1];
    std::fill(off, off + nb + 1, std::size_t(0));
    for (std::size_t i = 0; i < n; ++i) ++off[(std::size_t(ak[i] >> shift) & dmask) + 1];
    for (std::size_t d = 0; d < nb; ++d) off[d + 1] += off[d];
    std::size_t pos[kMaxBuckets];
    std::copy(off, off + nb, pos);
    for (std::size_t i = 0; i < n; ++i) {
        const std::size_t p = pos[std::size_t(ak[i] >> shift) & dmask]++;
        bk[p] = ak[i];
        bp[p] = ap[i];
    }
    for (std::size_t d = 0; d < nb; ++d) {
        const std::size_t lo = off[d], m = off[d + 1] - lo;
        if (m == 0) continue;
        radix_range(bk + lo, bp + lo, ak + lo, ap + lo, m, shift);
    }
    std::memcpy(ak, bk, n * sizeof(K));
    std::memcpy(ap, bp, n * sizeof(P));
}

}  // namespace detail

template <class K, class P>
void radix_sort_pairs(K* keys, P* payload, K* keys_tmp, P* payload_tmp, std::size_t n, int threads) {
    using namespace detail;
    constexpr int kBits = int(8 * sizeof(K));
    if (n < 2) return;
    if (n < kParallelMin || threads <= 1) {
        radix_range(keys, payload, keys_tmp, payload_tmp, n, kBits);
        return;
    }
    // Threaded top level: the MSD pass with per-chunk histograms (chunks claimed by the threads; the
    // scatter stays stable because each chunk writes after the chunks before it), then buckets shared out.
    const std::size_t C = (n + kChunk - 1) / kChunk;
    std::vector<K> diffs(C, 0);
    const K k0 = keys[0];
    run_chunks(n, kChunk, threads, [&](std::size_t lo, std::size_t hi) {
        K d = 0;
        for (std::size_t i = lo; i < hi; ++i) d |= keys[i] ^ k0;
        diffs[lo / kChunk] = d;
    });
    K diff = 0;
    for (K d : diffs) diff |= d;
    if (diff == 0) return;
    const int shift = std::max(0, highest_bit(diff) + 1 - kDigitBits);
    std::vector<std::size_t> hist(C * kBuckets, 0);
    run_chunks(n, kChunk, threads, [&](std::size_t lo, std::size_t hi) {
        std::size_t* h = hist.data() + (lo / kChunk) * kBuckets;
        for (std::size_t i = lo; i < hi; ++i) ++h[std::size_t(keys[i] >> shift) & (kBuckets - 1)];
    });
    std::vector<std::size_t> off(kBuckets + 1, 0);
    std::size_t run = 0;
    for (std::size_t b = 0; b < kBuckets; ++b) {  // hist becomes each chunk's first position per bucket
        off[b] = run;
        for (std::size_t c = 0; c < C; ++c) {
            const std::size_t h = hist[c * kBuckets + b];
            hist[c * kBuckets + b] = run;
            run += h;
        }
    }
    off[kBuckets] = run;
    run_chunks(n, kChunk, threads, [&](std::size_t lo, std::size_t hi) {
        std::size_t* p = hist.data() + (lo / kChunk) * kBuckets;
        for (std::size_t i = lo; i < hi; ++i) {
            const std::size_t q = p[std::size_t(keys[i] >> shift) & (kBuckets - 1)]++;
            keys_tmp[q] = keys[i];
            payload_tmp[q] = payload[i];
        }
    });
    run_tasks(kBuckets, threads, [&](std::size_t b) {
        const std::size_t lo = off[b], m = off[b + 1] - lo;
        if (m == 0) return;
        radix_range(keys_tmp + lo, payload_tmp + lo, keys + lo, payload + lo, m, shift);
        std::memcpy(keys + lo, keys_tmp + lo, m * sizeof(K));
        std::memcpy(payload + lo, payload_tmp + lo, m * sizeof(P));
    });
}

// ---------------------------------------------------------------------------------------------------
// Strict inversions: #{i < j : a[i] > a[j]}.

namespace detail {

// Insertion sort of a short run, counting the strict inversions it removes.
template <class V>
inline std::int64_t insertion_count(V* a, std::size_t n) noexcept {
    std::int64_t inv = 0;
    for (std::size_t i = 1; i < n; ++i) {
        const V v = a[i];
        std::size_t j = i;
        while (j > 0 && a[j - 1] > v) {
            a[j] = a[j - 1];
            --j;
        }
        inv += std::int64_t(i - j);
        a[j] = v;
    }
    return inv;
}

// Merge sorted a[0:na] and b[0:nb] into out, counting the pairs (left element > right element).
// Branch-free inner loop: the comparison selects, it does not jump.
template <class V>
inline std::int64_t merge_count(const V* a, std::size_t na, const V* b, std::size_t nb, V* out) noexcept {
    std::int64_t inv = 0;
    std::size_t i = 0, j = 0, k = 0;
    while (i < na && j < nb) {
        const V av = a[i], bv = b[j];
        const bool take_b = bv < av;
        out[k++] = take_b ? bv : av;
        inv += take_b ? std::int64_t(na - i) : 0;
        j += take_b;
        i += !take_b;
    }
    while (i < na) out[k++] = a[i++];
    while (j < nb) out[k++] = b[j++];
    return inv;
}

// Bottom-up merge sort of a[0:n) over widths [width, n) (runs of `width` already sorted); result in a.
template <class V>
std::int64_t merge_levels(V* a, V* tmp, std::size_t n, std::size_t width) noexcept {
    std::int64_t inv = 0;
    V* src = a;
    V* dst = tmp;
    for (; width < n; width *= 2) {
        for (std::size_t lo = 0; lo < n; lo += 2 * width) {
            const std::size_t mid = std::min(lo + width, n), hi = std::min(lo + 2 * width, n);
            inv += merge_count(src + lo, mid - lo, src + mid, hi - mid, dst + lo);
        }
        std::swap(src, dst);
    }
    if (src != a) std::memcpy(a, src, n * sizeof(V));
    return inv;
}

// Merge sort of a[0:n) counting strict inversions (tmp of length n); cache-blocked: blocks of
// kCacheRange are sorted completely before the levels that span the whole array. Result in a.
template <class V>
std::int64_t merge_sort_count(V* a, V* tmp, std::size_t n) noexcept {
    constexpr std::size_t kRun = 32;
    std::int64_t inv = 0;
    for (std::size_t blo = 0; blo < n; blo += kCacheRange) {
        const std::size_t m = std::min(kCacheRange, n - blo);
        for (std::size_t lo = 0; lo < m; lo += kRun) inv += insertion_count(a + blo + lo, std::min(kRun, m - lo));
        inv += merge_levels(a + blo, tmp + blo, m, kRun);
    }
    return inv + merge_levels(a, tmp, n, kCacheRange);
}

// Strict inversions of values in [0, k) with a Fenwick tree (fast when k is small).
template <class V>
std::int64_t fenwick_count(const V* a, std::size_t n, std::size_t k) {
    std::vector<std::int64_t> tree(k + 1, 0);
    std::int64_t inv = 0;
    for (std::size_t i = 0; i < n; ++i) {
        // #earlier <= a[i]
        std::int64_t le = 0;
        for (std::size_t p = std::size_t(a[i]) + 1; p > 0; p -= p & (~p + 1)) le += tree[p];
        inv += std::int64_t(i) - le;
        for (std::size_t p = std::size_t(a[i]) + 1; p <= k; p += p & (~p + 1)) ++tree[p];
    }
    return inv;
}

}  // namespace detail

// Counts the strict inversions of a[0:n); values must lie in [0, k), or k = 0 for values of any size
// (then a merge sort is always used). The array may be reordered on return. `tmp` needs n elements when the merge path is taken.
template <class V>
std::int64_t count_inversions(V* a, V* tmp, std::size_t n, std::size_t k, int threads) {
    using namespace detail;
    if (n < 2) return 0;
    if (n < kParallelMin) threads = 1;
    threads = std::max(1, threads);
    if (k == 1) return 0;
    const bool small_range = k != 0 && k <= 4096;
    if (small_range && threads == 1) return fenwick_count(a, n, k);
    if (threads == 1) return merge_sort_count(a, tmp, n);

    const std::size_t T = std::size_t(threads);
    std::vector<std::size_t> bounds(T + 1);
    for (std::size_t t = 0; t <= T; ++t) bounds[t] = n * t / T;
    std::vector<std::int64_t> part(T, 0);
    if (small_range) {
        // Few distinct values: a Fenwick count inside each block, and the cross-block pairs from the
        // blocks' value histograms (no sorting at all).
        std::vector<std::int64_t> hist(T * k, 0);
        run_tasks(T, threads, [&](std::size_t b) {
            part[b] = fenwick_count(a + bounds[b], bounds[b + 1] - bounds[b], k);
            std::int64_t* h = hist.data() + b * k;
            for (std::size_t i = bounds[b]; i < bounds[b + 1]; ++i) ++h[std::size_t(a[i])];
        });
        std::int64_t inv = 0;
        for (auto p : part) inv += p;
        std::vector<std::int64_t> earlier(k, 0);  // value counts of the blocks before b
        for (std::size_t b = 1; b < T; ++b) {
            const std::int64_t* prev = hist.data() + (b - 1) * k;
            for (std::size_t v = 0; v < k; ++v) earlier[v] += prev[v];
            std::int64_t greater = 0;  // earlier elements with value > v, for v from the top down
            const std::int64_t* h = hist.data() + b * k;
            for (std::size_t v = k; v-- > 0;) {
                inv += h[v] * greater;
                greater += earlier[v];
            }
        }
        return inv;
    }
    // Sort T blocks concurrently, then merge pairs of blocks level by level (the pairs of one level run
    // concurrently), counting the cross-block inversions during each merge.
    run_tasks(T, threads, [&](std::size_t b) {
        part[b] = merge_sort_count(a + bounds[b], tmp + bounds[b], bounds[b + 1] - bounds[b]);
    });
    std::int64_t inv = 0;
    for (auto p : part) inv += p;
    V* src = a;
    V* dst = tmp;
    for (std::size_t width = 1; width < T; width *= 2) {
        const std::size_t pairs = (T + 2 * width - 1) / (2 * width);
        std::vector<std::int64_t> cross(pairs, 0);
        run_tasks(pairs, threads, [&](std::size_t q) {
            const std::size_t b0 = q * 2 * width;
            const std::size_t s = bounds[b0], m = bounds[std::min(b0 + width, T)],
                              e = bounds[std::min(b0 + 2 * width, T)];
            cross[q] = merge_count(src + s, m - s, src + m, e - m, dst + s);
        });
        for (auto c : cross) inv += c;
        std::swap(src, dst);
    }
    if (src != a) std::memcpy(a, src, n * sizeof(V));
    return inv;
}

// ---------------------------------------------------------------------------------------------------
// The whole Kendall pass.

struct KendallCounts {
    std::int64_t discordant = 0;  // pairs strictly discordant in both coordinates
    std::int64_t xtie = 0;        // pairs tied in x (whatever y)
    std::int64_t ytie = 0;        // pairs tied in y (whatever x)
    std::int64_t ntie = 0;        // pairs tied in both
    std::int64_t x_distinct = 0;  // number of distinct x values
    std::int64_t y_distinct = 0;
    std::vector<std::int64_t> x_groups;  // sizes (> 1) of the tie groups of x, ascending value order
    std::vector<std::int64_t> y_groups;
};

namespace detail {

inline std::int64_t pairs_of(std::int64_t t) noexcept { return t * (t - 1) / 2; }

// Sorted keys -> dense ranks into `rank_out` (position order), tie-group sizes and the distinct count.
template <class K>
std::int64_t runs_of_sorted(const K* keys, std::size_t n, std::vector<std::int64_t>& groups,
                            std::int64_t& pair_ties) {
    std::int64_t distinct = 0;
    pair_ties = 0;
    std::size_t i = 0;
    while (i < n) {
        std::size_t j = i + 1;
        while (j < n && keys[j] == keys[i]) ++j;
        const std::int64_t t = std::int64_t(j - i);
        if (t > 1) {
            groups.push_back(t);
            pair_ties += pairs_of(t);
        }
        ++distinct;
        i = j;
    }
    return distinct;
}

}  // namespace detail

// The pass runs in two halves so that x and y may have different element types without instantiating
// every (TX, TY) pair: kendall_pass_y sorts y (radix, carrying the original index) and turns it into dense
// ranks; kendall_pass_x stably sorts the (x key, y rank) pairs by x, so the y ranks appear in
// lexicographic (x, y) order, and counts their strict inversions: the discordant pairs. Requires n < 2^32.
struct KendallWork {
    Buffer<std::uint32_t> idx;  // after pass y: original indices in y order
    Buffer<std::uint32_t> yr;   // after pass y: dense y rank of each position in y order
};

namespace detail {

// Order-preserving keys of y, radix-sorted, carrying the original index into w.idx (w.yr is scratch).
template <class TY>
Buffer<key_t<TY>> sorted_keys_with_index(const TY* y, std::ptrdiff_t y_stride, std::size_t n, int threads,
                                         KendallWork& w) {
    using KY = key_t<TY>;
    w.idx = Buffer<std::uint32_t>(n);
    w.yr = Buffer<std::uint32_t>(n);
    Buffer<KY> ky(n), ky_tmp(n);
    run_chunks(n, kChunk, n < kParallelMin ? 1 : threads, [&](std::size_t lo, std::size_t hi) {
        for (std::size_t i = lo; i < hi; ++i) {
            ky[i] = order_key(y[std::ptrdiff_t(i) * y_stride]);
            w.idx[i] = std::uint32_t(i);
        }
    });
    radix_sort_pairs(ky.data(), w.idx.data(), ky_tmp.data(), w.yr.data(), n, threads);
    return ky;
}

}  // namespace detail

template <class TY>
void kendall_pass_y(const TY* y, std::ptrdiff_t y_stride, std::size_t n, int threads, KendallWork& w,
                    KendallCounts& out) {
    using U = std::uint32_t;
    if (n == 0) return;
    const auto ky = detail::sorted_keys_with_index(y, y_stride, n, threads, w);
    out.y_distinct = detail::runs_of_sorted(ky.data(), n, out.y_groups, out.ytie);
    U r = 0;
    w.yr[0] = 0;
    for (std::size_t i = 1; i < n; ++i) {
        if (ky[i] != ky[i - 1]) ++r;
        w.yr[i] = r;
    }
}

template <class TX>
void kendall_pass_x(const TX* x, std::ptrdiff_t x_stride, std::size_t n, int threads, KendallWork& w,
                    KendallCounts& out) {
    using KX = key_t<TX>;
    if (n == 0) return;
    Buffer<KX> kx(n), kx_tmp(n);
    run_chunks(n, detail::kChunk, n < detail::kParallelMin ? 1 : threads, [&](std::size_t lo, std::size_t hi) {
        for (std::size_t i = lo; i < hi; ++i) kx[i] = order_key(x[std::ptrdiff_t(w.idx[i]) * x_stride]);
    });
    if (out.y_distinct == std::int64_t(n)) {
        // No ties in y: every pair is ordered strictly by y, so the discordant pairs are the strict
        // inversions of the x keys in y order, counted while merge-sorting them (no second radix sort).
        out.discordant = count_inversions(kx.data(), kx_tmp.data(), n, 0, threads);
        out.x_distinct = detail::runs_of_sorted(kx.data(), n, out.x_groups, out.xtie);
        out.ntie = 0;
        return;
    }
    radix_sort_pairs(kx.data(), w.yr.data(), kx_tmp.data(), w.idx.data(), n, threads);
    out.x_distinct = detail::runs_of_sorted(kx.data(), n, out.x_groups, out.xtie);
    // Joint ties: runs of equal (x, y) in the lexicographic order.
    std::size_t i = 0;
    while (i < n) {
        std::size_t j = i + 1;
        while (j < n && kx[j] == kx[i] && w.yr[j] == w.yr[i]) ++j;
        out.ntie += detail::pairs_of(std::int64_t(j - i));
        i = j;
    }
    kx.reset();
    kx_tmp.reset();
    out.discordant = count_inversions(w.yr.data(), w.idx.data(), n, std::size_t(out.y_distinct), threads);
}

template <class TX, class TY>
KendallCounts kendall_counts(const TX* x, std::ptrdiff_t x_stride, const TY* y, std::ptrdiff_t y_stride,
                             std::size_t n, int threads) {
    KendallCounts out;
    KendallWork w;
    kendall_pass_y(y, y_stride, n, threads, w, out);
    kendall_pass_x(x, x_stride, n, threads, w, out);
    return out;
}

// Lexicographic (x, y) order with dense ranks, for per-point statistics. Same two halves as above:
// lexsort_pass_y leaves the y order in w.idx and each point's dense y rank in w.yr (indexed by the
// original position); lexsort_pass_x writes perm[i] (original index of the i-th point in (x, y) order)
// and its 0-based dense ranks xr[i], yr[i].
template <class TY>
void lexsort_pass_y(const TY* y, std::ptrdiff_t y_stride, std::size_t n, int threads, KendallWork& w) {
    if (n == 0) return;
    const auto ky = detail::sorted_keys_with_index(y, y_stride, n, threads, w);
    std::uint32_t r = 0;
    for (std::size_t i = 0; i < n; ++i) {
        if (i > 0 && ky[i] != ky[i - 1]) ++r;
        w.yr[w.idx[i]] = r;
    }
}

template <class TX>
void lexsort_pass_x(const TX* x, std::ptrdiff_t x_stride, std::size_t n, int threads, KendallWork& w,
                    std::int64_t* perm, std::int64_t* xr, std::int64_t* yr) {
    using KX = key_t<TX>;
    if (n == 0) return;
    Buffer<KX> kx(n), kx_tmp(n);
    Buffer<std::uint32_t> tmp(n);
    for (std::size_t i = 0; i < n; ++i) kx[i] = order_key(x[std::ptrdiff_t(w.idx[i]) * x_stride]);
    radix_sort_pairs(kx.data(), w.idx.data(), kx_tmp.data(), tmp.data(), n, threads);
    std::int64_t r = 0;
    for (std::size_t i = 0; i < n; ++i) {
        if (i > 0 && kx[i] != kx[i - 1]) ++r;
        perm[i] = std::int64_t(w.idx[i]);
        xr[i] = r;
        yr[i] = std::int64_t(w.yr[w.idx[i]]);
    }
}

}  // namespace numtk::stats
