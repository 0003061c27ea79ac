"""Feature weights and feature selectors."""

from latentfs.select.base import BaseSelector
from latentfs.select.forest import ForestRelevanceSelector, forest_relevance
from latentfs.select.scores import TextScoreSelector, text_feature_scores
from latentfs.select.weights import FeatureWeights

__all__ = [
    "BaseSelector",
    "FeatureWeights",
    "ForestRelevanceSelector",
    "TextScoreSelector",
    "forest_relevance",
    "text_feature_scores",
]
