"""asv benchmarks of numtk.torch.contrastive: the vMF sampler beside scipy.stats.vonmises_fisher (the problems of
``compare.py --contrastive``, ``_torch_contrastive.py``, at small sizes), InfoNCE and the support-corrected InfoNCE
(forward and backward), torch on one thread."""

from benchmarks._torch_contrastive import vmf_calls


class VMFSampler:
    """n = 10000 draws around one mean direction: numtk's sample_vmf and scipy's vonmises_fisher.rvs."""

    params = [[(3, 10.0), (10, 20.0), (128, 1e4)], ["numtk", "scipy"]]
    param_names = ["d_kappa", "sampler"]
    timeout = 120

    def setup(self, d_kappa, sampler):
        from numtk.torch._common import torch_threads

        self.threads = torch_threads(1)
        self.threads.__enter__()
        calls, _ = vmf_calls(*d_kappa, 10_000)
        if sampler not in calls:
            self.threads.__exit__(None, None, None)
            raise NotImplementedError("scipy.stats.vonmises_fisher needs SciPy >= 1.11")
        self.call = calls[sampler]

    def teardown(self, d_kappa, sampler):
        self.threads.__exit__(None, None, None)

    def time_sample(self, d_kappa, sampler):
        self.call()


class Losses:
    """Forward and backward of InfoNCE, NT-Xent and the support-corrected InfoNCE on (B, 32) embeddings."""

    params = [[256, 1024], ["info_nce", "nt_xent", "restrict", "reweight"]]
    param_names = ["B", "loss"]
    timeout = 120

    def setup(self, B, loss):
        import torch

        from numtk.torch._common import torch_threads
        from numtk.torch.contrastive import info_nce, support_corrected_info_nce

        self.threads = torch_threads(1)
        self.threads.__enter__()
        g = torch.Generator().manual_seed(0)
        h1 = torch.randn(B, 32, generator=g, requires_grad=True)
        h2 = torch.randn(B, 32, generator=g, requires_grad=True)
        mask = torch.rand(B, B, generator=g) < 0.1
        fns = {"info_nce": lambda: info_nce(h1, h2, 0.1),
               "nt_xent": lambda: info_nce(h1, h2, 0.1, symmetric=True, same_view_negatives=True),
               "restrict": lambda: support_corrected_info_nce(h1, h2, mask, 0.1),
               "reweight": lambda: support_corrected_info_nce(h1, h2, mask, 0.1, correction="reweight",
                                                              off_support_weight=0.1)}
        fn = fns[loss]
        self.call = lambda: fn().backward()

    def teardown(self, B, loss):
        self.threads.__exit__(None, None, None)

    def time_loss(self, B, loss):
        self.call()
