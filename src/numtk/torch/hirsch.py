"""numtk.torch.hirsch (placeholder: filled by issue 25)."""
from numtk.torch import _common  # noqa: F401
