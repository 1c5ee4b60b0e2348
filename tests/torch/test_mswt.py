"""numtk.torch.mswt: the wavelet transforms against PyWavelets, the modules, the metrics and the demo.

Oracles: PyWavelets (``pywt.dwt``, ``idwt``, ``dwt2``, ``idwt2`` and its filter tables), fed either the same
filters (``pywt.Wavelet`` objects: the algorithm must agree to 1e-12) or its own named wavelets (then within
the tables' difference); the mpmath derivation of the filters; closed forms (Haar sums, Parseval, pure
cosines); torch.autograd.gradcheck; Jacobian ranks by SVD.
"""

import inspect
import math

import numpy as np
import pytest
import torch

from numtk.torch import _mswt, _mswt_filters
from numtk.torch.mswt import (MODES, MSWT1D, MSWT2D, WAVELETS, WaveletAttention, WaveletBlock, WaveletDownsample,
                              WaveletUpsample, demo, dwt1d, dwt2d, energy_spectrum, idwt1d, idwt2d, relative_l2,
                              rollout, stack_subbands, unstack_subbands, wavelet_filters)

pywt = pytest.importorskip("pywt")

#: largest difference of our filters from PyWavelets' tables (measured; see _mswt_filters' docstring)
TABLE_GAP = {"sym": 2e-11, "coif": 6e-14, "db": 0.0, "haar": 0.0}


def family(name):
    return "haar" if name == "haar" else name.rstrip("0123456789")


def t64(a):
    return torch.as_tensor(np.asarray(a), dtype=torch.float64)


def close(a, b, tol=1e-12):
    a = a.detach().numpy() if isinstance(a, torch.Tensor) else np.asarray(a)
    assert a.shape == np.shape(b), (a.shape, np.shape(b))
    if a.size:
        np.testing.assert_allclose(a, b, rtol=0, atol=tol)


def ok_length(mode, N):
    return N >= 2 or mode not in ("reflect", "antireflect")


@pytest.fixture(params=["dense", "polyphase"])
def path(request, monkeypatch):
    """Both forms of a level: the dense matrix of short axes and the polyphase passes of long ones."""
    if request.param == "polyphase":
        monkeypatch.setattr(_mswt, "DENSE_TAPS", 0)
    return request.param


