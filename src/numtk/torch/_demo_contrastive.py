"""Demo of numtk.torch.contrastive (in progress)."""


def demo(*, steps=None, rng=0, progress=False):
    raise NotImplementedError
