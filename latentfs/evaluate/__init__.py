"""latentfs.evaluate."""
