"""numtk.torch.knowbias (placeholder: filled by issue 24)."""
