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
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "numtk/parallel.hpp"

namespace numtk::stats {

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
// Stable LSD radix sort of (key, payload) pairs by key, 11-bit digits, skipping digits on which all
// keys agree. Sorts in place; tmp buffers of the same length are required. `threads` > 1 splits every
// pass into per-thread histograms and scatters.

namespace detail {

constexpr int kDigitBits = 11;
constexpr std::size_t kBuckets = std::size_t(1) << kDigitBits;
constexpr std::size_t kParallelMin = std::size_t(1) << 16;  // below this, threads cost more than they save

template <class K>
constexpr int n_digits() {
    return int((8 * sizeof(K) + kDigitBits - 1) / kDigitBits);
}

template <class K>
inline std::size_t digit(K key, int d) noexcept {
    return std::size_t((key >> (d * kDigitBits)) & K(kBuckets - 1));
}

}  // namespace detail

template <class K, class P>
void radix_sort_pairs(K* keys, P* payload, K* keys_tmp, P* payload_tmp, std::size_t n, int threads) {
    using namespace detail;
    constexpr int D = n_digits<K>();
    if (n < 2) return;
    if (n < kParallelMin) threads = 1;
    threads = std::max(1, threads);

    // One pass for the histograms of every digit (tells which passes can be skipped).
    std::vector<std::size_t> hist(std::size_t(D) * kBuckets * threads, 0);
    parallel_for_chunks(n, threads, [&](int t, std::size_t lo, std::size_t hi) {
        std::size_t* h = hist.data() + std::size_t(t) * D * kBuckets;
        for (std::size_t i = lo; i < hi; ++i) {
            const K k = keys[i];
            for (int d = 0; d < D; ++d) ++h[d * kBuckets + digit(k, d)];
        }
    });

    K* src_k = keys;
    P* src_p = payload;
    K* dst_k = keys_tmp;
    P* dst_p = payload_tmp;
    std::vector<std::size_t> offs(kBuckets * threads);
    for (int d = 0; d < D; ++d) {
        // Skip a digit that is the same for every key.
        bool trivial = false;
        for (std::size_t b = 0; b < kBuckets; ++b) {
            std::size_t tot = 0;
            for (int t = 0; t < threads; ++t) tot += hist[(std::size_t(t) * D + d) * kBuckets + b];
            if (tot == n) { trivial = true; break; }
            if (tot) break;
        }
        if (trivial) continue;
        if (threads > 1) {
            // After an earlier pass the chunks hold other keys: recount this digit per chunk.
            parallel_for_chunks(n, threads, [&](int t, std::size_t lo, std::size_t hi) {
                std::size_t* h = hist.data() + (std::size_t(t) * D + d) * kBuckets;
                std::fill(h, h + kBuckets, std::size_t(0));
                for (std::size_t i = lo; i < hi; ++i) ++h[digit(src_k[i], d)];
            });
        }
        // Exclusive prefix over (bucket, thread): thread t writes bucket b after threads < t.
        std::size_t run = 0;
        for (std::size_t b = 0; b < kBuckets; ++b) {
            for (int t = 0; t < threads; ++t) {
                offs[std::size_t(t) * kBuckets + b] = run;
                run += hist[(std::size_t(t) * D + d) * kBuckets + b];
            }
        }
        parallel_for_chunks(n, threads, [&](int t, std::size_t lo, std::size_t hi) {
            std::size_t* o = offs.data() + std::size_t(t) * kBuckets;
            for (std::size_t i = lo; i < hi; ++i) {
                const std::size_t pos = o[digit(src_k[i], d)]++;
                dst_k[pos] = src_k[i];
                dst_p[pos] = src_p[i];
            }
        });
        std::swap(src_k, dst_k);
        std::swap(src_p, dst_p);
    }
    if (src_k != keys) {
        std::memcpy(keys, src_k, n * sizeof(K));
        std::memcpy(payload, src_p, n * sizeof(P));
    }
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

// Merge sorted a[0:na] and b[0:nb] into out; counts pairs (left element > right element).
template <class V>
inline std::int64_t merge_count(const V* a, std::size_t na, const V* b, std::size_t nb, V* out) noexcept {
    std::int64_t inv = 0;
    std::size_t i = 0, j = 0, k = 0;
    while (i < na && j < nb) {
        if (b[j] < a[i]) {
            inv += std::int64_t(na - i);
            out[k++] = b[j++];
        } else {
            out[k++] = a[i++];
        }
    }
    while (i < na) out[k++] = a[i++];
    while (j < nb) out[k++] = b[j++];
    return inv;
}

// Bottom-up merge sort of a[0:n] (tmp of length n), returning the strict inversions. Result in a.
template <class V>
std::int64_t merge_sort_count(V* a, V* tmp, std::size_t n) noexcept {
    constexpr std::size_t kRun = 32;
    std::int64_t inv = 0;
    for (std::size_t lo = 0; lo < n; lo += kRun) inv += insertion_count(a + lo, std::min(kRun, n - lo));
    V* src = a;
    V* dst = tmp;
    for (std::size_t width = kRun; width < n; width *= 2) {
        for (std::size_t lo = 0; lo < n; lo += 2 * width) {
            const std::size_t mid = std::min(lo + width, n), hi = std::min(lo + 2 * width, n);
            inv += merge_count(src + lo, mid - lo, src + mid, hi - mid, dst + lo);
        }
        std::swap(src, dst);
    }
    if (src != a) std::memcpy(a, src, n * sizeof(V));
    return inv;
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

// Counts the strict inversions of a[0:n]; values must lie in [0, k). The array is scrambled
// (sorted) on return. `tmp` needs n elements when the merge path is taken.
template <class V>
std::int64_t count_inversions(V* a, V* tmp, std::size_t n, std::size_t k, int threads) {
    using namespace detail;
    if (n < 2) return 0;
    if (n < kParallelMin) threads = 1;
    threads = std::max(1, threads);
    if (k <= 1) return 0;
    if (k <= 4096 && threads == 1) return fenwick_count(a, n, k);
    if (threads == 1) return merge_sort_count(a, tmp, n);

    // Parallel: sort T blocks concurrently, then merge pairs of blocks level by level (the pairs of one
    // level run concurrently), counting the cross-block inversions during each merge.
    const std::size_t T = std::size_t(threads);
    std::vector<std::size_t> bounds(T + 1);
    for (std::size_t t = 0; t <= T; ++t) bounds[t] = n * t / T;
    std::vector<std::int64_t> part(T, 0);
    parallel_for_chunks(T, threads, [&](int, std::size_t lo, std::size_t hi) {
        for (std::size_t b = lo; b < hi; ++b) {
            const std::size_t s = bounds[b], e = bounds[b + 1];
            part[b] = (k <= 4096) ? fenwick_count(a + s, e - s, k) : merge_sort_count(a + s, tmp + s, e - s);
            if (k <= 4096) std::sort(a + s, a + e);
        }
    });
    std::int64_t inv = 0;
    for (auto p : part) inv += p;
    V* src = a;
    V* dst = tmp;
    for (std::size_t width = 1; width < T; width *= 2) {
        const std::size_t pairs = (T + 2 * width - 1) / (2 * width);
        std::vector<std::int64_t> cross(pairs, 0);
        parallel_for_chunks(pairs, threads, [&](int, std::size_t lo, std::size_t hi) {
            for (std::size_t q = lo; q < hi; ++q) {
                const std::size_t b0 = q * 2 * width;
                const std::size_t s = bounds[b0], m = bounds[std::min(b0 + width, T)],
                                  e = bounds[std::min(b0 + 2 * width, T)];
                cross[q] = merge_count(src + s, m - s, src + m, e - m, dst + s);
            }
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
    std::vector<std::uint32_t> idx;  // after pass y: original indices in y order
    std::vector<std::uint32_t> yr;   // after pass y: dense y rank of each position in y order
};

template <class TY>
void kendall_pass_y(const TY* y, std::ptrdiff_t y_stride, std::size_t n, int threads, KendallWork& w,
                    KendallCounts& out) {
    using KY = key_t<TY>;
    using U = std::uint32_t;
    w.idx.resize(n);
    w.yr.resize(n);
    if (n == 0) return;
    std::vector<KY> ky(n), ky_tmp(n);
    parallel_for_chunks(n, n < detail::kParallelMin ? 1 : threads, [&](int, std::size_t lo, std::size_t hi) {
        for (std::size_t i = lo; i < hi; ++i) {
            ky[i] = order_key(y[std::ptrdiff_t(i) * y_stride]);
            w.idx[i] = U(i);
        }
    });
    radix_sort_pairs(ky.data(), w.idx.data(), ky_tmp.data(), w.yr.data(), n, threads);
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
    std::vector<KX> kx(n), kx_tmp(n);
    parallel_for_chunks(n, n < detail::kParallelMin ? 1 : threads, [&](int, std::size_t lo, std::size_t hi) {
        for (std::size_t i = lo; i < hi; ++i) kx[i] = order_key(x[std::ptrdiff_t(w.idx[i]) * x_stride]);
    });
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
    kx = {};
    kx_tmp = {};
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
    using KY = key_t<TY>;
    using U = std::uint32_t;
    w.idx.resize(n);
    w.yr.resize(n);
    if (n == 0) return;
    std::vector<KY> ky(n), ky_tmp(n);
    std::vector<U> tmp(n);
    for (std::size_t i = 0; i < n; ++i) {
        ky[i] = order_key(y[std::ptrdiff_t(i) * y_stride]);
        w.idx[i] = U(i);
    }
    radix_sort_pairs(ky.data(), w.idx.data(), ky_tmp.data(), tmp.data(), n, threads);
    U r = 0;
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
    std::vector<KX> kx(n), kx_tmp(n);
    std::vector<std::uint32_t> tmp(n);
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
