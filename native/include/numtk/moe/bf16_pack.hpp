// bf16 bit packing of a PuzzleMoE expert pair (Zhao, Wang, Zhang, "PuzzleMoE", ICML 2026, arXiv 2511.04805)
// and the decode-fused mat-vec that runs either expert straight from the packed words.
//
// A merged pair of experts i, j shares one non-negative magnitude W_m per position, stored as bf16 (sign bit
// 15, exponent bits 14..7 with bias 127, mantissa bits 6..0). Merged weights have exponents e in [112, 143]
// (2^-15 <= W_m < 2^17), so e - 112 fits in 5 bits and the four bits 15..12 carry the pair's signs and masks:
//
//   bit   15    14    13    12    11..7      6..0
//         S_i   S_j   M_i   M_j   e - 112    mantissa of W_m
//
// Decode of expert pos (0 = i, 1 = j) from word w, branch-free:
//   magnitude bits = (w & 0x0FFF) + 0x3800          (= ((w & 0x0F80) + (112 << 7)) | (w & 0x7F); the sum
//                                                      is at most 0x47FF, it never reaches bit 15)
//   bf16 of W_pos  = (magnitude | ((w << pos) & 0x8000)) & -((w >> (13 - pos)) & 1)
// and as float32 that bf16 word shifted left by 16.
//
// Encode: the magnitude as bf16 bits (from float32 by round-to-nearest-even, (u + 0x7FFF + ((u >> 16) & 1))
// >> 16 for finite u; from float64 rounded once, directly; bf16 bits as given). Entries whose sign bit is set
// (negative magnitudes, -0.0), NaN, infinities and exponents above 143 are invalid: they are counted and the
// first one is located, and the caller refuses the input. Exponents below 112 (zeros included) are clamped,
// by one of three rules (`Underflow`): saturate to exactly 2^-15; keep the mantissa with field 0 (the
// literal exponent clamp, a value in [2^-15, 2^-14)); or, below 2^-16, clear both masks (the entry decodes
// to 0 for both experts) and saturate the rest.
//
// Mat-vec: Y[b, r] = sum_c W[r, c] X[b, c] for a (d_out, d_in) matrix of words, accumulated in the output
// type T. The same row loop runs the packed words (decode above) and plain bf16 words (w << 16), so the two
// differ only by the decode. For each row and each tile of up to kTile vectors of the batch, every group of
// kLanes words is decoded in registers (16-bit lanes, widened once) and accumulated into kLanes partial sums
// per vector (lane l takes the columns c = l mod kLanes, in increasing c); the columns beyond the last
// multiple of kLanes are summed one by one, and the lanes are added pairwise (8 + 8, 4 + 4, ...) before that
// tail. The order of the floating-point additions is therefore fixed by d_in alone: the result of a row does
// not depend on the thread that computes it or on the other vectors of the batch. Threads split the rows. The
// words are prefetched 4 KiB ahead: with the decode in the loop the hardware prefetcher alone fell short of
// the memory bandwidth (measured at 14336 x 4096, one core: packed 1.2-1.4x plain without, ~1.03x with).
//
// Plain C++17: no Python, no pybind11; no allocation in the kernels (fixed-size arrays on the stack).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "numtk/parallel.hpp"

// Full unrolling of the short lane and tile loops, so that the accumulators stay in vector registers.
#define NUMTK_BF16_PRAGMA(x) _Pragma(#x)
#if defined(__clang__)
#define NUMTK_BF16_UNROLL(n) NUMTK_BF16_PRAGMA(unroll n)
#elif defined(__GNUC__)
#define NUMTK_BF16_UNROLL(n) NUMTK_BF16_PRAGMA(GCC unroll n)
#else
#define NUMTK_BF16_UNROLL(n)
#endif

