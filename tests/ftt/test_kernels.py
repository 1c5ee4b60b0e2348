"""The compiled kernels (basis.hpp, contract.hpp, als_assemble.hpp) against the NumPy references."""

import numpy as np
import pytest
from reference import ftt as ref

from numtk.ftt import FunctionalTT, _basis, _ftt_ext
from numtk.ftt._als import (_normal_equations_sparse, design_rows, normal_equations, normal_equations_rows,
                            sparse_rows)

KINDS = ("legendre", "hermite", "bspline")


def _params(kind):
    return (0.3, 1.7) if kind == "hermite" else (-1.5, 2.0)


# cubic B-splines need n >= 4 functions (FunctionalTT rejects degree < 3; see test_functional_tt)
_BASIS_CASES = [(kind, n) for kind in KINDS for n in (1, 2, 4, 7, 13) if kind != "bspline" or n >= 4]


@pytest.mark.parametrize("kind,n", _BASIS_CASES)
@pytest.mark.parametrize("extrapolate", ["linear", "clip"])
def test_basis_matches_reference(kind, n, extrapolate):
    rng = np.random.default_rng(n)
    p0, p1 = _params(kind)
    x = np.concatenate([rng.uniform(-3, 4, 60), [p0, p1, -1.5, 2.0, 0.25]])
    got = _basis.evaluate(_basis.Basis1D(kind, n, p0, p1), x, order=2, extrapolate=extrapolate)
    want = ref.basis(kind, x, n, p0, p1, extrapolate)
    scale = np.max(np.abs(want), axis=1, keepdims=True) + 1.0
    np.testing.assert_allclose(got / scale, want / scale, rtol=0, atol=1e-12)


@pytest.mark.parametrize("kind", KINDS)
def test_basis_float32_and_strided(kind):
    rng = np.random.default_rng(3)
    p0, p1 = _params(kind)
    big = rng.uniform(-2, 2, (50, 3))
    x = big[:, 1]  # strided view
    assert not x.flags.c_contiguous
    b = _basis.Basis1D(kind, 9, p0, p1)
    got64 = _basis.evaluate(b, x, order=2)
    np.testing.assert_allclose(got64, ref.basis(kind, x, 9, p0, p1), rtol=1e-11, atol=1e-11)
    got32 = _basis.evaluate(b, x.astype(np.float32), order=2)
    assert got32.dtype == np.float32
    np.testing.assert_allclose(got32, got64, rtol=2e-4, atol=2e-4 * np.abs(got64).max())


def test_hermite_large_argument_no_overflow():
    # |u| > 10 uses the rescaled recurrence; the values must agree with the plain polynomial values.
    x = np.array([-60.0, -25.0, 10.5, 40.0, 200.0])
    b = _basis.Basis1D("hermite", 40, 0.0, 1.0)
    got = _basis.evaluate(b, x, order=2)
    want = ref.hermite(x, 40, 0.0, 1.0)
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, want, rtol=1e-11)
    # float32: h_30(50) ~ 1e38 would overflow an unscaled float32 recurrence on the way
    x32 = np.array([30.0, -35.0], dtype=np.float32)
    got32 = _basis.evaluate(_basis.Basis1D("hermite", 20, 0.0, 1.0), x32)[0]
    want32 = ref.hermite(x32.astype(float), 20, 0.0, 1.0)[0]
    assert np.all(np.isfinite(got32))
    np.testing.assert_allclose(got32, want32, rtol=1e-4)


def _random_tt(rng, d, kinds=None, nmax=7, rmax=3):
    kinds = kinds or [KINDS[i] for i in rng.integers(0, 3, d)]
    ns = [int(rng.integers(4, nmax + 1)) if k == "bspline" else int(rng.integers(1, nmax + 1)) for k in kinds]
    ranks = [1] + [int(rng.integers(1, rmax + 1)) for _ in range(d - 1)] + [1]
    cores = [rng.normal(size=(ranks[k], ns[k], ranks[k + 1])) / np.sqrt(ns[k]) for k in range(d)]
    dom = np.array([[-1.0, 1.5] if k != "hermite" else [np.nan, np.nan] for k in kinds])
    locs = rng.uniform(-0.5, 0.5, d)
    scales = rng.uniform(0.7, 1.5, d)
    bounded = any(k != "hermite" for k in kinds)
    f = FunctionalTT.from_cores(cores, list(kinds), [n - 1 for n in ns], domain=dom if bounded else None,
                                loc=list(locs), scale=list(scales))
    spec = [(k, dom[i, 0], dom[i, 1]) if k != "hermite" else (k, locs[i], scales[i]) for i, k in enumerate(kinds)]
    return f, cores, spec


