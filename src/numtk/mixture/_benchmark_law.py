"""Placeholder: being written."""


def LossToBenchmarkLaw(*args, **kwargs):  # placeholder
    raise NotImplementedError
