// Bindings of the bf16 packing kernels of PuzzleMoE (native/include/numtk/moe/bf16_pack.hpp). The Python layer
// (numtk/moe/_bf16.py) validates first (dtypes, shapes, mask values, contiguity); these re-check what could
// corrupt memory (dtypes, C-contiguity, sizes, aliasing of the output) and release the GIL while the kernels
// run. Nothing here copies an input: every array arrives C-contiguous in the dtype the kernel reads.
//
// The mat-vec rows are compiled twice: for the baseline instruction set of the build and, on x86-64 with GCC,
// for AVX2 + FMA, chosen at run time when the CPU has both (the loops are written for the auto-vectoriser;
// `flatten` keeps every AVX2 instruction inside the variant). Both variants run the same order of additions;
// with FMA the products are not rounded before they are added, so results can differ between the two in the
// last bits (never between thread counts).
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "numtk/bindings.hpp"
#include "numtk/moe/bf16_pack.hpp"

namespace py = pybind11;

namespace {

namespace bf = numtk::moe::bf16;
using numtk::bindings::need;

using u16array = py::array_t<std::uint16_t, py::array::c_style>;
using u8array = py::array_t<std::uint8_t, py::array::c_style>;

std::vector<py::ssize_t> shape_of(const py::array& a) { return std::vector<py::ssize_t>(a.shape(), a.shape() + a.ndim()); }

std::size_t size_of(const py::array& a) { return static_cast<std::size_t>(a.size()); }

bool same_shape(const py::array& a, const py::array& b) {
    if (a.ndim() != b.ndim()) return false;
    for (py::ssize_t k = 0; k < a.ndim(); ++k)
        if (a.shape(k) != b.shape(k)) return false;
    return true;
}

// A C-contiguous array of native T (checked, not converted).
template <class T>
bool is_c_array(const py::array& a) {
    return py::isinstance<py::array_t<T>>(a) && (a.flags() & py::array::c_style);
}

// Every array a kernel reads or writes must be aligned for its dtype (a view at an odd byte offset is not):
// the kernels dereference typed pointers. The Python layer copies small inputs and refuses the rest; this is
// the last line.
void need_aligned(const py::array& a, const char* name) {
    if (!(a.flags() & py::detail::npy_api::NPY_ARRAY_ALIGNED_))
        throw std::invalid_argument(std::string("`") + name + "` must be aligned for its dtype (a view at an odd byte "
                                    "offset is not); pass numpy.require(" + name + ", requirements='CA')");
}

// ---------------------------------------------------------------------------------------------------
// pack, unpack

template <class Mag>
py::tuple pack_impl(const py::array& magnitude, const u8array& mi, const u8array& mj, const u8array& si,
                    const u8array& sj, int mode, int threads) {
    for (const auto* m : {&mi, &mj, &si, &sj})
        need(same_shape(*m, magnitude), "`mask_i`, `mask_j`, `sign_i` and `sign_j` must have the shape of `magnitude`");
    need_aligned(magnitude, "magnitude");
    const std::size_t n = size_of(magnitude);
    u16array out(shape_of(magnitude));
    const Mag* pm = static_cast<const Mag*>(magnitude.data());
    std::uint16_t* po = out.mutable_data();
    bf::PackCounts counts;
    std::size_t first = n;
    {
        py::gil_scoped_release release;
        counts = bf::pack(pm, mi.data(), mj.data(), si.data(), sj.data(), po, n, bf::Underflow(mode), threads);
        if (counts.invalid) first = bf::first_invalid(pm, n);
    }
    return py::make_tuple(out, counts.clamped, counts.invalid, first);
}

py::tuple pack(const py::array& magnitude, const u8array& mi, const u8array& mj, const u8array& si,
               const u8array& sj, int mode, int threads) {
    need(mode >= 0 && mode <= 2, "`underflow` must be 0 (saturate), 1 (exponent) or 2 (zero)");
    threads = numtk::bindings::check_threads(threads);
    if (is_c_array<float>(magnitude)) return pack_impl<float>(magnitude, mi, mj, si, sj, mode, threads);
    if (is_c_array<double>(magnitude)) return pack_impl<double>(magnitude, mi, mj, si, sj, mode, threads);
    if (is_c_array<std::uint16_t>(magnitude))
        return pack_impl<std::uint16_t>(magnitude, mi, mj, si, sj, mode, threads);
    throw py::type_error("`magnitude` must be a C-contiguous float32, float64 or uint16 (bf16 bits) array");
}

template <class F>
u16array round_impl(const py::array& x, int threads) {
    need_aligned(x, "x");
    u16array out(shape_of(x));
    const F* px = static_cast<const F*>(x.data());
    std::uint16_t* po = out.mutable_data();
    const std::size_t n = size_of(x);
    {
        py::gil_scoped_release release;
        bf::round_bf16(px, po, n, threads);
    }
    return out;
}

u16array round_bf16(const py::array& x, int threads) {
    threads = numtk::bindings::check_threads(threads);
    if (is_c_array<float>(x)) return round_impl<float>(x, threads);
    if (is_c_array<double>(x)) return round_impl<double>(x, threads);
    throw py::type_error("`x` must be a C-contiguous float32 or float64 array");
}

py::array bool_like(const py::array& a) { return py::array(py::dtype::of<bool>(), shape_of(a)); }

std::uint8_t* bytes_of(py::array& a) { return static_cast<std::uint8_t*>(a.mutable_data()); }

py::tuple unpack(const u16array& packed, int threads) {
    threads = numtk::bindings::check_threads(threads);
    need_aligned(packed, "packed");
    u16array magnitude(shape_of(packed));
    py::array mi = bool_like(packed), mj = bool_like(packed), si = bool_like(packed), sj = bool_like(packed);
    std::uint16_t* pm = magnitude.mutable_data();
    std::uint8_t *a = bytes_of(mi), *b = bytes_of(mj), *c = bytes_of(si), *d = bytes_of(sj);
    const std::uint16_t* pw = packed.data();
    const std::size_t n = size_of(packed);
    {
        py::gil_scoped_release release;
        bf::unpack(pw, pm, a, b, c, d, n, threads);
    }
    return py::make_tuple(magnitude, mi, mj, si, sj);
}

template <class Out>
py::array unpack_one(const u16array& packed, int expert, int threads) {
    py::array_t<Out> out(shape_of(packed));
    Out* po = out.mutable_data();
    const std::uint16_t* pw = packed.data();
    const std::size_t n = size_of(packed);
    {
        py::gil_scoped_release release;
        if (expert < 0)
            bf::unpack_magnitude(pw, po, n, threads);
        else
            bf::unpack_expert(pw, po, n, expert, threads);
    }
    return out;
}

// expert -1: the magnitude; 0 or 1: that expert. as: 0 bf16 bits, 1 float32, 2 float64.
py::array unpack_expert(const u16array& packed, int expert, int as, int threads) {
    need(expert >= -1 && expert <= 1, "`expert` must be 0 or 1");
    need(as >= 0 && as <= 2, "`as` must be 0 (bits), 1 (float32) or 2 (float64)");
    threads = numtk::bindings::check_threads(threads);
    need_aligned(packed, "packed");
    if (as == 1) return unpack_one<float>(packed, expert, threads);
    if (as == 2) return unpack_one<double>(packed, expert, threads);
    return unpack_one<std::uint16_t>(packed, expert, threads);
}

// ---------------------------------------------------------------------------------------------------
// mat-vec

// The rows kernel of word kind D (0: plain bf16, 1: expert 0 of packed words, 2: expert 1), baseline build.
template <class T, int D>
void rows_baseline(const std::uint16_t* W, std::size_t d_in, const T* X, std::size_t batch, T* Y, std::size_t d_out,
                   std::size_t r0, std::size_t r1) {
    if constexpr (D == 0)
        bf::matvec_rows<T, bf::PlainWord>(W, d_in, X, batch, Y, d_out, r0, r1);
    else
        bf::matvec_rows<T, bf::PackedWord<D - 1>>(W, d_in, X, batch, Y, d_out, r0, r1);
}

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
template <class T, int D>
__attribute__((target("avx2,fma"), flatten)) void rows_avx2(const std::uint16_t* W, std::size_t d_in, const T* X,
                                                            std::size_t batch, T* Y, std::size_t d_out,
                                                            std::size_t r0, std::size_t r1) {
    if constexpr (D == 0)
        bf::matvec_rows<T, bf::PlainWord>(W, d_in, X, batch, Y, d_out, r0, r1);
    else
        bf::matvec_rows<T, bf::PackedWord<D - 1>>(W, d_in, X, batch, Y, d_out, r0, r1);
}

bool cpu_has_avx2_fma() {
    static const bool yes = [] {
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    }();
    return yes;
}

template <class T, int D>
bf::MatvecRows<T> rows_kernel(int isa) {
    return (isa == 1 && cpu_has_avx2_fma()) ? &rows_avx2<T, D> : &rows_baseline<T, D>;
}
#else
bool cpu_has_avx2_fma() { return false; }

template <class T, int D>
bf::MatvecRows<T> rows_kernel(int) {
    return &rows_baseline<T, D>;
}
#endif

template <class T>
bf::MatvecRows<T> rows_for(int kind, int isa) {
    if (kind == 1) return rows_kernel<T, 1>(isa);
    if (kind == 2) return rows_kernel<T, 2>(isa);
    return rows_kernel<T, 0>(isa);
}

bool overlaps(const py::array& a, const py::array& b) {
    const auto* a0 = static_cast<const char*>(a.data());
    const auto* b0 = static_cast<const char*>(b.data());
    const auto* a1 = a0 + a.nbytes();
    const auto* b1 = b0 + b.nbytes();
    return a.nbytes() && b.nbytes() && a0 < b1 && b0 < a1;
}

template <class T>
void matvec_impl(const u16array& W, const py::array& x, py::array& out, int kind, int threads, int isa) {
    need(W.ndim() == 2, "`packed` must be 2-D (d_out, d_in)");
    const std::size_t d_out = std::size_t(W.shape(0)), d_in = std::size_t(W.shape(1));
    need(x.ndim() == 2 && std::size_t(x.shape(1)) == d_in, "`x` must be 2-D (batch, d_in) with d_in = packed.shape[1]");
    const std::size_t batch = std::size_t(x.shape(0));
    need(is_c_array<T>(out) && out.writeable(), "`out` must be a writeable C-contiguous array of the dtype of `x`");
    need(out.ndim() == 2 && std::size_t(out.shape(0)) == batch && std::size_t(out.shape(1)) == d_out,
         "`out` must have shape (batch, d_out)");
    need(!overlaps(out, x) && !overlaps(out, W), "`out` must not share memory with `packed` or `x`");
    need_aligned(W, "packed");
    need_aligned(x, "x");
    need_aligned(out, "out");
    const auto rows = rows_for<T>(kind, isa);
    const std::uint16_t* pw = W.data();
    const T* px = static_cast<const T*>(x.data());
    T* py_ = static_cast<T*>(out.mutable_data());
    {
        py::gil_scoped_release release;
        bf::matvec<T>(rows, pw, d_out, d_in, px, batch, py_, threads);
    }
}

// kind 0: plain bf16 words; 1, 2: expert 0, 1 of packed words. isa 0: baseline, 1: the fastest available.
void matvec(const u16array& W, const py::array& x, py::array out, int kind, int threads, int isa) {
    need(kind >= 0 && kind <= 2, "`kind` must be 0 (plain bf16), 1 (expert 0) or 2 (expert 1)");
    need(isa == 0 || isa == 1, "`isa` must be 0 (baseline) or 1 (fastest available)");
    threads = numtk::bindings::check_threads(threads);
    if (is_c_array<float>(x)) return matvec_impl<float>(W, x, out, kind, threads, isa);
    if (is_c_array<double>(x)) return matvec_impl<double>(W, x, out, kind, threads, isa);
    throw py::type_error("`x` must be a C-contiguous float32 or float64 array");
}

constexpr const char* kPackDoc =
    "Packed words of a merged expert pair: `magnitude` C-contiguous float32 / float64 (rounded to bf16, to\n"
    "nearest even) or uint16 (bf16 bits, as given); `mask_i`, `mask_j`, `sign_i`, `sign_j` C-contiguous uint8\n"
    "(0 / non-zero) of the same shape; `mode` 0 saturate, 1 exponent, 2 zero. Returns (packed, clamped,\n"
    "invalid, first): the uint16 words, the count of exponents below 112, the count of invalid magnitudes\n"
    "(negative, NaN, infinite, exponent above 143; their words are meaningless) and the flat index of the first\n"
    "one (the size when there is none).";

constexpr const char* kMatvecDoc =
    "out[b, r] = sum_c W[r, c] x[b, c] for W (d_out, d_in) uint16 words, C-contiguous: kind 0 plain bf16, 1 / 2\n"
    "expert 0 / 1 of packed words; x (batch, d_in) C-contiguous float32 or float64; out (batch, d_out) of x's\n"
    "dtype, written in place. `threads` split the rows (results do not depend on it); `isa` 0 runs the\n"
    "baseline build, 1 the AVX2 + FMA variant where the CPU has it.";

}  // namespace