@pytest.mark.parametrize("seed", range(12))
def test_evaluate_matches_dense_einsum(seed):
    rng = np.random.default_rng(seed)
    d = int(rng.integers(1, 6))
    f, cores, spec = _random_tt(rng, d)
    M = [0, 1, 5, 33, 130][seed % 5]
    X = rng.uniform(-1.6, 2.0, (M, d))
    fr, gr, lr = ref.evaluate(X, cores, spec)
    val, grad, lap = f.evaluate(X, gradient=True, laplacian=True)
    assert val.shape == (M,) and grad.shape == (M, d) and lap.shape == (M,)
    scale = 1.0 + (np.abs(fr).max() if M else 0.0)
    np.testing.assert_allclose(val, fr, rtol=1e-12, atol=1e-12 * scale)
    np.testing.assert_allclose(grad, gr, rtol=1e-11, atol=1e-11 * (1 + (np.abs(gr).max() if M else 0)))
    np.testing.assert_allclose(lap, lr, rtol=1e-11, atol=1e-11 * (1 + (np.abs(lr).max() if M else 0)))
    # the single-output methods agree with the joint pass
    np.testing.assert_array_equal(f.predict(X), val)
    np.testing.assert_array_equal(f.gradient(X), grad)
    np.testing.assert_array_equal(f.laplacian(X), lap)


def test_evaluate_threads_and_mixed_blocks():
    # Legendre points inside and outside the box in the same block of points (the vectorised recurrence
    # and the per-point extension), a partial last block, and the threaded kernel
    rng = np.random.default_rng(5)
    f, cores, spec = _random_tt(rng, 3, kinds=["legendre", "legendre", "bspline"], nmax=17)
    X = rng.uniform(-1.6, 2.0, (1000 + 13, 3))
    fr, gr, lr = ref.evaluate(X, cores, spec)
    one = f.evaluate(X, gradient=True, laplacian=True)
    f.set_params(workers=2)
    two = f.evaluate(X, gradient=True, laplacian=True)
    for a, b in zip(one, two):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(one[0], fr, rtol=1e-12, atol=1e-12 * np.abs(fr).max())
    np.testing.assert_allclose(one[1], gr, rtol=1e-11, atol=1e-11 * np.abs(gr).max())
    np.testing.assert_allclose(one[2], lr, rtol=1e-11, atol=1e-11 * np.abs(lr).max())
    with pytest.raises(ValueError, match="NaN"):
        f.predict(np.where(np.arange(3) == 1, np.nan, X))
    for bad, err in ((0, ValueError), (1.5, TypeError), (print, TypeError)):
        with pytest.raises(err, match="workers"):
            f.set_params(workers=bad).predict(X)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_evaluate_isa_variants_agree(dtype):
    # the AVX2 + FMA compilation of the kernel (used where the CPU has it) against the baseline one and the
    # NumPy reference; on a CPU without AVX2 both calls run the baseline kernel
    rng = np.random.default_rng(8)
    f, cores, spec = _random_tt(rng, 5, kinds=["legendre", "bspline", "hermite", "legendre", "bspline"], nmax=12)
    X = rng.uniform(-1.6, 2.0, (301, 5))
    args = _check_both_kernels(f, cores, spec, X, dtype, threads=2)
    assert isinstance(_ftt_ext.cpu_has_avx2_fma(), bool)
    with pytest.raises(ValueError, match="isa"):
        _ftt_ext.evaluate(X, *args, 1, 2)


