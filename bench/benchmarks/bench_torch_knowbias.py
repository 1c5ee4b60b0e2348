"""asv benchmarks of numtk.torch.knowbias: integrated gradients of one layer of the random llama of
``compare.py --knowbias --quick`` (``_torch_knowbias.py``: width 128, 4 blocks, FFN 344, a 32-token prompt,
m = 20 steps), batched with the prefix cache, batched over the whole prompt, and the plain loop over the steps;
and the enhancement hooks' cost on one forward. Skipped (NotImplementedError in setup) where torch or
transformers is not installed."""

from benchmarks._torch_knowbias import CONTESTANTS, LENGTH, STEPS, TINY, tiny_llama

LAYER = 1


def _setup(self):
    try:
        import torch
        import transformers  # noqa: F401
    except ImportError:  # pragma: no cover - asv skips the benchmark
        raise NotImplementedError("torch and transformers are needed")
    self.model = tiny_llama("quick")
    self.ids = torch.randint(0, TINY["quick"]["vocab_size"], (LENGTH["quick"],),
                             generator=torch.Generator().manual_seed(1))


class IntegratedGradients:
    """Integrated gradients of one layer, per contestant."""

    params = [["batched + prefix cache", "batched, full prompt", "plain loop"]]
    param_names = ["contestant"]
    timeout = 300

    def setup(self, name):
        _setup(self)

    def time_ig(self, name):
        from numtk.torch.knowbias import integrated_gradients_neurons

        integrated_gradients_neurons(self.model, self.ids, 7, LAYER, steps=STEPS, **CONTESTANTS[name])


class Enhancement:
    """One forward of the model with 4 enhanced neurons in each of two layers, and without."""

    params = [[False, True]]
    param_names = ["enhanced"]

    def setup(self, enhanced):
        _setup(self)

    def time_forward(self, enhanced):
        import torch

        from numtk.torch.knowbias import enhance_neurons

        with torch.no_grad():
            if enhanced:
                with enhance_neurons(self.model, [(l, u) for l in (1, 2) for u in (3, 40, 77, 200)], 2.0):
                    self.model(self.ids[None])
            else:
                self.model(self.ids[None])
