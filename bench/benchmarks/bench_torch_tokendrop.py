"""asv benchmarks of numtk.torch.tokendrop: one LoRA training step (forward, loss, backward) of the llama of
``compare.py --tokendrop`` (``_torch_tokendrop.py``) at a small size (4 blocks, 2 x 128 tokens), with plain
backpropagation, TokenDrop and DropBP's layer skipping, and the saved activation bytes of each (``track_``).
Skipped (NotImplementedError in setup) where torch is not installed."""

from benchmarks._torch_tokendrop import CONTESTANTS, WIDTH, make_model

#: the contestants benchmarked here (a subset of compare.py's)
NAMES = ["backprop", "TokenDrop rho=0.5", "TokenDrop rho=0.25", "TokenDrop rho=0.5, exact=False", "DropBP rho=0.5"]
BLOCKS, BATCH, LENGTH = 4, 2, 128


def _setup(self, name):
    try:
        import torch  # noqa: F401
    except ImportError:  # pragma: no cover - asv skips the benchmark
        raise NotImplementedError("torch is not installed")
    from numtk.torch.tokendrop import copy_task

    self.model = make_model(BLOCKS, CONTESTANTS[name], name=name)
    self.ids, self.labels = copy_task(BATCH, LENGTH, WIDTH["vocab_size"], rng=0)


class TrainingStep:
    """Forward, loss and backward of the LoRA model, per contestant."""

    params = [NAMES]
    param_names = ["contestant"]
    timeout = 300

    def setup(self, name):
        _setup(self, name)

    def time_step(self, name):
        from numtk.torch.tokendrop import lm_loss

        loss = lm_loss(self.model(self.ids), self.labels)
        if loss.requires_grad:
            loss.backward()
        self.model.zero_grad(set_to_none=True)

    def track_saved_activation_mib(self, name):
        from numtk.torch.tokendrop import lm_loss, saved_activation_bytes

        return saved_activation_bytes(lambda: lm_loss(self.model(self.ids), self.labels)) / 2**20

    track_saved_activation_mib.unit = "MiB"


class Selection:
    """TokenDrop's scoring and nested selection alone, on (4, 2048) cumulative scores."""

    params = [[0.25, 0.5]]
    param_names = ["rho"]

    def setup(self, rho):
        try:
            import torch
        except ImportError:  # pragma: no cover
            raise NotImplementedError("torch is not installed")
        g = torch.Generator().manual_seed(0)
        self.x_in = torch.randn(4, 2048, 256, generator=g)
        self.x_out = torch.randn(4, 2048, 256, generator=g)
        self.scores = torch.rand(4, 2048, generator=g)

    def time_residual_update_scores(self, rho):
        from numtk.torch.tokendrop import residual_update_scores

        residual_update_scores(self.x_in, self.x_out)

    def time_cumulative_topk(self, rho):
        from numtk.torch.tokendrop import cumulative_topk

        cumulative_topk(self.scores, rho)
