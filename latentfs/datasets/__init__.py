"""latentfs.datasets."""
