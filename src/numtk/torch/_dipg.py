"""numtk.torch.dipg (placeholder: filled by issue 23)."""
