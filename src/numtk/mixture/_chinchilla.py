"""Placeholder: being written."""


def chinchilla_fit(*args, **kwargs):  # placeholder
    raise NotImplementedError
