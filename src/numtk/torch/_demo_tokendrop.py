"""The tokendrop demonstration (being written)."""


def run(*, quick=True, out=print, plot=None):
    raise NotImplementedError("being written")
