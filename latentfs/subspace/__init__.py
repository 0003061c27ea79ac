"""Subspaces and projections: PLS (with VIP), random projections, kernel-to-feature maps, auxiliary variational
InfoMax projections (Agakov & Barber), hyperbolic PCA (Maurer) and FPC (Savu-Krohn & Auer)."""

from latentfs.subspace.fpc import FPC, bag_distance_features, coverage, densest_interval, lpboost_stumps, optimal_bounds
from latentfs.subspace.hpca import (
    HyperbolicPCA,
    best_threshold,
    generalization_bound,
    one_shot_nn_error,
    operator_bound,
    select_hpca,
)
from latentfs.subspace.infomax import (
    InfoMaxProjection,
    as_if_gaussian_mi,
    gaussian_channel_mi,
    infomax_bound,
    linear_gaussian_bound,
    linsker_projection,
    pca_components,
    subspace_overlap,
)
from latentfs.subspace.kernel_features import KernelFeatureMap, RandomHyperplaneWeakLearner
from latentfs.subspace.pls import PLS, KernelPLS, PLSVIPSelector, vip_scores
from latentfs.subspace.random_projection import RandomProjection, jl_min_dim

__all__ = [
    "FPC",
    "HyperbolicPCA",
    "InfoMaxProjection",
    "KernelFeatureMap",
    "KernelPLS",
    "PLS",
    "PLSVIPSelector",
    "RandomHyperplaneWeakLearner",
    "RandomProjection",
    "as_if_gaussian_mi",
    "bag_distance_features",
    "best_threshold",
    "coverage",
    "densest_interval",
    "gaussian_channel_mi",
    "generalization_bound",
    "infomax_bound",
    "jl_min_dim",
    "linear_gaussian_bound",
    "linsker_projection",
    "lpboost_stumps",
    "one_shot_nn_error",
    "operator_bound",
    "optimal_bounds",
    "pca_components",
    "select_hpca",
    "subspace_overlap",
    "vip_scores",
]
