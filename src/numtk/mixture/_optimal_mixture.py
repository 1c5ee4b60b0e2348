"""Placeholder: being written."""


def optimal_mixture(*args, **kwargs):  # placeholder
    raise NotImplementedError
