"""Demo of numtk.torch.pisa (placeholder: filled by issue 24)."""
