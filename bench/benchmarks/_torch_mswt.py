"""bench/compare.py --mswt (being written)."""


def compare(*, quick=False, options=None):
    raise NotImplementedError("being written")
