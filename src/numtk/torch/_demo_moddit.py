"""The moddit demonstration (being written)."""


def demo(*, steps=None, rng=0, progress=False):
    raise NotImplementedError("being written")


def run(*, quick=True, out=print, plot=None):
    raise NotImplementedError("being written")
