"""numtk.torch.privcode (placeholder: filled by issue 24)."""
