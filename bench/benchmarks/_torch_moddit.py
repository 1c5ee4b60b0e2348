"""bench/compare.py --moddit (being written)."""


def compare(*, quick=False, options=None):
    raise NotImplementedError("being written")
