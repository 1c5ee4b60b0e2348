"""asv benchmarks of numtk.torch.spectral: one training step of diffusion_loss with each alignment term, and the
losses alone, on the problems of ``compare.py --spectral`` (``_torch_spectral.py``) at small sizes, torch on one
thread."""

from benchmarks._torch_spectral import loss_calls, step_calls


def _threads(n):
    from numtk.torch._common import torch_threads

    return torch_threads(n)


class TrainingStep:
    """Forward and backward of diffusion_loss on the token denoiser (B items of 16 tokens, width D): no term,
    REPA, the spectral regulariser (two forward passes) and spectral REPA."""

    params = [[(32, 128), (128, 128)], ["plain", "repa", "spectral", "spectral_repa"]]
    param_names = ["B_D", "term"]
    timeout = 300

    def setup(self, B_D, term):
        self.threads = _threads(1)
        self.threads.__enter__()
        self.call = step_calls(*B_D)[term]
        self.call()

    def teardown(self, B_D, term):
        self.threads.__exit__(None, None, None)

    def time_step(self, B_D, term):
        self.call()

    def peakmem_step(self, B_D, term):
        self.call()


class Losses:
    """Forward and backward of the losses alone on (rows, 64) embeddings: MSE, REPA's cosine, the spectral loss."""

    params = [[512, 2048], ["mse", "repa_loss", "spectral_contrastive_loss"]]
    param_names = ["rows", "loss"]
    timeout = 120

    def setup(self, rows, loss):
        self.threads = _threads(1)
        self.threads.__enter__()
        self.call = loss_calls(rows)[loss]

    def teardown(self, rows, loss):
        self.threads.__exit__(None, None, None)

    def time_loss(self, rows, loss):
        self.call()
