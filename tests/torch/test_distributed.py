"""numtk.torch.llep's process runner and benchmark: run_distributed returns every rank's value, re-raises the
error of a failing rank with its traceback, stops ranks that hang; benchmark_llep times LLEP against standard
EP on the same layer (its numbers are not asserted: only what it measures and that both methods agree)."""

import functools

import numpy as np
import pytest
import torch.distributed as dist

from numtk.torch.llep import benchmark_llep, run_distributed


def fail_on_rank_1():
    if dist.get_rank() == 1:
        raise ValueError("rank 1 says no")
    dist.barrier()  # rank 0 waits for rank 1, which is gone: its error is a consequence, not the cause
    return "unreachable"


def rank_and_args(*args):
    return dist.get_rank(), dist.get_world_size(), args


def sleep_forever():
    import time

    time.sleep(600)


def test_run_distributed_returns_every_rank_value_in_rank_order():
    # a partial of a function of this test file: the ranks load the file to find it
    assert run_distributed(functools.partial(rank_and_args, "a"), 3, "b", timeout=120) == [
        (0, 3, ("a", "b")), (1, 3, ("a", "b")), (2, 3, ("a", "b"))]


def test_run_distributed_propagates_a_rank_error_with_its_traceback():
    with pytest.raises(ValueError, match="rank 1 says no") as info:
        run_distributed(fail_on_rank_1, 2, timeout=120)
    assert "fail_on_rank_1" in str(info.value.__cause__)


def test_run_distributed_stops_at_its_timeout():
    with pytest.raises(TimeoutError, match="did not finish"):
        run_distributed(sleep_forever, 1, timeout=1.0)


@pytest.mark.parametrize(("args", "kwargs", "error", "match"), [
    ((lambda: 1, 1), {}, TypeError, "`fn` must be a module-level function"),
    ((5, 1), {}, TypeError, "`fn` must be callable"),
    ((sleep_forever, 0), {}, ValueError, "`world_size`"),
    ((sleep_forever, 10**6), {}, ValueError, "`world_size`"),
    ((sleep_forever, 2), {"backend": "mpi"}, ValueError, "`backend`"),
    ((sleep_forever, 2), {"timeout": 0.0}, ValueError, "`timeout`"),
    ((sleep_forever, 2), {"threads": 0}, ValueError, "`threads`"),
])
def test_run_distributed_refuses_bad_arguments_before_spawning(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        run_distributed(*args, **kwargs)


def test_benchmark_measures_both_methods_on_the_same_layer():
    res = benchmark_llep(tokens=96, hidden_size=8, intermediate_size=16, num_experts=8, top_k=2, repeats=2,
                         backward=True, min_chunk=4, timeout=240)
    assert len(res.ep_times) == len(res.llep_times) == 2 and res.ep_time > 0 and res.llep_time > 0
    assert res.ep_cpu_time > 0 and res.llep_cpu_time > 0 and res.cpu_speedup == res.ep_cpu_time / res.llep_cpu_time
    # loads: the totals per expert, as numtk.moe's planners take them; source_loads: per source rank
    assert res.loads.shape == (8,) and res.loads.sum() == 2 * 96 * 2
    assert res.source_loads.shape == (8, 2) and np.array_equal(res.source_loads.sum(axis=1), res.loads)
    assert np.all(res.source_loads.sum(axis=0) == 96 * 2)      # each rank routes its 96 tokens to 2 experts
    # 95 % of the tokens go to experts 0..3, all native on rank 0: standard EP loads rank 0, LLEP halves it
    assert res.loads[:4].sum() >= 0.9 * res.loads.sum()
    assert res.ep_max_load >= 0.9 * res.loads.sum() and res.llep_max_load <= -(-res.loads.sum() // 2) + 4
    assert res.ideal_speedup > 1.8 and res.max_abs_diff < 1e-4
    with pytest.raises(ValueError, match="multiple of `world_size`"):
        benchmark_llep(world_size=3, num_experts=8)
