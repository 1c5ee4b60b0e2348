"""Placeholder: being written."""


def planted_law(*args, **kwargs):  # placeholder
    raise NotImplementedError

def simulate_runs(*args, **kwargs):  # placeholder
    raise NotImplementedError
