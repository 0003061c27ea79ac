"""latentfs.subspace."""
