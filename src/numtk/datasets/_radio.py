"""RML2016.10a-like I/Q generator (placeholder: filled by issue 23)."""
