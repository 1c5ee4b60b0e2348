"""Demo of numtk.torch.ffr (placeholder: filled by issue 24)."""
