"""Placeholder: being written."""


def MixtureLaw(*args, **kwargs):  # placeholder
    raise NotImplementedError

def mixture_features(*args, **kwargs):  # placeholder
    raise NotImplementedError
