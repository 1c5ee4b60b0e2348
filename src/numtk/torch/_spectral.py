"""Implementation of numtk.torch.spectral (being written)."""

from numtk.torch._common import torch  # noqa: F401
