"""Implementation of numtk.torch.mswt (being written)."""

from numtk.torch._common import torch  # noqa: F401
