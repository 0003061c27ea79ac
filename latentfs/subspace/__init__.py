"""Subspaces and projections: PLS (with VIP), random projections, kernel-to-feature maps."""

from latentfs.subspace.kernel_features import KernelFeatureMap, RandomHyperplaneWeakLearner
from latentfs.subspace.pls import PLS, KernelPLS, PLSVIPSelector, vip_scores
from latentfs.subspace.random_projection import RandomProjection, jl_min_dim

__all__ = [
    "KernelFeatureMap",
    "KernelPLS",
    "PLS",
    "PLSVIPSelector",
    "RandomHyperplaneWeakLearner",
    "RandomProjection",
    "jl_min_dim",
    "vip_scores",
]