void bind_bf16(py::module_& m) {
    m.def("bf16_pack", &pack, py::arg("magnitude"), py::arg("mask_i").noconvert(), py::arg("mask_j").noconvert(),
          py::arg("sign_i").noconvert(), py::arg("sign_j").noconvert(), py::arg("mode") = 0, py::arg("threads") = 1,
          kPackDoc);
    m.def("bf16_round", &round_bf16, py::arg("x"), py::arg("threads") = 1,
          "float32 or float64 (C-contiguous) -> uint16 bf16 bits, rounded once to nearest even; NaN -> 0x7FC0\n"
          "with its sign.");
    m.def("bf16_unpack", &unpack, py::arg("packed").noconvert(), py::arg("threads") = 1,
          "Components of packed words (C-contiguous uint16): (magnitude bf16 bits, mask_i, mask_j, sign_i, "
          "sign_j) with bool masks and signs.");
    m.def("bf16_unpack_expert", &unpack_expert, py::arg("packed").noconvert(), py::arg("expert"), py::arg("as") = 0,
          py::arg("threads") = 1,
          "One array of packed words (C-contiguous uint16): expert 0 or 1 (or -1: the magnitude) as bf16 bits "
          "(as=0), float32 (1) or float64 (2).");
    m.def("bf16_matvec", &matvec, py::arg("W").noconvert(), py::arg("x"), py::arg("out"), py::arg("kind"),
          py::arg("threads") = 1, py::arg("isa") = 1, kMatvecDoc);
    m.def("bf16_kernel_threads", &bf::kernel_threads, py::arg("threads"), py::arg("n"),
          "The threads the elementwise kernels (pack, round, unpack) run for `threads` asked and n entries.");
    m.def("bf16_cpu_has_avx2_fma", &cpu_has_avx2_fma, "Whether bf16_matvec(isa=1) runs the AVX2 + FMA variant here.");
}