def _check_both_kernels(f, cores, spec, X, dtype, threads):
    """The baseline (isa 0) and fastest (isa 1) kernels against the NumPy reference; returns the
    extension's arguments after X."""
    fr, gr, lr = ref.evaluate(X, cores, spec)
    bs = f._bases
    args = ([_basis.KINDS[b.kind] for b in bs], [b.n for b in bs], [b.p0 for b in bs], [b.p1 for b in bs], 0,
            list(f.cores_), True, True)
    tol = 1e-11 if dtype == np.float64 else 2e-3
    for isa in (0, 1):
        v, g, lap = _ftt_ext.evaluate(X.astype(dtype), *args, threads, isa)
        assert v.dtype == g.dtype == lap.dtype == dtype
        for got, want in ((v, fr), (g, gr), (lap, lr)):
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol * (1 + np.abs(want).max()))
    return args


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_evaluate_register_tiles_and_remainders(dtype):
    # the block products hold tiles of 4 rows (core columns r_{k-1} r_k, basis functions n) by 2 vectors of
    # points: sizes below, at and above multiples of 4, with a partial last block of points, on both kernels
    rng = np.random.default_rng(11)
    ranks = [1, 4, 5, 6, 3, 2, 1]
    ns = [1, 4, 5, 8, 17, 3]
    cores = [rng.normal(size=(ranks[k], ns[k], ranks[k + 1])) / np.sqrt(ns[k] * ranks[k]) for k in range(6)]
    spec = [("legendre", -1.0, 1.5)] * 6
    f = FunctionalTT.from_cores(cores, "legendre", [n - 1 for n in ns], domain=[[-1.0, 1.5]] * 6)
    X = rng.uniform(-1.0, 1.5, (32 * 3 + 7, 6))
    _check_both_kernels(f, cores, spec, X, dtype, threads=1)


