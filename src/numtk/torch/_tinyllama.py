"""A tiny llama-layout causal language model in pure torch (being written)."""

from numtk.torch._common import torch  # noqa: F401
