"""Demo of numtk.torch.pisa (in progress)."""


def demo(*, steps=None, rng=0, progress=False):
    raise NotImplementedError


def run(*, quick=True, out=print, plot=None):
    raise NotImplementedError
