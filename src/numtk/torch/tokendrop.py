"""Placeholder of numtk.torch.tokendrop (being written)."""

from numtk.torch import _common  # noqa: F401 - first: the ImportError that names the extra

__all__: list[str] = []