@pytest.mark.parametrize("order", ["F", "strided"])
def test_evaluate_non_contiguous_and_float32(order):
    rng = np.random.default_rng(7)
    f, cores, spec = _random_tt(rng, 4, kinds=["legendre", "bspline", "hermite", "legendre"])
    base = rng.uniform(-1, 1.5, (40, 8))
    X = np.asfortranarray(base[:, :4]) if order == "F" else base[:, ::2]
    assert not X.flags.c_contiguous
    fr, gr, lr = ref.evaluate(X, cores, spec)
    v, g, lap = f.evaluate(X, gradient=True, laplacian=True)
    np.testing.assert_allclose(v, fr, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(g, gr, rtol=1e-11, atol=1e-11)
    v32, g32, l32 = f.evaluate(X.astype(np.float32), gradient=True, laplacian=True)
    assert v32.dtype == g32.dtype == l32.dtype == np.float32
    np.testing.assert_allclose(v32, fr, rtol=1e-3, atol=1e-4 * np.abs(fr).max())
    np.testing.assert_allclose(l32, lr, rtol=1e-3, atol=1e-4 * np.abs(lr).max())
    # integer input is promoted to float64
    assert f.predict(np.zeros((2, 4), dtype=np.int64)).dtype == np.float64


def test_clip_extrapolation_reference():
    rng = np.random.default_rng(11)
    cores = [rng.normal(size=s) for s in [(1, 5, 2), (2, 6, 1)]]
    f = FunctionalTT.from_cores(cores, ["legendre", "bspline"], [4, 5], domain=[[0, 1], [-1, 1]], extrapolate="clip")
    X = rng.uniform(-2, 3, (50, 2))
    fr, gr, lr = ref.evaluate(X, cores, [("legendre", 0, 1), ("bspline", -1, 1)], extrapolate="clip")
    v, g, lap = f.evaluate(X, gradient=True, laplacian=True)
    np.testing.assert_allclose(v, fr, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(g, gr, rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(lap, lr, rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("shape", [(1, 1, 1), (1, 5, 3), (3, 4, 2), (2, 6, 1), (4, 3, 4)])
def test_als_assembly_and_site_kernels(shape):
    ra, n, rb = shape
    rng = np.random.default_rng(sum(shape))
    M = 5000 + 37  # more than one chunk
    L, Phi, R = rng.normal(size=(M, ra)), rng.normal(size=(M, n)), rng.normal(size=(M, rb))
    w, y = rng.uniform(0, 2, M), rng.normal(size=M)
    A = np.einsum("ma,mi,mc->maic", L, Phi, R).reshape(M, -1)
    n_train = M - 100
    G, b = normal_equations(L, Phi, R, w, y, n_train, 0.5 * np.eye(A.shape[1]))
    At, wt = A[:n_train], w[:n_train]
    np.testing.assert_allclose(G, At.T @ (wt[:, None] * At) / wt.sum() + 0.5 * np.eye(A.shape[1]), rtol=1e-12,
                               atol=1e-12)
    np.testing.assert_allclose(b, At.T @ (wt * y[:n_train]) / wt.sum(), rtol=1e-12, atol=1e-13)
    C = rng.normal(size=shape)
    np.testing.assert_allclose(_ftt_ext.site_values(L, Phi, R, C), A @ C.ravel(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(_ftt_ext.interface_left(L, Phi, C), np.einsum("ma,mi,aic->mc", L, Phi, C),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(_ftt_ext.interface_right(R, Phi, C), np.einsum("mc,mi,aic->ma", R, Phi, C),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape", [(1, 12, 1), (2, 32, 3), (3, 9, 2), (4, 16, 4)])
@pytest.mark.parametrize("directional", [False, True])
def test_sparse_assembly_matches_the_dense_design(shape, directional):
    # B-spline rows (4 non-zeros, linear extension outside the box; a row of zeros; a non-contiguous
    # interface) against the explicit design matrix A: G = A^T W A / sum(w) + penalty, b = A^T W y / sum(w)
    ra, n, rb = shape
    rng = np.random.default_rng(n + ra)
    M = 700
    b1 = _basis.Basis1D("bspline", n, -2.0, 3.0)
    x = np.concatenate([rng.uniform(-2.5, 3.5, M - 3), [-2.0, 3.0, 0.5]])
    Phi, dPhi = _basis.evaluate(b1, x, order=1)[:2]
    Phi, dPhi = np.ascontiguousarray(Phi), np.ascontiguousarray(dPhi)
    assert sparse_rows(Phi)
    Phi[5] = 0.0
    dPhi[5] = 0.0
    L = rng.normal(size=(M, 2 * ra))[:, ::2]  # strided
    R = rng.normal(size=(M, rb))
    w, y = rng.uniform(0, 2, M), rng.normal(size=M)
    n_train = M - 50
    pen = 0.3 * np.eye(ra * n * rb)
    if directional:
        DL, DR = rng.normal(size=(M, ra)), rng.normal(size=(M, rb))
        DPhi = dPhi * rng.normal(size=(M, 1))
        G2, b2 = normal_equations_rows(L, DL, Phi, DPhi, R, DR, w, y, n_train, pen)
    else:
        DL = DPhi = DR = None
        G2, b2 = normal_equations(L, Phi, R, w, y, n_train, pen)  # sparse or Kronecker, whichever is cheaper
    G, b = _normal_equations_sparse(L, DL, Phi, DPhi, R, DR, w, y, n_train, pen)
    np.testing.assert_allclose(G, G2, rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(b, b2, rtol=1e-11, atol=1e-12)
    s = slice(0, n_train)
    LP = np.einsum("ma,mi->mai", L[s], Phi[s])
    if directional:
        T = LP + np.einsum("ma,mi->mai", DL[s], Phi[s]) + np.einsum("ma,mi->mai", L[s], DPhi[s])
        A = np.einsum("mai,mc->maic", T, R[s]) + np.einsum("mai,mc->maic", LP, DR[s])
    else:
        A = np.einsum("mai,mc->maic", LP, R[s])
    A = A.reshape(n_train, -1)
    np.testing.assert_allclose(A, design_rows(L, DL, Phi, DPhi, R, DR, s), rtol=1e-13, atol=1e-13)
    wt = w[s]
    np.testing.assert_allclose(G, A.T @ (wt[:, None] * A) / wt.sum() + pen, rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(b, A.T @ (wt * y[s]) / wt.sum(), rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize("kind", ["legendre", "bspline"])
@pytest.mark.parametrize("directional", [False, True])
def test_threaded_assembly_matches_serial(kind, directional):
    # rows split over threads (Python threads for the dense/BLAS assembly, native threads for the sparse
    # one and the interfaces) give the serial normal equations up to summation order
    rng = np.random.default_rng(13)
    M, ra, n, rb = 6001, 3, 9, 2
    b1 = _basis.Basis1D(kind, n, -1.0, 1.0)
    Phi, dPhi = (np.ascontiguousarray(a) for a in _basis.evaluate(b1, rng.uniform(-1, 1, M), order=1)[:2])
    assert sparse_rows(Phi) == (kind == "bspline")
    L, R = rng.normal(size=(M, ra)), rng.normal(size=(M, rb))
    w, y = rng.uniform(0, 2, M), rng.normal(size=M)
    pen = 0.1 * np.eye(ra * n * rb)
    if directional:
        args = (L, rng.normal(size=(M, ra)), Phi, dPhi * rng.normal(size=(M, 1)), R, rng.normal(size=(M, rb)))
        one = normal_equations_rows(*args, w, y, M - 7, pen)
        two = normal_equations_rows(*args, w, y, M - 7, pen, threads=2)
    else:
        one = normal_equations(L, Phi, R, w, y, M - 7, pen)
        two = normal_equations(L, Phi, R, w, y, M - 7, pen, threads=2)
    for a, b in zip(one, two):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-13)
    C = rng.normal(size=(ra, n, rb))
    np.testing.assert_array_equal(_ftt_ext.interface_left(L, Phi, C, 2), _ftt_ext.interface_left(L, Phi, C))
    np.testing.assert_array_equal(_ftt_ext.interface_right(R, Phi, C[:, :, :rb], 2),
                                  _ftt_ext.interface_right(R, Phi, C[:, :, :rb]))
    with pytest.raises(ValueError, match="threads"):
        _ftt_ext.interface_left(L, Phi, C, 0)


def test_fit_with_workers_matches_serial():
    rng = np.random.default_rng(2)
    X = rng.uniform(-1, 1, (5000, 4))
    y = np.sin(X[:, 0] + X[:, 1]) + X[:, 2] * X[:, 3]
    kw = dict(sweeps=3, rng=0)
    f1 = FunctionalTT("bspline", degree=7, ranks=2, domain=[[-1, 1]] * 4, **kw).fit(X, y)
    f2 = FunctionalTT("bspline", degree=7, ranks=2, domain=[[-1, 1]] * 4, workers=2, **kw).fit(X, y)
    assert f1.ranks_ == f2.ranks_
    np.testing.assert_allclose(f2.predict(X), f1.predict(X), rtol=0, atol=1e-8)
    with pytest.raises(ValueError, match="workers"):
        FunctionalTT(workers=0).fit(X, y)


@pytest.mark.parametrize("shape", [(1, 5, 1), (2, 4, 3), (3, 6, 2)])
def test_penalty_matrix_is_the_kronecker_form(shape):
    from numtk.ftt._als import penalty_matrix

    ra, n, rb = shape
    P2 = np.random.default_rng(n).normal(size=(n, n))
    P2 = P2 + P2.T
    want = 0.3 * np.eye(ra * n * rb) + 0.7 * np.kron(np.kron(np.eye(ra), P2), np.eye(rb))
    np.testing.assert_array_equal(penalty_matrix(ra, n, rb, 0.3, 0.7, P2), want)
    np.testing.assert_array_equal(penalty_matrix(ra, n, rb, 0.3, 0.0, P2), 0.3 * np.eye(ra * n * rb))


def test_sparse_assembly_rejects_bad_input():
    z = np.zeros((3, 1))
    G, b = np.zeros((8, 8)), np.zeros(8)
    with pytest.raises(ValueError, match="together"):
        _ftt_ext.assemble_sparse(z, z, np.zeros((3, 8)), None, z, None, np.ones(3), np.ones(3), 0, 3, G, b)
    with pytest.raises(ValueError, match="G has"):
        _ftt_ext.assemble_sparse(z, None, np.zeros((3, 8)), None, z, None, np.ones(3), np.ones(3), 0, 3,
                                 np.zeros((4, 4)), b)
    with pytest.raises(ValueError, match="chunk"):
        _ftt_ext.assemble_sparse(z, None, np.zeros((3, 8)), None, z, None, np.ones(3), np.ones(3), 0, 4, G, b)
    assert not sparse_rows(np.ones((5, 8))) and not sparse_rows(np.zeros((0, 8)))
    spl = np.zeros((5, 32))
    spl[:, 3:7] = 1.0
    assert sparse_rows(spl, 2, 2, directional=False) and not sparse_rows(spl, 8, 8, directional=False)
    wide = np.zeros((5, 128))
    wide[:, 10:14] = 1.0
    # a GMM-40 terminal core (1, 128, 16): 2048 unknowns, sparse; far larger cores stay on BLAS
    assert sparse_rows(wide, 1, 16, directional=False) and not sparse_rows(wide, 16, 16, directional=False)


def test_bindings_reject_bad_shapes():
    with pytest.raises(ValueError, match="core 0"):
        _ftt_ext.evaluate(np.zeros((2, 1)), [0], [3], [-1.0], [1.0], 0, [np.zeros((1, 4, 1))], False, False)
    with pytest.raises(ValueError, match="last core"):
        _ftt_ext.evaluate(np.zeros((2, 1)), [0], [3], [-1.0], [1.0], 0, [np.zeros((1, 3, 2))], False, False)
    with pytest.raises(ValueError, match="lo < hi"):
        _ftt_ext.basis(np.zeros(3), 0, 3, 1.0, 1.0, 0, 0)
    with pytest.raises(TypeError):
        _ftt_ext.basis(np.zeros(3, dtype=np.int64), 0, 3, -1.0, 1.0, 0, 0)
    with pytest.raises(ValueError, match="R must"):
        _ftt_ext.site_values(np.zeros((3, 1)), np.zeros((3, 2)), np.zeros((4, 1)), np.zeros((1, 2, 1)))
