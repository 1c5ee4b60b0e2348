"""asv benchmarks of numtk.torch.ffr: the GRPO token loss (forward and backward) beside the anchor's expression, and
one GRPO step of the tiny llama of ``compare.py --ffr`` (``_torch_ffr.py``, 2 blocks, 8 sequences of 32 + 32 tokens)
beside a plain cross-entropy step. Skipped (NotImplementedError in setup) where torch or transformers is missing."""

import copy

from benchmarks._torch_ffr import _anchor_loss, loss_inputs, make_batch, make_llama


def _need():
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:  # pragma: no cover - asv skips the benchmark
        raise NotImplementedError("torch and transformers are needed")


class TokenLoss:
    """grpo_token_loss forward + backward on (B, 256) log-probabilities."""

    params = [[16, 64]]
    param_names = ["sequences"]

    def setup(self, B):
        _need()
        self.logp, self.ref, self.adv, self.mask = loss_inputs(B, 256)

    def time_grpo_token_loss(self, B):
        from numtk.torch.ffr import grpo_token_loss

        self.logp.grad = None
        grpo_token_loss(self.logp, self.ref, self.adv, self.mask, 0.04).backward()

    def time_anchor_inline(self, B):
        self.logp.grad = None
        _anchor_loss(self.logp, self.ref, self.adv, self.mask).backward()


class TrainingStep:
    """One GRPO step (with the reference's forward) and one cross-entropy step of the tiny llama."""

    timeout = 300

    def setup(self):
        _need()
        import torch

        self.ids, self.attn, self.comp, self.adv = make_batch(2, 4, 32, 32)
        self.policy, self.ce_model = make_llama(2), make_llama(2)
        self.ref = copy.deepcopy(self.policy).eval()
        self.opt = torch.optim.SGD(self.policy.parameters(), lr=1e-5)
        self.ce_opt = torch.optim.SGD(self.ce_model.parameters(), lr=1e-5)
        self.labels = self.ids.masked_fill(~self.comp, -100)

    def time_grpo_step(self):
        from numtk.torch.ffr import grpo_step

        grpo_step(self.policy, self.ref, self.opt, self.ids, self.attn, self.comp, self.adv, beta=0.04)

    def time_cross_entropy_step(self):
        self.ce_opt.zero_grad(set_to_none=True)
        self.ce_model(self.ids, attention_mask=self.attn, labels=self.labels, use_cache=False).loss.backward()
        self.ce_opt.step()
