"""asv benchmarks of numtk.torch.moddit: block-sparse attention beside dense scaled_dot_product_attention (the
problem of ``compare.py --moddit``, ``_torch_moddit.py``, at L = 4096), the block map and the line fit; torch on
one thread (the primary figure of compare.py). Skipped (NotImplementedError in setup) where torch is not
installed."""

from benchmarks._torch_moddit import BLOCK, lines_mask, problem, row_mask


def _setup(self):
    """Skip where torch is missing; otherwise one thread of torch until teardown."""
    try:
        import torch  # noqa: F401
    except ImportError:  # pragma: no cover - asv skips the benchmark
        raise NotImplementedError("torch is not installed")
    from numtk.torch._common import torch_threads

    self.threads = torch_threads(1)
    self.threads.__enter__()


def _teardown(self):
    self.threads.__exit__(None, None, None)


class BlockSparseAttention:
    """L = 4096, blocks of 128 (32 x 32), 2 heads of dimension 64, float32: per-row random and structured-lines
    masks at the given fraction of masked blocks, and dense SDPA."""

    params = [[0.5, 0.8, 0.9], ["rows", "lines"]]
    param_names = ["sparsity", "mask"]
    timeout = 300

    def setup(self, sparsity, mask):
        _setup(self)
        self.q, self.k, self.v = problem(4096)
        n = 4096 // BLOCK
        self.mask = row_mask(n, sparsity) if mask == "rows" else lines_mask(n, sparsity)

    def teardown(self, sparsity, mask):
        _teardown(self)

    def time_block_sparse_attention(self, sparsity, mask):
        from numtk.torch.moddit import block_sparse_attention

        block_sparse_attention(self.q, self.k, self.v, self.mask, BLOCK)

    def time_dense_sdpa(self, sparsity, mask):
        import torch

        torch.nn.functional.scaled_dot_product_attention(self.q, self.k, self.v)

    def peakmem_block_sparse_attention(self, sparsity, mask):
        from numtk.torch.moddit import block_sparse_attention

        block_sparse_attention(self.q, self.k, self.v, self.mask, BLOCK)


class BlockMapAndFit:
    """The block map of L = 2048 tokens in blocks of 32 (a 64 x 64 map per head, 2 heads) and the line fit of 8
    maps of 128 x 128 blocks (frames of 8)."""

    timeout = 300

    def setup(self):
        _setup(self)
        import torch

        self.q, self.k, _ = problem(2048)
        self.S = torch.rand(8, 128, 128, generator=torch.Generator().manual_seed(0))

    def teardown(self):
        _teardown(self)

    def time_block_sparsity_map(self):
        from numtk.torch.moddit import block_sparsity_map

        block_sparsity_map(self.q, self.k, 32)

    def time_fit_line_features(self):
        from numtk.torch.moddit import fit_line_features

        fit_line_features(self.S, 8)