# --------------------------------------------------------------------------------------------------
# filters
# --------------------------------------------------------------------------------------------------
def test_filters_equal_pywavelets_tables():
    for name in WAVELETS:
        ours = wavelet_filters(name)
        ref = pywt.Wavelet(name).filter_bank
        gap = max(np.abs(np.subtract(a, b)).max() for a, b in zip(ours, ref))
        assert gap <= TABLE_GAP[family(name)], name
        h = np.array(ours[2])  # rec_lo: orthonormal even shifts, sum sqrt(2), to rounding
        L = h.size
        assert abs(h.sum() - math.sqrt(2)) < 1e-14, name
        assert max(abs(h[:L - 2 * m] @ h[2 * m:] - (m == 0)) for m in range(L // 2)) < 1e-14, name


def test_symlet_filters_are_more_exact_than_the_published_tables():
    """sym20's published table misses orthonormality by ~1e-11; the derived one to rounding."""
    def worst(h):
        h = np.asarray(h)
        return max(abs(h[:h.size - 2 * m] @ h[2 * m:] - (m == 0)) for m in range(h.size // 2))

    assert worst(wavelet_filters("sym20")[2]) < 1e-15 < 1e-13 < worst(pywt.Wavelet("sym20").rec_lo)


def test_filter_table_is_reproduced_by_the_derivation():
    mp = pytest.importorskip("mpmath")
    table = _mswt_filters.SCALING_FILTERS
    for N in (1, 2, 5, 8):
        assert [float(v) for v in _mswt_filters.daubechies_factor(N)] == list(table[f"db{N}"])
    for N in (2, 4, 7):
        got = [float(v) for v in _mswt_filters.daubechies_factor(N, _mswt_filters.SYMLET_ROOTS[N])]
        np.testing.assert_allclose(got, table[f"sym{N}"], rtol=0, atol=2e-16)
    for K in (1, 2):  # Gauss-Newton from the table rounded to 8 digits returns to it
        h, res = _mswt_filters.coiflet_solve(K, np.round(table[f"coif{K}"], 8))
        assert float(res) < 1e-30
        np.testing.assert_allclose([float(v) for v in h], table[f"coif{K}"], rtol=0, atol=2e-16)
    assert mp is not None


@pytest.mark.slow
def test_whole_filter_table_is_reproduced_by_the_derivation():
    pytest.importorskip("mpmath")
    table = _mswt_filters.SCALING_FILTERS
    for N in range(1, 39):
        np.testing.assert_allclose([float(v) for v in _mswt_filters.daubechies_factor(N)], table[f"db{N}"],
                                   rtol=0, atol=2e-16)
    for N in range(2, 21):
        got = [float(v) for v in _mswt_filters.daubechies_factor(N, _mswt_filters.SYMLET_ROOTS[N])]
        np.testing.assert_allclose(got, table[f"sym{N}"], rtol=0, atol=2e-16)
    for K in range(3, 8):
        h, _ = _mswt_filters.coiflet_solve(K, np.round(table[f"coif{K}"], 10))
        np.testing.assert_allclose([float(v) for v in h], table[f"coif{K}"], rtol=0, atol=5e-16)


# --------------------------------------------------------------------------------------------------
# the 1-D transform against PyWavelets
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", WAVELETS)
def test_dwt1d_equals_pywt_for_every_wavelet_and_mode(name, rng, monkeypatch):
    """Batched (2, 3, N): our transform with PyWavelets' filters to 1e-12, with the named filters to 1e-12 plus
    the tables' gap times the coefficients' l1 bound; the inverse likewise. The polyphase form (the dense form
    of short axes is built from it, and checked against PyWavelets below on eight wavelets)."""
    monkeypatch.setattr(_mswt, "DENSE_TAPS", 0)
    wav = pywt.Wavelet(name)
    Fl = wav.dec_len
    for mode in MODES:
        N = 2 * Fl + 3 if mode != "periodization" else 2 * Fl + 1
        x = rng.standard_normal((2, 3, N))
        a, d = pywt.dwt(x, wav, mode=mode)
        tol = 1e-12 + TABLE_GAP[family(name)] * Fl * 4 * np.abs(x).max()
        for w, t in ((wav, 1e-12), (name, tol)):
            A, D = dwt1d(t64(x), w, mode)
            close(A, a, t)
            close(D, d, t)
            close(idwt1d(A, D, w, mode), pywt.idwt(a, d, wav, mode=mode), 1e-12 + 10 * (t - 1e-12))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", ["haar", "db2", "db5", "sym3", "coif1", "bior2.4", "rbio3.1", "dmey"])
def test_dwt1d_equals_pywt_for_all_lengths(name, mode, rng, path):
    """Every length from 1 to past the filter (short signals wrap the extension several times)."""
    wav = pywt.Wavelet(name)
    for N in [*range(1, 14), 31, 64]:
        if not ok_length(mode, N):
            continue
        x = rng.standard_normal((2, N))
        a, d = pywt.dwt(x, wav, mode=mode)
        A, D = dwt1d(t64(x), wav, mode)
        close(A, a)
        close(D, d)
        if mode != "periodization" and a.shape[-1] < wav.rec_len // 2:
            with pytest.raises(ValueError, match="`cA`"):
                idwt1d(A, D, wav, mode)
            continue
        close(idwt1d(A, D, wav, mode), pywt.idwt(a, d, wav, mode=mode))


def test_idwt1d_none_is_zeros_as_in_pywt(rng):
    x = rng.standard_normal((3, 20))
    for mode in ("periodization", "symmetric"):
        a, d = pywt.dwt(x, "db3", mode=mode)
        close(idwt1d(t64(a), None, "db3", mode), pywt.idwt(a, None, "db3", mode=mode))
        close(idwt1d(None, t64(d), "db3", mode), pywt.idwt(None, d, "db3", mode=mode))


def test_dwt1d_float32_follows_the_input_dtype(rng):
    x = rng.standard_normal((4, 64)).astype(np.float32)
    A, D = dwt1d(torch.from_numpy(x), "db4")
    assert A.dtype == torch.float32
    a, _ = pywt.dwt(x.astype(np.float64), "db4", mode="periodization")
    np.testing.assert_allclose(A.numpy(), a, atol=1e-5)


def test_haar_closed_form():
    x = torch.arange(8.0, dtype=torch.float64)
    A, D = dwt1d(x)
    close(A, (x[0::2] + x[1::2]).numpy() / math.sqrt(2), 4e-15)
    close(D, (x[0::2] - x[1::2]).numpy() / math.sqrt(2), 4e-15)


# --------------------------------------------------------------------------------------------------
# 2-D
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", WAVELETS[::2])
def test_dwt2d_equals_pywt_periodization(name, rng):
    """Every other wavelet (the 1-D test takes them all; the 2-D transform is the 1-D one along two axes)."""
    wav = pywt.Wavelet(name)
    x = rng.standard_normal((2, 3, 10, 7))
    a, (h, v, d) = pywt.dwt2(x, wav, mode="periodization")
    A, (H, V, D) = dwt2d(t64(x), wav)
    for ours, ref in zip((A, H, V, D), (a, h, v, d)):
        close(ours, ref)
    close(idwt2d((A, (H, V, D)), wav), pywt.idwt2((a, (h, v, d)), wav, mode="periodization"))
    tol = 1e-12 + TABLE_GAP[family(name)] * wav.dec_len ** 2 * 8 * np.abs(x).max()
    close(dwt2d(t64(x), name)[1][2], d, tol)


@pytest.mark.parametrize("mode", [*MODES, ("symmetric", "periodization"), ("zero", "antireflect")])
@pytest.mark.parametrize("name", ["haar", "db3", "sym4", "coif1", "bior3.5"])
def test_dwt2d_equals_pywt_in_every_mode(name, mode, rng):
    """Short axes take the dense form, the long one (90 > 40 F for Haar) the polyphase form."""
    wav = pywt.Wavelet(name)
    for shape in [(1, 2), (5, 7), (13, 6), (4, 90)]:
        modes = (mode, mode) if isinstance(mode, str) else mode
        if not all(ok_length(m, n) for m, n in zip(modes, shape)):
            continue
        x = rng.standard_normal((3, *shape))
        a, (h, v, d) = pywt.dwt2(x, wav, mode=mode)
        A, (H, V, D) = dwt2d(t64(x), wav, mode)
        for ours, ref in zip((A, H, V, D), (a, h, v, d)):
            close(ours, ref)
        try:
            ref = pywt.idwt2((a, (h, v, d)), wav, mode=mode)
        except ValueError:  # too few coefficients for the filter: both refuse
            with pytest.raises(ValueError, match="`coeffs`"):
                idwt2d((A, (H, V, D)), wav, mode)
            continue
        close(idwt2d((A, (H, V, D)), wav, mode), ref)
        close(idwt2d((A, (None, V, None)), wav, mode), pywt.idwt2((a, (None, v, None)), wav, mode=mode))


# --------------------------------------------------------------------------------------------------
# invariants
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_perfect_reconstruction(mode, rng, path):
    for name in ("haar", "db2", "db4", "sym6", "coif2"):
        for N in (16, 23):
            x = t64(rng.standard_normal((2, N)))
            close(idwt1d(*dwt1d(x, name, mode), name, mode)[..., :N], x.numpy())
        x = t64(rng.standard_normal((2, 18, 13)))
        close(idwt2d(dwt2d(x, name, mode), name, mode)[..., :18, :13], x.numpy())


def test_periodized_transform_preserves_energy(rng):
    for name in WAVELETS:
        x = t64(rng.standard_normal((3, 32)))
        A, D = dwt1d(x, name)
        assert torch.allclose(A.square().sum(-1) + D.square().sum(-1), x.square().sum(-1), rtol=1e-13, atol=0), name
        X = t64(rng.standard_normal((2, 8, 12)))
        total = sum(c.square().sum() for c in (dwt2d(X, name)[0], *dwt2d(X, name)[1]))
        assert abs(float(total - X.square().sum())) < 1e-12 * float(X.square().sum()), name


@pytest.mark.parametrize("name", ["haar", "db3", "sym5", "coif2"])
def test_shift_by_two_commutes_with_the_periodic_dwt(name, rng, path):
    x = t64(rng.standard_normal((2, 40)))
    A, D = dwt1d(x, name)
    A2, D2 = dwt1d(torch.roll(x, 2, dims=-1), name)
    close(A2, torch.roll(A, 1, dims=-1).numpy())
    close(D2, torch.roll(D, 1, dims=-1).numpy())
    X = t64(rng.standard_normal((16, 20)))
    c = dwt2d(X, name)
    c2 = dwt2d(torch.roll(X, (2, -4), dims=(-2, -1)), name)
    for a, b in zip((c[0], *c[1]), (c2[0], *c2[1])):
        close(b, torch.roll(a, (1, -2), dims=(-2, -1)).numpy())


@pytest.mark.parametrize("mode", ["periodization", "symmetric", "antireflect", "smooth", "zero"])
def test_gradcheck(mode, path):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 9, dtype=torch.float64, generator=g, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: dwt1d(t, "db3", mode), (x,))
    a, d = (c.detach().requires_grad_() for c in dwt1d(x.detach(), "db3", mode))
    assert torch.autograd.gradcheck(lambda p, q: idwt1d(p, q, "db3", mode), (a, d))
    X = torch.randn(1, 6, 7, dtype=torch.float64, generator=g, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: (lambda c: (c[0], *c[1]))(dwt2d(t, "db2", mode)), (X,))
    bands = [c.detach().requires_grad_() for c in (lambda c: (c[0], *c[1]))(dwt2d(X.detach(), "db2", mode))]
    assert torch.autograd.gradcheck(lambda p, q, r, s: idwt2d((p, (q, r, s)), "db2", mode), tuple(bands))


def test_second_derivatives(path):
    x = torch.randn(2, 10, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradgradcheck(lambda t: dwt1d(t, "db2", "symmetric"), (x,))
    assert torch.autograd.gradgradcheck(lambda t: idwt1d(t, t, "coif1"), (x,))


def _jacobian_rank(f, shape):
    x = torch.randn(*shape, dtype=torch.float64)
    J = torch.autograd.functional.jacobian(lambda t: f(t).flatten(), x).reshape(-1, x.numel())
    s = torch.linalg.svdvals(J)
    return int((s > 1e-10 * s[0]).sum()), s


def test_dwt_stage_is_invertible_where_strided_conv_and_pooling_lose_rank():
    torch.manual_seed(0)
    C, H, W = 2, 8, 8
    down = WaveletDownsample(4, "db2").double()
    rank, s = _jacobian_rank(down.dwt, (1, C, H, W))  # the DWT stage at initialisation: orthogonal
    assert rank == C * H * W and torch.allclose(s, torch.ones_like(s), atol=1e-12)
    conv = torch.nn.Conv2d(C, C, 3, stride=2, padding=1).double()
    assert _jacobian_rank(conv, (1, C, H, W))[0] <= C * H * W // 4
    assert _jacobian_rank(torch.nn.AvgPool2d(2), (1, C, H, W))[0] == C * H * W // 4
    up = WaveletUpsample(2, "db2").double()  # the inverse DWT stage: orthogonal too
    rank, s = _jacobian_rank(up.dwt.inverse, (1, 4 * C, H // 2, W // 2))
    assert rank == C * H * W and torch.allclose(s, torch.ones_like(s), atol=1e-12)
    rank, _ = _jacobian_rank(WaveletDownsample(2, "haar", ndim=1).double().dwt, (1, 2, 16))
    assert rank == 32


# --------------------------------------------------------------------------------------------------
# sub-band stacking
# --------------------------------------------------------------------------------------------------
def test_stack_and_unstack_subbands_round_trip(rng):
    x = t64(rng.standard_normal((2, 3, 8, 6)))
    c = dwt2d(x)
    s = stack_subbands(c)
    assert s.shape == (2, 12, 4, 3)
    assert torch.equal(s[:, 3:6], c[1][0])
    a, (h, v, d) = unstack_subbands(s, ndim=2)
    assert all(torch.equal(p, q) for p, q in zip((a, h, v, d), (c[0], *c[1])))
    y = t64(rng.standard_normal((2, 3, 10)))
    s1 = stack_subbands(dwt1d(y))
    assert s1.shape == (2, 6, 5)
    close(idwt1d(*unstack_subbands(s1, ndim=1)), y.numpy())
    assert stack_subbands(dwt1d(y), dim=-1).shape == (2, 3, 10)


# --------------------------------------------------------------------------------------------------
# modules
# --------------------------------------------------------------------------------------------------
def test_module_shapes_and_gradients():
    torch.manual_seed(0)
    x = torch.randn(2, 16, 8, 12)
    assert WaveletDownsample(16, "db2", out_dim=8)(x).shape == (2, 8, 4, 6)
    assert WaveletUpsample(16, out_dim=4, skip_dim=3)(x, torch.randn(2, 3, 16, 24)).shape == (2, 4, 16, 24)
    assert WaveletUpsample(16, skip_dim=0)(x).shape == (2, 16, 16, 24)
    for window in (None, 2, 5):  # 5 does not divide the 4 x 6 token grid: circular padding
        y = WaveletAttention(16, 4, window)(x)
        assert y.shape == x.shape
    block = WaveletBlock(16, 2, window=3)
    y = block(x.requires_grad_())
    y.square().mean().backward()
    assert x.grad is not None and all(p.grad is not None for p in block.parameters())
    s = torch.randn(3, 8, 20)
    assert WaveletDownsample(8, ndim=1)(s).shape == (3, 8, 10)
    assert WaveletUpsample(8, ndim=1, skip_dim=0)(s).shape == (3, 8, 40)
    assert WaveletBlock(8, 2, window=3, ndim=1)(s).shape == s.shape


def test_window_covering_the_grid_is_global_attention():
    torch.manual_seed(0)
    glob = WaveletAttention(8, 2, None)
    loc = WaveletAttention(8, 2, 4)
    loc.load_state_dict(glob.state_dict())
    x = torch.randn(2, 8, 8, 8)
    assert torch.allclose(glob(x), loc(x), atol=1e-6)
    small = WaveletAttention(8, 2, 2)
    small.load_state_dict(glob.state_dict())
    assert not torch.allclose(glob(x), small(x), atol=1e-4)


def test_window_larger_than_the_grid():
    torch.manual_seed(0)
    glob = WaveletAttention(8, 2, None)
    big = WaveletAttention(8, 2, 64)  # larger than the 4 x 4 token grid on every axis: global attention
    big.load_state_dict(glob.state_dict())
    x = torch.randn(2, 8, 8, 8)
    assert torch.allclose(glob(x), big(x), atol=1e-6)
    thin = WaveletAttention(8, 2, 7)  # 7 > 2 x 2 tokens on the first axis, within the second (32 tokens)
    with pytest.raises(ValueError, match="`window`"):
        thin(torch.randn(1, 8, 4, 64))
    net = MSWT2D(1, 1, dims=[8, 8], heads=2, window=64)
    assert net(torch.randn(1, 1, 8, 8)).shape == (1, 1, 8, 8)


def test_attention_is_equivariant_to_even_shifts():
    """Global wavelet attention without positions commutes with shifts by 2 (one token of the DWT grid)."""
    torch.manual_seed(0)
    attn = WaveletAttention(8, 2, None, "db2", ndim=1).double()
    x = torch.randn(2, 8, 16, dtype=torch.float64)
    assert torch.allclose(attn(torch.roll(x, 2, -1)), torch.roll(attn(x), 2, -1), atol=1e-12)


def test_mswt_networks():
    torch.manual_seed(0)
    net = MSWT2D(2, 3, dims=[8, 16, 16], heads=2, window=2)
    x = torch.randn(2, 2, 16, 8)
    y = net(x)
    assert y.shape == (2, 3, 16, 8)
    y.square().mean().backward()
    assert all(p.grad is not None for p in net.parameters())
    assert [b.attn.window for b in net.enc_blocks] == [2, 2, 2]
    assert MSWT2D(1, 1, dim=8).dims == (4, 16, 32, 32)  # dim / 2, 2 dim, 4 dim, 4 dim
    assert inspect.signature(MSWT2D).parameters["dim"].default == 72
    net1 = MSWT1D(1, 2, dim=8, heads=2, grid="periodic").double()
    assert net1.dims == (4, 8, 16, 16)
    assert net1(torch.randn(3, 1, 32, dtype=torch.float64)).shape == (3, 2, 32)
    assert MSWT1D(1, 1, dims=[4], heads=1, grid="none")(torch.randn(1, 1, 6)).shape == (1, 1, 6)


# --------------------------------------------------------------------------------------------------
# metrics and rollout
# --------------------------------------------------------------------------------------------------
def test_relative_l2():
    true = t64([[3.0, 4.0], [1.0, 0.0]])
    pred = t64([[3.0, 5.0], [0.0, 0.0]])
    close(relative_l2(pred, true, reduction="none"), [0.2, 1.0], 1e-15)
    assert float(relative_l2(pred, true)) == pytest.approx(0.6)
    assert float(relative_l2(pred, true, "sum")) == pytest.approx(1.2)


def test_energy_spectrum_parseval_and_cosines(rng):
    u = t64(rng.standard_normal((3, 2, 17)))
    E = energy_spectrum(u)
    assert E.shape == (3, 2, 9)
    close(E.sum(-1), u.square().mean(-1).numpy())
    x = torch.arange(32, dtype=torch.float64) * (2 * math.pi / 32)
    E = energy_spectrum(2 * torch.cos(5 * x) + torch.sin(16 * x + 0.3))
    expected = np.zeros(17)
    expected[5], expected[16] = 2.0, math.sin(0.3) ** 2
    close(E, expected)
    U = t64(rng.standard_normal((2, 12, 16)))
    E2 = energy_spectrum(U, ndim=2)
    assert E2.shape == (2, 11)
    close(E2.sum(-1), U.square().mean((-2, -1)).numpy())
    y, xx = torch.meshgrid(x[::2], x[::2], indexing="ij")  # 16 x 16 grid
    E2 = energy_spectrum(torch.cos(3 * xx + 4 * y), ndim=2)
    assert float(E2[5]) == pytest.approx(0.5) and float(E2.sum()) == pytest.approx(0.5)


def test_rollout():
    u0 = t64([[1.0, -2.0]])
    traj = rollout(lambda u: 0.5 * u, u0, 4)
    close(traj[:, 0], 0.5 ** np.arange(1, 5)[:, None] * np.array([1.0, -2.0]))
    w = torch.tensor(2.0, requires_grad=True)
    assert not rollout(lambda u: w * u, u0, 2).requires_grad
    out = rollout(lambda u: w * u, u0, 2, grad=True)
    out[-1].sum().backward()
    assert float(w.grad) == pytest.approx(2 * 2.0 * (1.0 - 2.0))


# --------------------------------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------------------------------
def test_validation_names_the_argument():
    x = torch.randn(2, 8)
    with pytest.raises(TypeError, match="`x`"):
        dwt1d(torch.ones(2, 8, dtype=torch.int64))
    with pytest.raises(ValueError, match="`x`"):
        dwt1d(torch.full((2, 8), float("nan")))
    with pytest.raises(ValueError, match="`wavelet`"):
        dwt1d(x, "db39")
    with pytest.raises(ValueError, match="`wavelet`"):
        dwt1d(x, ([1.0, 1.0], [1.0], [1.0, 1.0], [1.0, 1.0]))
    with pytest.raises(ValueError, match="`mode`"):
        dwt1d(x, "haar", "circular")
    with pytest.raises(ValueError, match="`x`"):
        dwt1d(torch.ones(3, 1), "haar", "reflect")
    with pytest.raises(ValueError, match="`x`"):
        dwt1d(torch.ones(3, 0))
    with pytest.raises(ValueError, match="`cD`"):
        idwt1d(torch.ones(2, 4), torch.ones(2, 5))
    with pytest.raises(ValueError, match="`cA`"):
        idwt1d(torch.ones(2, 3), torch.ones(2, 3), "db4", "symmetric")
    with pytest.raises(ValueError, match="`cA`"):
        idwt1d(None, None)
    with pytest.raises(TypeError, match="`coeffs`"):
        idwt2d(torch.ones(4, 4))
    with pytest.raises(ValueError, match="`mode`"):
        dwt2d(torch.ones(4, 4), mode=("zero",))
    with pytest.raises(ValueError, match="`x`"):
        dwt2d(torch.ones(4))
    with pytest.raises(ValueError, match="`dim`"):
        WaveletDownsample(6)
    with pytest.raises(ValueError, match="`heads`"):
        WaveletAttention(8, 3)
    with pytest.raises(ValueError, match="`wavelet`"):
        WaveletBlock(8, 2, wavelet="bior2.2")
    with pytest.raises(ValueError, match="`ndim`"):
        WaveletDownsample(8, ndim=3)
    with pytest.raises(ValueError, match="`x`"):
        WaveletDownsample(8)(torch.ones(1, 8, 5, 4))
    with pytest.raises(ValueError, match="`skip`"):
        WaveletUpsample(8)(torch.ones(1, 8, 2, 2))
    with pytest.raises(ValueError, match="`dims`"):
        MSWT2D(1, 1, dims=[6, 8])
    with pytest.raises(ValueError, match="`x`"):
        MSWT1D(1, 1, dims=[4, 8], heads=2)(torch.ones(1, 1, 6))
    with pytest.raises(ValueError, match="`grid`"):
        MSWT1D(1, 1, grid="polar")
    with pytest.raises(ValueError, match="`pred`"):
        relative_l2(torch.ones(2, 3), torch.ones(2, 4))
    with pytest.raises(ValueError, match="`reduction`"):
        relative_l2(torch.ones(2, 3), torch.ones(2, 3), "avg")
    with pytest.raises(ValueError, match="`ndim`"):
        energy_spectrum(torch.ones(4), ndim=3)
    with pytest.raises(ValueError, match="`model`"):
        rollout(lambda u: u[:1], torch.ones(2, 3), 2)
    with pytest.raises(TypeError, match="`model`"):
        rollout(5, torch.ones(2, 3), 2)


# --------------------------------------------------------------------------------------------------
# the demonstration
# --------------------------------------------------------------------------------------------------
def test_demo_orders_mswt_before_the_plain_transformer():
    res = demo(steps=60, rng=0, quick=True)
    m = res.metrics
    assert set(m) >= {"mswt", "transformer", "persistence"}
    assert m["mswt"]["relative_l2"] < m["persistence"]["relative_l2"]
    assert m["mswt"]["relative_l2"] < m["transformer"]["relative_l2"]
    assert abs(m["mswt"]["params"] - m["transformer"]["params"]) <= 0.05 * m["mswt"]["params"]
    assert len(res.history["mswt"]) == 60 and res.wall_time > 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_follows_the_input_device(rng):
    x = t64(rng.standard_normal((2, 3, 16, 20)))
    for mode in ("periodization", "symmetric"):
        c = dwt2d(x, "db3", mode)
        g = dwt2d(x.cuda(), "db3", mode)
        assert g[0].device.type == "cuda"
        for a, b in zip((c[0], *c[1]), (g[0], *g[1])):
            close(b.cpu(), a.numpy())
        close(idwt2d(g, "db3", mode).cpu(), idwt2d(c, "db3", mode).numpy())
    net = MSWT1D(1, 1, dims=[4, 8], heads=2).cuda()
    assert net(torch.randn(2, 1, 16, device="cuda")).device.type == "cuda"
