"""asv benchmarks of numtk.torch.dipg: the screened top-k against the full top-k (torch.topk, topk_mask, a stable
sort) on the I-MLE target solve of ``compare.py --dipg`` (``_torch_dipg.py``) at small sizes, torch on one
thread; and one training step of DiscreteGraphPrompt."""

from benchmarks._torch_dipg import _threads, screen_calls


class ScreenedTopK:
    """The target solve over m items, k = 10, bound width w: the full solvers and the screened one."""

    params = [[10**4, 10**5], [0.01, 1.0], ["torch.topk", "topk_mask", "sort", "screened", "screened+threshold",
                                            "core"]]
    param_names = ["m", "width", "solver"]
    timeout = 120

    def setup(self, m, width, solver):
        self.threads = _threads(1)
        self.threads.__enter__()
        self.call = screen_calls(m, 10, width)[solver]
        self.call()

    def teardown(self, m, width, solver):
        self.threads.__exit__(None, None, None)

    def time_solve(self, m, width, solver):
        self.call()


class PromptStep:
    """Forward and backward of DiscreteGraphPrompt (I-MLE) on the demo's planted graph, 80 targets."""

    timeout = 120

    def setup(self):
        import numpy as np
        import torch

        from numtk.torch._demo_dipg import _planted
        from numtk.torch.dipg import GCN, DiscreteGraphPrompt

        self.threads = _threads(1)
        self.threads.__enter__()
        x, e, y, targets, _ = _planted(160, 4, 3, 2, 4, 1.0, 0.35, 3.0, 0.5, np.random.default_rng(0))
        self.x, self.edges = torch.tensor(x, dtype=torch.float32), torch.tensor(e)
        self.targets, self.y = torch.tensor(targets[:80]), torch.tensor(y[targets[:80]])
        with torch.random.fork_rng(devices=[]):  # the modules initialise from torch's global generator: restored
            torch.manual_seed(0)
            self.model = DiscreteGraphPrompt(GCN(self.x.shape[1], 256, 128), 3, score_hidden=32, num_classes=4)
        self.h = self.model.embed(self.x, self.edges)
        self.gen = torch.Generator().manual_seed(0)

    def teardown(self):
        self.threads.__exit__(None, None, None)

    def time_step(self):
        import torch

        self.model.zero_grad()
        logits = self.model(self.x, self.edges, self.targets, rng=self.gen, embeddings=self.h)
        torch.nn.functional.cross_entropy(logits, self.y, reduction="sum").backward()
