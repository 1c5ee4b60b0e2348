"""numtk.torch.ffr (placeholder: filled by issue 24)."""
from numtk.torch import _common  # noqa: F401
