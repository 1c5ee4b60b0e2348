"""Demo of numtk.torch.contrastive (placeholder: filled by issue 23)."""
