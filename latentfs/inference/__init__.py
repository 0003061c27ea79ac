"""latentfs.inference."""
