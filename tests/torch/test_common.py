"""The bridge's package and shared helpers: lazy modules, the ImportError without torch, the rng keyword as a
torch.Generator, tensor checks naming the argument, and reduction= as torch.nn.functional has it."""

import subprocess
import sys

import numpy as np
import pytest
import torch

import numtk
from numtk.torch import _common
from numtk.torch._common import check_reduction, check_same_device, check_tensor, reduce_loss, torch_generator


def _fresh(code):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_the_bridge_is_an_area_whose_modules_load_on_first_access():
    assert "torch" in numtk.submodules
    proc = _fresh("import sys, numtk, numtk.torch; print('torch' in sys.modules, numtk.torch.__all__); "
                  "numtk.torch.llep; print('torch' in sys.modules, 'numtk.torch.llep' in sys.modules)")
    assert proc.returncode == 0, proc.stderr
    names = ["llep", "puzzle", "tokendrop", "moddit", "mswt", "spectral", "contrastive", "dipg", "dyco", "models", "knowbias", "ffr", "privcode", "pisa",
             "hirsch", "psro_oracle"]
    assert proc.stdout.split("\n")[:2] == [f"False {names}", "True True"]
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        numtk.torch.nope
    assert dir(numtk.torch) == sorted(names)


def test_without_torch_the_bridge_says_which_extra_to_install():
    # torch made unimportable in a fresh interpreter: numtk and numtk.torch still import, the modules do not
    proc = _fresh("import sys; sys.modules['torch'] = None\n"
                  "import numtk, numtk.torch\n"
                  "try:\n    numtk.torch.llep\nexcept ImportError as e:\n    print('ImportError:', e)")
    assert proc.returncode == 0, proc.stderr
    assert 'pip install "numtk[torch]"' in proc.stdout and "numtk.torch" in proc.stdout


def test_torch_generator_takes_every_form_of_rng():
    draw = lambda g: torch.rand(4, generator=g)  # noqa: E731
    assert torch.equal(draw(torch_generator(5)), draw(torch.Generator().manual_seed(5)))
    g = torch.Generator().manual_seed(1)
    assert torch_generator(g) is g
    # a NumPy generator gives a reproducible seed, and advances
    a, b = np.random.default_rng(3), np.random.default_rng(3)
    assert torch.equal(draw(torch_generator(a)), draw(torch_generator(b)))
    assert not torch.equal(draw(torch_generator(a)), draw(torch_generator(np.random.default_rng(3))))
    assert not torch.equal(draw(torch_generator(None)), draw(torch_generator(None)))  # fresh entropy
    assert torch_generator(np.random.SeedSequence(2)).initial_seed() == torch_generator(
        np.random.SeedSequence(2)).initial_seed()
    assert torch_generator(2**64 - 1).initial_seed() == 2**64 - 1


@pytest.mark.parametrize(("rng", "error", "match"), [
    (True, TypeError, "got a bool"), (-1, ValueError, r"\[0, 2\*\*64\)"), (2**64, ValueError, "2\\*\\*64"),
    ("x", TypeError, "got str"), (1.5, TypeError, "got float"), (np.random.RandomState(0), TypeError, "RandomState"),
])
def test_torch_generator_refuses_other_values(rng, error, match):
    with pytest.raises(error, match=match):
        torch_generator(rng, name="rng")


def test_check_tensor_names_the_argument_and_says_what_was_expected():
    t = torch.zeros(2, 3)
    assert check_tensor(t, "x", shape=(2, None)) is t
    assert check_tensor(torch.zeros(2, dtype=torch.int64), "i", dtype="integer").dtype == torch.int64
    assert check_tensor(torch.tensor([np.nan]), "x", finite=False).isnan().all()
    cases = [
        (dict(t=[1.0]), TypeError, "`x` must be a torch.Tensor; got list"),
        (dict(ndim=3), ValueError, "`x` must be a 3-D tensor; got 2-D with shape \\(2, 3\\)"),
        (dict(shape=(3, None)), ValueError, r"`x` must have shape \(3, \*\); got \(2, 3\)"),
        (dict(t=torch.zeros(2), shape=(3,)), ValueError, r"`x` must have shape \(3,\); got \(2,\)"),
        (dict(t=torch.zeros(2, dtype=torch.int32)), TypeError,
         "`x` must hold floating-point numbers; got dtype torch.int32"),
        (dict(t=torch.zeros(2, dtype=torch.complex64)), TypeError, "floating-point"),
        (dict(dtype="integer"), TypeError, "`x` must hold integers"),
        (dict(t=torch.zeros(2, dtype=torch.bool), dtype="integer"), TypeError, "`x` must hold integers"),
        (dict(dtype=torch.float64), TypeError, "`x` must have dtype torch.float64; got torch.float32"),
        (dict(device="meta"), ValueError, "`x` must be on device meta; got cpu"),
        (dict(t=torch.tensor([1.0, np.inf])), ValueError, "`x` must be finite"),
        (dict(t=torch.tensor([np.nan], dtype=torch.bfloat16)), ValueError, "`x` must be finite"),
    ]
    for kwargs, error, match in cases:
        kwargs = {"t": t, **kwargs}
        with pytest.raises(error, match=match):
            check_tensor(kwargs.pop("t"), "x", **kwargs)


