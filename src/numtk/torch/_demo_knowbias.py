"""Demo of numtk.torch.knowbias (in progress)."""


def demo(*, steps=None, rng=0, progress=False, smollm2=None):
    raise NotImplementedError


def run(*, quick=True, out=print, plot=None):
    raise NotImplementedError
