"""bench/compare.py --spectral (being written)."""


def compare(*, quick=False, options=None):
    raise NotImplementedError("being written")
