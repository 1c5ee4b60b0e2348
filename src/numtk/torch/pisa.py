"""numtk.torch.pisa (placeholder: filled by issue 24)."""
from numtk.torch import _common  # noqa: F401
