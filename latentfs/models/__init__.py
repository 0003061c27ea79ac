"""latentfs.models."""
