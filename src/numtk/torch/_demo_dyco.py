"""Demo of numtk.torch.dyco (placeholder: filled by issue 23)."""
