"""Model-free feature selectors. Family-specific weights live with their family in :mod:`latentfs.inference`
(for example :mod:`latentfs.inference.dca.weights`) and are re-exported from :mod:`latentfs`."""

from latentfs.select.bss import SVMFeatureSelector
from latentfs.select.forest import ForestRelevanceSelector, forest_relevance
from latentfs.select.leverage import LeverageScoreSelector
from latentfs.select.q_alpha import QAlpha, SupervisedQAlpha
from latentfs.select.q_alpha_kernel import KernelQAlpha
from latentfs.select.scores import TextScoreSelector, text_feature_scores
from latentfs.select.text_search import TextSearchSelector, naive_bayes_curve, subset_search

__all__ = [
    "ForestRelevanceSelector",
    "KernelQAlpha",
    "LeverageScoreSelector",
    "QAlpha",
    "SVMFeatureSelector",
    "SupervisedQAlpha",
    "TextScoreSelector",
    "TextSearchSelector",
    "forest_relevance",
    "naive_bayes_curve",
    "subset_search",
    "text_feature_scores",
]
