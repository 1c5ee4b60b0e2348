"""asv benchmarks of numtk.moe: the LLEP planner, standard EP, EPLB, the MILP and the simulator (side by side
with the pure-Python planner in _moe.py)."""

import numpy as np

from benchmarks._moe import BF16_SHAPES, PLANNER_SIZES, bf16_layer, zipf_layer


class Planner:
    params = [list(PLANNER_SIZES)]
    param_names = ["N, P"]

    def setup(self, size):
        self.loads, self.placement = zipf_layer(*size)

    def time_llep_plan(self, size):
        from numtk.moe import llep_plan

        llep_plan(self.loads, self.placement, imbalance_threshold=None)

    def time_standard_ep_plan(self, size):
        from numtk.moe import standard_ep_plan

        standard_ep_plan(self.loads, self.placement)


class PlannerBatch:
    params = [1, 2]
    param_names = ["workers"]

    def setup(self, workers):
        from numtk.moe import dirichlet_loads

        self.loads = dirichlet_loads(256, 16384, alpha=0.3, top_k=8, size=64, rng=0)

    def time_llep_plan_64_layers(self, workers):
        from numtk.moe import llep_plan

        llep_plan(self.loads, 32, imbalance_threshold=None, workers=workers)


class OptimalPlan:
    params = [[(12, 3), (24, 6)]]  # one axis of (N, P) pairs: a bare list of tuples reads as two axes
    param_names = ["N, P"]
    timeout = 120

    def setup(self, size):
        from numtk.moe import dirichlet_loads

        self.N, self.P = size
        self.loads = dirichlet_loads(self.N, 200 * self.P, alpha=0.5, top_k=2, rng=0)

    def time_optimal_plan(self, size):
        from numtk.moe import optimal_plan

        optimal_plan(self.loads, self.P)

    def time_optimal_plan_three_foreign(self, size):
        from numtk.moe import optimal_plan

        optimal_plan(self.loads, self.P, memory_limit=self.N // self.P + 3.0, expert_bytes=1.0)


class EPLB:
    def setup(self):
        self.weight = np.random.default_rng(0).integers(1, 1000, size=(61, 256))

    def time_eplb_rebalance(self):
        from numtk.moe import eplb_rebalance

        eplb_rebalance(self.weight, 288, 8, 4, 32)


class Simulator:
    def setup(self):
        from numtk.moe import llep_plan

        self.loads, placement = zipf_layer(10_000, 1_000)
        self.plan = llep_plan(self.loads, placement, imbalance_threshold=None)

    def time_simulate_ep_h200(self):
        from numtk.moe import simulate_ep

        simulate_ep(self.plan, "h200")


class PackedMatvec:
    """PuzzleMoE's decode-fused mat-vec beside the same compiled loop over plain bf16 words (the spec's target:
    at most 1.3x), at the Mixtral expert shapes."""

    params = [list(BF16_SHAPES), [1, 8], [1, -1]]
    param_names = ["d_out, d_in", "batch", "workers"]

    def setup(self, shape, batch, workers):
        self.packed, self.plain = bf16_layer(*shape)
        x = np.random.default_rng(1).normal(size=(batch, shape[1])).astype(np.float32)
        self.x = x[0] if batch == 1 else x

    def time_packed_matvec_expert_i(self, shape, batch, workers):
        from numtk.moe import packed_matvec

        packed_matvec(self.packed, self.x, 0, workers=workers)

    def time_packed_matvec_expert_j(self, shape, batch, workers):
        from numtk.moe import packed_matvec

        packed_matvec(self.packed, self.x, 1, workers=workers)

    def time_plain_bf16_matvec(self, shape, batch, workers):
        from numtk.moe._bf16 import _bf16_matvec

        _bf16_matvec(self.plain, self.x, workers=workers)


class PackUnpackBF16:
    """pack_bf16 / unpack_bf16 on 10**7 elements (compare.py --moe sets them against NumPy on 10**8)."""

    params = [1, -1]
    param_names = ["workers"]

    def setup(self, workers):
        from numtk.moe import pack_bf16

        g = np.random.default_rng(2)
        n = 10**7
        self.magnitude = np.abs(g.normal(0, 0.02, n)).astype(np.float32)
        self.flags = [g.random(n) < 0.5 for _ in range(4)]
        self.packed = pack_bf16(self.magnitude, *self.flags)

    def time_pack_bf16(self, workers):
        from numtk.moe import pack_bf16

        pack_bf16(self.magnitude, *self.flags, workers=workers)

    def time_unpack_bf16(self, workers):
        from numtk.moe import unpack_bf16

        unpack_bf16(self.packed, workers=workers)

    def time_unpack_bf16_expert_as_float(self, workers):
        from numtk.moe import unpack_bf16

        unpack_bf16(self.packed, 1, as_float=True, workers=workers)


class PuzzleMerge:
    # one parameter whose values are shapes (asv reads a flat list of tuples as one parameter per tuple)
    params = [[(1024, 1024), (4096, 4096)]]
    param_names = ["shape"]

    def setup(self, shape):
        self.A, self.B = np.random.default_rng(0).normal(0.0, 0.02, (2, *shape)).astype(np.float32)

    def time_puzzle_merge(self, shape):
        from numtk.moe import puzzle_merge

        puzzle_merge(self.A, self.B)
