"""Fuzz cases of numtk.torch.models (collected by cases_torch.py; see _harness.py for the catalogue).

The loaders take only ``dtype`` and ``device``, checked before any file is read, so every invalid value is
refused in microseconds whether or not the wheels are installed. The valid call itself (loading SmolLM2 takes
seconds) is not made by the catalogue's invalid values; the timeout covers a slow first import.
"""

from _harness import Case


def _loader(name):
    def make():
        import torch

        import numtk.torch.models as models

        return getattr(models, name), (), {"dtype": torch.float32, "device": "cpu"}
    return make


MODELS: list = [
    Case("numtk.torch.models.load_smollm2", _loader("load_smollm2"), {}, timeout=60.0),
    Case("numtk.torch.models.load_minilm", _loader("load_minilm"), {}, timeout=60.0),
]
