"""Feature weights and feature selectors."""

from latentfs.select.base import BaseSelector
from latentfs.select.bss import SVMFeatureSelector
from latentfs.select.dca_features import DCAClassifier, DCAFeatures, component_features, fold_in_features
from latentfs.select.factor_weights import communalities, loading_weights, promax, quartimax, rotate, varimax
from latentfs.select.forest import ForestRelevanceSelector, forest_relevance
from latentfs.select.leverage import LeverageScoreSelector
from latentfs.select.mixture_weights import MixtureSeparationSelector, mixture_feature_weights
from latentfs.select.q_alpha import KernelQAlpha, QAlpha, SupervisedQAlpha
from latentfs.select.scores import TextScoreSelector, text_feature_scores
from latentfs.select.weights import FeatureWeights

__all__ = [
    "BaseSelector",
    "DCAClassifier",
    "DCAFeatures",
    "component_features",
    "fold_in_features",
    "FeatureWeights",
    "ForestRelevanceSelector",
    "KernelQAlpha",
    "LeverageScoreSelector",
    "MixtureSeparationSelector",
    "QAlpha",
    "SVMFeatureSelector",
    "SupervisedQAlpha",
    "TextScoreSelector",
    "communalities",
    "loading_weights",
    "mixture_feature_weights",
    "promax",
    "quartimax",
    "rotate",
    "varimax",
    "forest_relevance",
    "text_feature_scores",
]
