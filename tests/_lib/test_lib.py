"""numtk._lib: Result, rng, workers, validation, progress."""

import multiprocessing
import operator
import pickle

import numpy as np
import pytest
from numpy.testing import assert_equal

from numtk._lib import (MapWrapper, Result, SignificanceResult, as_map, n_threads, normalize_rng,
                        progress_bar, spawn_rngs)
from numtk._lib import _validation as v
from numtk._lib._workers import available_cores, max_workers


# -- Result ---------------------------------------------------------------------------------------

def test_result_attribute_and_mapping_access():
    res = Result(order=np.arange(3), value=1.5)
    assert res.value == 1.5 and res["value"] == 1.5
    assert list(res.keys()) == ["order", "value"]
    assert dict(res)["value"] == 1.5
    assert "order" in res and "missing" not in res
    assert "value" in dir(res)
    with pytest.raises(KeyError):
        res["missing"]
    with pytest.raises(AttributeError):
        res.missing
    with pytest.raises(TypeError, match="does not unpack"):
        a, b = res


def test_result_repr_is_aligned_and_abbreviates_arrays():
    text = repr(Result(a=1, long_name=np.arange(1000)))
    assert text.startswith("Result(\n") and text.endswith("\n)")
    assert "        a: 1" in text and "long_name: array([  0,   1,   2, ..., 997, 998, 999]" in text
    assert repr(Result()) == "Result()"


def test_significance_result_unpacks_like_scipy():
    res = SignificanceResult(statistic=0.5, pvalue=0.01, correlation=0.5)
    stat, p = res
    assert (stat, p) == (0.5, 0.01) and res[0] == 0.5 and res[1] == 0.01 and len(res) == 2


def test_result_equality_and_pickle():
    a = Result(x=np.array([1.0, np.nan]), k=2)
    assert a == Result(x=np.array([1.0, np.nan]), k=2)
    assert a != Result(x=np.array([1.0, 2.0]), k=2)
    assert pickle.loads(pickle.dumps(a)) == a


# -- rng ------------------------------------------------------------------------------------------

def test_normalize_rng():
    g = np.random.default_rng(1)
    assert normalize_rng(g) is g
    assert_equal(normalize_rng(5).random(3), np.random.default_rng(5).random(3))
    assert_equal(normalize_rng(np.int64(5)).random(3), np.random.default_rng(5).random(3))
    assert isinstance(normalize_rng(None), np.random.Generator)
    ss = np.random.SeedSequence(3)
    assert_equal(normalize_rng(ss).random(2), np.random.default_rng(np.random.SeedSequence(3)).random(2))
    with pytest.raises(TypeError, match="RandomState is not accepted"):
        normalize_rng(np.random.RandomState(0))
    with pytest.raises(TypeError, match="`seed` must be None, an int or a numpy.random.Generator; got str"):
        normalize_rng("0", name="seed")
    with pytest.raises(ValueError, match="non-negative"):
        normalize_rng(-1)
    with pytest.raises(TypeError, match="bool"):
        normalize_rng(True)


def test_spawn_rngs_are_independent_and_reproducible():
    a = [g.random() for g in spawn_rngs(7, 3)]
    b = [g.random() for g in spawn_rngs(7, 3)]
    assert a == b and len(set(a)) == 3


# -- workers --------------------------------------------------------------------------------------

def test_n_threads():
    assert n_threads(1) == 1 and n_threads(3) == 3
    assert n_threads(-1) == available_cores() >= 1
    for bad, exc in [(0, ValueError), (-2, ValueError), (1.5, TypeError), (True, TypeError),
                     (map, TypeError), (np.True_, TypeError), (2**31, ValueError), (4096, ValueError),
                     (max_workers() + 1, ValueError)]:
        with pytest.raises(exc, match="`workers`"):
            n_threads(bad)
    assert n_threads(max_workers()) == max_workers() == min(1024, max(32, 4 * available_cores()))
    assert n_threads(np.int32(2)) == 2
    with pytest.raises(ValueError, match="`workers` must be at most"):
        MapWrapper(10**6)


_THREAD_LIMIT = """
import resource, numpy as np
from numtk.stats import _stats_ext
x = np.random.default_rng(0).random(200_000)
size = next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("VmSize"))
limit = size + 300 * 2**20   # room for a few thread stacks, not for a thousand
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
try:
    _stats_ext.kendall_counts(x, x, 1024)
except RuntimeError as e:
    print("refused:", e)
print("after:", _stats_ext.kendall_counts(x, x, 2)[:2])
"""


def test_a_thread_that_cannot_start_is_an_exception_not_an_abort():
    # parallel_for_chunks joins the threads it started and raises; before, the process aborted
    # ("terminate called without an active exception") when std::thread could not start.
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", _THREAD_LIMIT], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "refused: could not start thread" in run.stdout and "pass fewer `workers`" in run.stdout
    assert "after: (0, 0)" in run.stdout  # the module still works


# Functions sent to process pools must be importable by the workers: test modules are not (pytest
# imports them by path), so the pool tests map a function of the standard library.
_negate = operator.neg