namespace numtk::moe::bf16 {

inline constexpr std::uint32_t kExponentOffset = 112;  // stored field = e - 112
inline constexpr std::uint32_t kMaxExponent = 143;     // 112 + 31

// How exponents below 112 (including zeros) are stored.
enum class Underflow : int {
    saturate = 0,  // exactly 2^-15 (field 0, mantissa 0); absolute error <= 2^-15
    exponent = 1,  // field 0, the mantissa kept: a value in [2^-15, 2^-14); absolute error < 2^-14
    zero = 2,      // below 2^-16 both masks cleared (decodes to 0), the rest saturated; error <= 2^-16
};

// ---------------------------------------------------------------------------------------------------
// scalar conversions

inline std::uint32_t float_bits(float f) noexcept {
    std::uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

inline float bits_float(std::uint32_t u) noexcept {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

// float32 -> bf16 bits, round to nearest, ties to even. NaN -> the quiet NaN 0x7FC0 with its sign.
inline std::uint16_t round_bf16(float f) noexcept {
    const std::uint32_t u = float_bits(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return std::uint16_t((u >> 16 & 0x8000u) | 0x7FC0u);
    return std::uint16_t((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

// float64 -> bf16 bits rounded once (to nearest, ties to even), including bf16 subnormals and the overflow
// to infinity. NaN -> the quiet NaN 0x7FC0 with its sign.
inline std::uint16_t round_bf16(double v) noexcept {
    std::uint64_t u;
    std::memcpy(&u, &v, sizeof u);
    const std::uint32_t sign = std::uint32_t(u >> 48) & 0x8000u;
    const std::uint64_t a = u & 0x7FFFFFFFFFFFFFFFull;
    if (a > 0x7FF0000000000000ull) return std::uint16_t(sign | 0x7FC0u);
    const std::uint32_t E = std::uint32_t(a >> 52);  // biased double exponent
    if (E >= 1151) return std::uint16_t(sign | 0x7F80u);  // >= 2^128 (and inf): beyond every finite bf16
    if (E >= 897) {  // a normal bf16 range: keep 7 of the 52 fraction bits; a carry may reach infinity
        const std::uint64_t r = (a + 0x00000FFFFFFFFFFFull + ((a >> 45) & 1u)) >> 45;  // (E, 7 bits), rounded
        return std::uint16_t(sign | std::uint32_t(r - (std::uint64_t(896) << 7)));
    }
    // below 2^-126: a multiple of 2^-133 (bf16 subnormals; 128 * 2^-133 is the least normal, 0x0080)
    if (E == 0) return std::uint16_t(sign);  // a double subnormal is far below 2^-134
    const std::uint64_t m = (a & 0x000FFFFFFFFFFFFFull) | 0x0010000000000000ull;  // value = m 2^(E - 1075)
    const std::uint32_t s = 942 - E;  // value / 2^-133 = m / 2^s, s >= 46
    if (s > 54) return std::uint16_t(sign);  // value < 2^-135: rounds to 0 (m < 2^53)
    const std::uint64_t q = m >> s, rem = m & ((std::uint64_t(1) << s) - 1), half = std::uint64_t(1) << (s - 1);
    return std::uint16_t(sign | std::uint32_t(q + ((rem > half) | ((rem == half) & (q & 1u)))));
}

// The bf16 bits of expert pos (0 or 1) of a packed word (0 where its mask is clear). Computed in 16 bits, so
// that vectorised code decodes 16-bit lanes and widens once. For pos 0 the sign is already bit 15, and
// (w & 0x8FFF) + 0x3800 adds to bits 7..13 only (at most 0x47FF below bit 15): magnitude and sign in two
// operations. The mask bit is moved to bit 15 and spread over the word by an arithmetic shift.
template <int Pos>
inline std::uint16_t decode_bits(std::uint16_t w) noexcept {
    static_assert(Pos == 0 || Pos == 1, "expert position is 0 or 1");
    std::uint16_t value;
    if constexpr (Pos == 0)
        value = std::uint16_t((w & 0x8FFFu) + 0x3800u);
    else
        value = std::uint16_t(((w & 0x0FFFu) + 0x3800u) | ((unsigned(w) << 1) & 0x8000u));
    const auto keep = std::uint16_t(std::int16_t(std::uint16_t(unsigned(w) << (2 + Pos))) >> 15);
    return std::uint16_t(value & keep);
}

// The bf16 magnitude bits of a packed word.
inline std::uint32_t magnitude_bits(std::uint32_t w) noexcept { return (w & 0x0FFFu) + 0x3800u; }

// Decoders of the mat-vec: word -> float32 bits.
struct PlainWord {  // a plain bf16 word
    static std::uint32_t f32(std::uint16_t w) noexcept { return std::uint32_t(w) << 16; }
};
template <int Pos>
struct PackedWord {  // expert Pos of a packed word
    static std::uint32_t f32(std::uint16_t w) noexcept { return std::uint32_t(decode_bits<Pos>(w)) << 16; }
};

// ---------------------------------------------------------------------------------------------------
// pack

// The threads an elementwise kernel of n entries runs: at least 1, at most one per kPerThread entries (below
// that, threads cost more than they save) and at most kMaxThreads (the size of the per-thread arrays, and
// parallel_for_chunks's own cap: the two must agree, or a caller asking for more threads than kMaxThreads on
// a large array would read per-thread results that no thread wrote).
inline constexpr std::size_t kPerThread = std::size_t(1) << 18;
inline int kernel_threads(int threads, std::size_t n) noexcept {
    const std::size_t by_size = std::max<std::size_t>(1, n / kPerThread);
    const std::size_t asked = std::size_t(std::min(std::max(threads, 1), kMaxThreads));
    return int(std::min(asked, by_size));
}

struct PackCounts {
    std::size_t clamped = 0;  // entries whose exponent was below 112 (zeros included)
    std::size_t invalid = 0;  // negative (sign bit set), NaN, infinite, or exponent above 143
};

namespace detail {

// (bf16 bits, invalid flag) of one magnitude.
inline void magnitude_word(std::uint16_t m, std::uint32_t& m16, std::uint32_t& bad) noexcept {
    m16 = m;
    bad = 0;
}
inline void magnitude_word(float f, std::uint32_t& m16, std::uint32_t& bad) noexcept {
    const std::uint32_t u = float_bits(f);
    bad = std::uint32_t((u >> 31) | std::uint32_t((u & 0x7FFFFFFFu) >= 0x7F800000u));
    const std::uint32_t v = u & 0x7FFFFFFFu;  // garbage only where bad (then refused)
    m16 = (v + 0x7FFFu + ((v >> 16) & 1u)) >> 16;
}
inline void magnitude_word(double v, std::uint32_t& m16, std::uint32_t& bad) noexcept {
    m16 = round_bf16(v);
    bad = 0;
}

// One packed word; `bad` and `under` returned for the counts.
template <int Mode, class Mag>
inline std::uint16_t pack_one(Mag mag, std::uint8_t mi, std::uint8_t mj, std::uint8_t si, std::uint8_t sj,
                              std::uint32_t& bad, std::uint32_t& under) noexcept {
    std::uint32_t m16, b;
    magnitude_word(mag, m16, b);
    const std::uint32_t e = (m16 >> 7) & 0xFFu;
    b |= (m16 >> 15) | std::uint32_t(e > kMaxExponent);
    const std::uint32_t u = std::uint32_t(e < kExponentOffset);
    const std::uint32_t normal = (((e - kExponentOffset) & 0x1Fu) << 7) | (m16 & 0x7Fu);
    std::uint32_t field;
    if constexpr (Mode == int(Underflow::exponent))
        field = u ? (m16 & 0x7Fu) : normal;
    else
        field = u ? 0u : normal;
    std::uint32_t masks = (std::uint32_t(mi != 0) << 13) | (std::uint32_t(mj != 0) << 12);
    if constexpr (Mode == int(Underflow::zero)) masks = e < kExponentOffset - 1 ? 0u : masks;  // below 2^-16
    bad = b;
    under = u;
    return std::uint16_t((std::uint32_t(si != 0) << 15) | (std::uint32_t(sj != 0) << 14) | masks | field);
}

template <int Mode, class Mag>
PackCounts pack_range(const Mag* mag, const std::uint8_t* mi, const std::uint8_t* mj, const std::uint8_t* si,
                      const std::uint8_t* sj, std::uint16_t* out, std::size_t lo, std::size_t hi) noexcept {
    PackCounts counts;
    constexpr std::size_t kChunk = 1 << 16;  // 32-bit counters per chunk (vectorisable), summed after
    for (std::size_t c0 = lo; c0 < hi; c0 += kChunk) {
        const std::size_t c1 = std::min(hi, c0 + kChunk);
        std::uint32_t n_bad = 0, n_under = 0;
        for (std::size_t i = c0; i < c1; ++i) {
            std::uint32_t b, u;
            out[i] = pack_one<Mode>(mag[i], mi[i], mj[i], si[i], sj[i], b, u);
            n_bad += b;
            n_under += u;
        }
        counts.invalid += n_bad;
        counts.clamped += n_under;
    }
    return counts;
}

}  // namespace detail

// Whether magnitude entry i is invalid (the test pack applies; used to locate the first one).
template <class Mag>
inline bool invalid_magnitude(Mag mag) noexcept {
    std::uint32_t m16, b;
    detail::magnitude_word(mag, m16, b);
    return b || (m16 >> 15) || ((m16 >> 7) & 0xFFu) > kMaxExponent;
}

// Packs n entries: magnitude (float, double or bf16 bits), masks and signs (0 / non-zero bytes) -> out.
// Returns the counts; out is complete even when some entries are invalid (those words are meaningless).
template <class Mag>
PackCounts pack(const Mag* mag, const std::uint8_t* mask_i, const std::uint8_t* mask_j, const std::uint8_t* sign_i,
                const std::uint8_t* sign_j, std::uint16_t* out, std::size_t n, Underflow mode, int threads) {
    static_assert(std::is_same_v<Mag, float> || std::is_same_v<Mag, double> || std::is_same_v<Mag, std::uint16_t>,
                  "magnitudes are float, double or bf16 bits");
    threads = kernel_threads(threads, n);
    PackCounts parts[kMaxThreads];
    parallel_for_chunks(n, threads, [&](int t, std::size_t lo, std::size_t hi) {
        switch (mode) {
            case Underflow::exponent:
                parts[t] = detail::pack_range<1>(mag, mask_i, mask_j, sign_i, sign_j, out, lo, hi);
                break;
            case Underflow::zero:
                parts[t] = detail::pack_range<2>(mag, mask_i, mask_j, sign_i, sign_j, out, lo, hi);
                break;
            default:
                parts[t] = detail::pack_range<0>(mag, mask_i, mask_j, sign_i, sign_j, out, lo, hi);
        }
    });
    PackCounts total;
    for (int t = 0; t < threads; ++t) {
        total.clamped += parts[t].clamped;
        total.invalid += parts[t].invalid;
    }
    return total;
}

// The first invalid magnitude in [0, n), or n if there is none.
template <class Mag>
std::size_t first_invalid(const Mag* mag, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i)
        if (invalid_magnitude(mag[i])) return i;
    return n;
}

// float32 or float64 -> bf16 bits of n entries (round to nearest even, once).
template <class F>
void round_bf16(const F* x, std::uint16_t* out, std::size_t n, int threads) {
    static_assert(std::is_same_v<F, float> || std::is_same_v<F, double>, "float or double input");
    threads = kernel_threads(threads, n);
    parallel_for_chunks(n, threads, [&](int, std::size_t lo, std::size_t hi) {
        for (std::size_t i = lo; i < hi; ++i) out[i] = round_bf16(x[i]);
    });
}

// ---------------------------------------------------------------------------------------------------
// unpack

// Components of n packed words: magnitude bf16 bits, masks and signs as 0/1 bytes.
namespace detail {
// One range of unpack. A function of its own with __restrict pointers: captured by reference in the thread
// lambda, the pointers would be reloaded after every byte store (a uint8_t store may alias anything) and the
// loop would stay scalar (about 3x slower).
inline void unpack_range(const std::uint16_t* __restrict w, std::uint16_t* __restrict magnitude,
                         std::uint8_t* __restrict mask_i, std::uint8_t* __restrict mask_j,
                         std::uint8_t* __restrict sign_i, std::uint8_t* __restrict sign_j, std::size_t lo,
                         std::size_t hi) noexcept {
    for (std::size_t i = lo; i < hi; ++i) {
        const std::uint32_t v = w[i];
        magnitude[i] = std::uint16_t(magnitude_bits(v));
        sign_i[i] = std::uint8_t(v >> 15);
        sign_j[i] = std::uint8_t((v >> 14) & 1u);
        mask_i[i] = std::uint8_t((v >> 13) & 1u);
        mask_j[i] = std::uint8_t((v >> 12) & 1u);
    }
}
}  // namespace detail

inline void unpack(const std::uint16_t* w, std::uint16_t* magnitude, std::uint8_t* mask_i, std::uint8_t* mask_j,
                   std::uint8_t* sign_i, std::uint8_t* sign_j, std::size_t n, int threads) {
    threads = kernel_threads(threads, n);
    parallel_for_chunks(n, threads, [=](int, std::size_t lo, std::size_t hi) {
        detail::unpack_range(w, magnitude, mask_i, mask_j, sign_i, sign_j, lo, hi);
    });
}

// Magnitude only (as bf16 bits, or as T = float / double values).
template <class Out>
void unpack_magnitude(const std::uint16_t* w, Out* out, std::size_t n, int threads) {
    threads = kernel_threads(threads, n);
    parallel_for_chunks(n, threads, [&](int, std::size_t lo, std::size_t hi) {
        for (std::size_t i = lo; i < hi; ++i) {
            const std::uint32_t b = magnitude_bits(w[i]);
            if constexpr (std::is_same_v<Out, std::uint16_t>)
                out[i] = std::uint16_t(b);
            else
                out[i] = Out(bits_float(b << 16));
        }
    });
}

// Expert `expert` (0 or 1) of n packed words: bf16 bits (Out = uint16_t) or values (Out = float / double).
template <class Out>
void unpack_expert(const std::uint16_t* w, Out* out, std::size_t n, int expert, int threads) {
    threads = kernel_threads(threads, n);
    auto run = [&](auto pos) {
        constexpr int P = decltype(pos)::value;
        parallel_for_chunks(n, threads, [&](int, std::size_t lo, std::size_t hi) {
            for (std::size_t i = lo; i < hi; ++i) {
                const std::uint32_t b = decode_bits<P>(w[i]);
                if constexpr (std::is_same_v<Out, std::uint16_t>)
                    out[i] = std::uint16_t(b);
                else
                    out[i] = Out(bits_float(b << 16));
            }
        });
    };
    if (expert == 0)
        run(std::integral_constant<int, 0>{});
    else
        run(std::integral_constant<int, 1>{});
}

// ---------------------------------------------------------------------------------------------------
// mat-vec

inline constexpr std::size_t kLanes = 16;  // partial sums per vector (the lane count of the fixed order)
inline constexpr std::size_t kTile = 4;    // vectors of the batch accumulated together

namespace detail {

// Hint the words kPrefetch ahead into the cache: the hardware prefetcher alone leaves the single-vector
// loop short of the memory bandwidth once the decode adds work (measured: the packed and the plain loops
// both reach the bandwidth with it). Integer arithmetic on the address: past the end it is only a hint.
inline constexpr std::uintptr_t kPrefetch = 4096;  // bytes (2048 words)
inline void prefetch_ahead(const std::uint16_t* p) noexcept {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(p) + kPrefetch));
#else
    (void)p;
#endif
}

// One row against BT vectors: acc[k][l] = sum of w[c] x_k[c] over c < d_main, c = l mod kLanes, in increasing
// c; each group of kLanes words is decoded once for the BT vectors, in registers.
template <std::size_t BT, class T, class Decode>
inline void row_tile(const std::uint16_t* w, std::size_t d_main, const T* const* x, T (*acc)[kLanes]) noexcept {
    T a[BT][kLanes] = {};
    for (std::size_t c = 0; c < d_main; c += kLanes) {
        prefetch_ahead(w + c);
        T v[kLanes];
        NUMTK_BF16_UNROLL(16)
        for (std::size_t l = 0; l < kLanes; ++l) v[l] = T(bits_float(Decode::f32(w[c + l])));
        NUMTK_BF16_UNROLL(4)
        for (std::size_t k = 0; k < BT; ++k) {
            const T* xk = x[k] + c;
            NUMTK_BF16_UNROLL(16)
            for (std::size_t l = 0; l < kLanes; ++l) a[k][l] += v[l] * xk[l];
        }
    }
    for (std::size_t k = 0; k < BT; ++k)
        for (std::size_t l = 0; l < kLanes; ++l) acc[k][l] = a[k][l];
}

// The lanes added pairwise: (l, l + 8), then (l, l + 4), ... .
template <class T>
inline T reduce_lanes(T* a) noexcept {
    for (std::size_t half = kLanes / 2; half > 0; half /= 2)
        for (std::size_t l = 0; l < half; ++l) a[l] += a[l + half];
    return a[0];
}

}  // namespace detail

// Rows [r0, r1) of Y = X W^T: W (d_out, d_in) words decoded by Decode, X (batch, d_in) row-major, Y (batch,
// d_out) row-major. Each row's arithmetic is that of the file comment (fixed order).
template <class T, class Decode>
void matvec_rows(const std::uint16_t* W, std::size_t d_in, const T* X, std::size_t batch, T* Y, std::size_t d_out,
                 std::size_t r0, std::size_t r1) noexcept {
    static_assert(std::is_floating_point_v<T>, "the output is float or double");
    const std::size_t d_main = d_in - d_in % kLanes;
    for (std::size_t r = r0; r < r1; ++r) {
        const std::uint16_t* w = W + r * d_in;
        for (std::size_t b0 = 0; b0 < batch;) {
            const std::size_t nb = batch - b0 >= kTile ? kTile : batch - b0 >= 2 ? 2 : 1;
            const T* xs[kTile];
            T acc[kTile][kLanes];
            for (std::size_t k = 0; k < nb; ++k) xs[k] = X + (b0 + k) * d_in;
            if (nb == kTile)
                detail::row_tile<kTile, T, Decode>(w, d_main, xs, acc);
            else if (nb == 2)
                detail::row_tile<2, T, Decode>(w, d_main, xs, acc);
            else
                detail::row_tile<1, T, Decode>(w, d_main, xs, acc);
            for (std::size_t k = 0; k < nb; ++k) {
                T tail = T(0);
                for (std::size_t c = d_main; c < d_in; ++c) tail += T(bits_float(Decode::f32(w[c]))) * xs[k][c];
                Y[(b0 + k) * d_out + r] = detail::reduce_lanes(acc[k]) + tail;
            }
            b0 += nb;
        }
    }
}

// A rows kernel (so that a binding can pass a variant compiled for another instruction set).
template <class T>
using MatvecRows = void (*)(const std::uint16_t*, std::size_t, const T*, std::size_t, T*, std::size_t, std::size_t,
                            std::size_t);

// Y = X W^T over `threads` threads. The rows go in blocks of about 256 KiB of words, handed out in order from
// an atomic counter, so that a thread slowed down by other work on its core does fewer blocks instead of
// holding the others up (a row's result does not depend on the thread that computes it).
template <class T>
void matvec(MatvecRows<T> rows, const std::uint16_t* W, std::size_t d_out, std::size_t d_in, const T* X,
            std::size_t batch, T* Y, int threads) {
    // a thread should get at least ~256 Ki multiply-adds
    const std::size_t per_row = std::max<std::size_t>(d_in * std::max<std::size_t>(batch, 1), 1);
    const std::size_t most = std::max<std::size_t>(1, d_out * per_row / (std::size_t(1) << 18));
    threads = int(std::min<std::size_t>(std::size_t(std::max(threads, 1)), std::min(most, std::max<std::size_t>(d_out, 1))));
    if (threads == 1) {
        rows(W, d_in, X, batch, Y, d_out, 0, d_out);
        return;
    }
    const std::size_t block = std::max<std::size_t>(1, (std::size_t(1) << 17) / std::max<std::size_t>(d_in, 1));
    std::atomic<std::size_t> next{0};
    parallel_for_chunks(std::size_t(threads), threads, [&](int, std::size_t, std::size_t) {
        for (;;) {
            const std::size_t lo = next.fetch_add(block, std::memory_order_relaxed);
            if (lo >= d_out) break;
            rows(W, d_in, X, batch, Y, d_out, lo, std::min(d_out, lo + block));
        }
    });
}

}  // namespace numtk::moe::bf16
