"""bench/compare.py --tokendrop (being written)."""


def compare(*, quick=False, options=None):
    raise NotImplementedError("being written")
