"""Implementation of numtk.torch.moddit (being written)."""

from numtk.torch._common import torch  # noqa: F401
