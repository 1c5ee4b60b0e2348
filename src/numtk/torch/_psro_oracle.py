"""numtk.torch.psro_oracle (placeholder: filled by issue 25)."""
