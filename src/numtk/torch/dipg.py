"""numtk.torch.dipg (placeholder: filled by issue 23)."""
from numtk.torch import _common  # noqa: F401