def test_check_same_device():
    assert check_same_device(a=torch.zeros(1), b=torch.zeros(2)) == torch.device("cpu")
    with pytest.raises(ValueError, match="`a` on cpu, `b` on meta"):
        check_same_device(a=torch.zeros(1), b=torch.zeros(1, device="meta"))


def test_reduction_as_torch_nn_functional():
    loss = torch.tensor([1.0, 2.0, 6.0])
    for reduction in ("mean", "sum", "none"):
        expected = torch.nn.functional.l1_loss(loss, torch.zeros(3), reduction=reduction)
        assert torch.equal(reduce_loss(loss, reduction), expected)
        assert check_reduction(reduction) == reduction
    for bad in ("avg", None, 1, "Mean"):
        with pytest.raises(ValueError, match="`reduction` must be one of 'mean', 'sum', 'none'"):
            reduce_loss(loss, bad)
    assert _common.REDUCTIONS == ("mean", "sum", "none")


def test_the_helpers_examples_run():
    import doctest

    result = doctest.testmod(_common, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0


def test_the_finiteness_check_records_no_graph():
    # checking a tensor that requires grad must not leave a graph behind (saved-tensor hooks would count it)
    x = torch.ones(4, requires_grad=True)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        check_tensor(x, "x")
    assert saved == []


def test_the_finiteness_check_sees_past_an_overflowing_sum():
    big = torch.full((4,), 1e38, dtype=torch.float32)   # finite values whose sum overflows float32
    assert check_tensor(big, "x") is big
    for bad in (float("nan"), float("inf"), -float("inf")):
        t = big.clone()
        t[2] = bad
        with pytest.raises(ValueError, match="`x` must be finite"):
            check_tensor(t, "x")


@pytest.mark.parametrize("fallback", [False, True])
@pytest.mark.parametrize("shape", [0.2, 1.0, 4.5])
def test_standard_gamma_moments_on_both_paths(monkeypatch, fallback, shape):
    # Gamma(a, 1) has mean a and variance a; the fallback is Marsaglia and Tsang's sampler in plain torch
    if fallback:
        def unavailable(*args, **kwargs):
            raise NotImplementedError
        monkeypatch.setattr(torch, "_standard_gamma", unavailable)
    n = 200_000
    x = _common.standard_gamma(shape, (4, n // 4), torch_generator(3), dtype=torch.float64, device="cpu")
    assert x.shape == (4, n // 4) and x.dtype == torch.float64 and bool((x > 0).all())
    x = x.reshape(-1)
    se_mean = (shape / n) ** 0.5
    assert abs(float(x.mean()) - shape) < 4 * se_mean
    # Var(x^2 ...) bound: the sample variance's standard error is sqrt((mu4 - sigma^4) / n), mu4 = 3a^2 + 6a
    se_var = ((3 * shape**2 + 6 * shape - shape**2) / n) ** 0.5
    assert abs(float(x.var()) - shape) < 4 * se_var
    again = _common.standard_gamma(shape, (4, n // 4), torch_generator(3), dtype=torch.float64, device="cpu")
    assert torch.equal(again.reshape(-1), x)


def test_device_generator_keeps_a_generator_on_the_device_and_seeds_others():
    g = torch_generator(5)
    assert _common.device_generator(g, "cpu") is g
    a = torch.rand(3, generator=_common.device_generator(5, torch.device("cpu")))
    assert torch.equal(a, torch.rand(3, generator=torch_generator(5)))
    with pytest.raises(TypeError, match="`seed`"):
        _common.device_generator("x", "cpu", name="seed")
