"""Placeholder: being written."""


def allocate_budget(*args, **kwargs):  # placeholder
    raise NotImplementedError
