"""The compiled moe kernels give the same bits for every thread count, on both sides of their grains.

``workers=-1`` starts threads only above a kernel's grain (``n_threads(..., work=..., grain=...)``); the
threaded path is also forced below it (``uncapped``), so each size compares the serial call with the threaded
ones. The values themselves are checked against references in test_bf16.py and test_llep.py.
"""

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from numtk._lib._workers import uncapped
from numtk.moe import llep_plan, pack_bf16, packed_matvec, unpack_bf16, zipf_loads
from numtk.moe._bf16 import BF16_ELEMENTWISE_GRAIN, BF16_MATVEC_GRAIN, BF16_UNPACK_GRAIN, _round_bf16
from numtk.moe._llep import LLEP_GRAIN


def _same_for_every_thread_count(call):
    ref = call(1)
    outs = [call(-1)]
    with uncapped():
        outs += [call(2), call(3)]
    for out in outs:
        if isinstance(ref, tuple):
            for a, b in zip(ref, out):
                assert_array_equal(a, b)
        else:
            assert_array_equal(ref, out)


def _flags(rng, n):
    return [rng.random(n) < 0.5 for _ in range(4)]


@pytest.mark.parametrize("n", [300_000, 2 * BF16_ELEMENTWISE_GRAIN + 1])
def test_pack_and_round_do_not_depend_on_the_thread_count(n):
    rng = np.random.default_rng(n)
    mag = (rng.random(n) * 4).astype(np.float32)
    mag[::7] = 0.0  # clamped entries: the count is summed over threads
    flags = _flags(rng, n)
    _same_for_every_thread_count(lambda w: pack_bf16(mag, *flags, return_clamped=True, workers=w))
    x = rng.standard_normal(n)
    _same_for_every_thread_count(lambda w: _round_bf16(x, workers=w))


@pytest.mark.parametrize("n", [300_000, pytest.param(2 * BF16_UNPACK_GRAIN + 1, marks=pytest.mark.slow)])
def test_unpack_does_not_depend_on_the_thread_count(n):
    rng = np.random.default_rng(n)
    words = rng.integers(0, 2**16, n, dtype=np.uint16)
    _same_for_every_thread_count(lambda w: unpack_bf16(words, 1, as_float=True, workers=w))
    if n < BF16_UNPACK_GRAIN:
        parts = [unpack_bf16(words, workers=w) for w in (1, -1)]
        for key in ("magnitude", "mask_i", "mask_j", "sign_i", "sign_j"):
            assert_array_equal(parts[0][key], parts[1][key])


@pytest.mark.parametrize("d, batch", [(256, 2), (1024, 2 * BF16_MATVEC_GRAIN // 1024**2 + 1)])
def test_packed_matvec_does_not_depend_on_the_thread_count(d, batch):
    rng = np.random.default_rng(d)
    words = pack_bf16(rng.random((d, d)).astype(np.float32), *_flags(rng, (d, d)))
    x = rng.standard_normal((batch, d)).astype(np.float32)
    _same_for_every_thread_count(lambda w: packed_matvec(words, x, 0, workers=w))
    ref = np.asarray(unpack_bf16(words, 0, as_float=True), dtype=np.float64) @ x.T.astype(np.float64)
    np.testing.assert_allclose(packed_matvec(words, x, 0, workers=-1), ref.T, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("layers", [16, 2 * LLEP_GRAIN // 64 + 1])
def test_llep_plan_does_not_depend_on_the_thread_count(layers):
    loads = zipf_loads(64, 4096, size=layers, rng=layers)

    def call(w):
        res = llep_plan(loads, 8, workers=w)
        return res.device_loads, res.forced

    _same_for_every_thread_count(call)
