"""Feature weights and feature selectors."""

from latentfs.select.base import BaseSelector
from latentfs.select.weights import FeatureWeights

__all__ = ["BaseSelector", "FeatureWeights"]