def test_map_wrapper_serial_pool_and_callable():
    with MapWrapper(1) as m:
        assert list(m(_negate, range(4))) == [0, -1, -2, -3]
    with as_map(2) as m:
        assert list(m(_negate, range(6))) == [0, -1, -2, -3, -4, -5]
    assert m._pool is None  # the pool it made is closed
    calls = []

    def my_map(func, iterable):
        calls.append(1)
        return map(func, iterable)

    with MapWrapper(my_map) as m:
        assert list(m(_negate, [3])) == [-3]
    assert calls == [1]
    # a user-owned pool is used but not closed
    ctx = multiprocessing.get_context("forkserver")
    with ctx.Pool(2) as pool:
        with MapWrapper(pool.map) as m:
            assert list(m(_negate, range(3))) == [0, -1, -2]
        assert list(pool.map(_negate, [2])) == [-2]
    with pytest.raises(TypeError, match=r"signature `workers\(func, iterable\)`"):
        MapWrapper(lambda f: f)(_negate, [1])
    with pytest.raises(ValueError, match="`workers` must be a positive int or -1"):
        MapWrapper(0)


# -- validation -----------------------------------------------------------------------------------

def test_check_option_int_real():
    assert v.check_option("b", "variant", ["b", "c"]) == "b"
    with pytest.raises(ValueError, match=r"`variant` must be one of 'b', 'c'; got 'z'"):
        v.check_option("z", "variant", ["b", "c"])
    with pytest.raises(ValueError, match=r"got 3"):
        v.check_option(3, "variant", ["b", "c"])
    assert v.check_int(np.int32(4), "k", minimum=1) == 4
    with pytest.raises(ValueError, match="`k` must be >= 1; got 0"):
        v.check_int(0, "k", minimum=1)
    with pytest.raises(ValueError, match="`k` must be <= 3; got 4"):
        v.check_int(4, "k", maximum=3)
    with pytest.raises(TypeError, match="`k` must be an int; got float"):
        v.check_int(1.0, "k")
    with pytest.raises(TypeError, match="`k` must be an int; got a bool"):
        v.check_int(True, "k")
    assert v.check_real(0.5, "c", low=0, high=1) == 0.5
    with pytest.raises(ValueError, match=r"`c` must lie in \(0, 1\]; got 0.0"):
        v.check_real(0.0, "c", low=0, high=1, low_open=True)
    with pytest.raises(ValueError, match="`c` must be finite"):
        v.check_real(float("nan"), "c")


def test_as_array_and_friends():
    a = np.arange(6)
    assert v.as_1d_numeric(a, "x") is a  # no copy
    assert v.as_1d_numeric(np.float16([1, 2]), "x").dtype == np.float32
    swapped = np.arange(3, dtype=">i4")
    out = v.as_1d_numeric(swapped, "x")
    assert out.dtype.isnative
    assert_equal(out, swapped)
    with pytest.raises(TypeError, match="`x` must be a dense array; got a sparse"):
        import scipy.sparse

        v.as_array(scipy.sparse.csr_matrix(np.eye(2)), "x")
    with pytest.raises(TypeError, match="masked"):
        v.as_array(np.ma.masked_array([1, 2], mask=[0, 1]), "x")
    with pytest.raises(ValueError, match=r"`x` must be 2-D; got an array of shape \(3,\)"):
        v.as_array([1, 2, 3], "x", ndim=2)
    with pytest.raises(TypeError, match="`x` must be array-like"):
        v.as_array([[1, 2], [3]], "x")
    assert v.check_same_length(a=[1, 2], b=[3, 4]) == 2
    with pytest.raises(ValueError, match="`a` and `b` must have the same length; `a` has 1, `b` has 2"):
        v.check_same_length(a=[1], b=[3, 4])
    v.check_finite(np.array([1.0, 2.0]), "x")
    with pytest.raises(ValueError, match="`x` must be finite"):
        v.check_finite(np.array([1.0, np.inf]), "x")
    with pytest.raises(ValueError, match="`x` must not contain NaN"):
        v.check_finite(np.array([1.0, np.nan]), "x")
    v.check_finite(np.array([1.0, np.nan]), "x", allow_nan=True)


def test_nan_mask():
    assert v.nan_mask(np.arange(3), np.array([1.0, 2.0, 3.0])) is None
    assert_equal(v.nan_mask(np.array([np.nan, 1.0]), np.array([1.0, np.nan])), [True, True])
    # inf - inf makes the cheap sum NaN; the element-wise check then finds no NaN
    assert v.nan_mask(np.array([np.inf, -np.inf])) is None


# -- progress -------------------------------------------------------------------------------------

def test_progress_bar(capsys):
    bar = progress_bar(range(3), progress=False)
    assert list(bar) == [0, 1, 2]
    bar.update(2)
    assert bar.n == 2
    with progress_bar(total=5, progress=True, desc="steps", disable=False) as real:
        real.update(5)
        assert real.n == 5
    with progress_bar(range(2), progress={"leave": False}) as real:
        assert list(real) == [0, 1]


def test_map_wrapper_on_a_dask_local_cluster():
    distributed = pytest.importorskip("distributed")  # a test extra: installed in CI
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        with MapWrapper(lambda func, items: client.gather(client.map(func, list(items)))) as m:
            assert list(m(_negate, range(5))) == [0, -1, -2, -3, -4]


def test_check_real_refuses_ints_beyond_the_float_range():
    with pytest.raises(ValueError, match="`tol` must be finite; got a number too large for a float"):
        v.check_real(10**400, "tol")


def test_check_size_refuses_what_cannot_be_allocated():
    assert 2**20 < v.available_memory() <= 2**62
    v.check_size(1000, 8, "n")  # 8 kB: fine
    with pytest.raises(ValueError, match=r"`n` = 1000000000000000 needs about .* GiB, more than the"):
        v.check_size(10**15, 8, "n")
