"""Implementation of numtk.torch.tokendrop (being written)."""

from numtk.torch._common import torch  # noqa: F401
