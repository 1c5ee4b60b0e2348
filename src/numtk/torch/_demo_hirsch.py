"""Demo of numtk.torch.hirsch (placeholder: filled by issue 25)."""
