"""Honest evaluation: held-out likelihood, cross-indexing, selection stability, Navot's analysis."""

from latentfs.evaluate.cross_indexing import (
    cross_index_a,
    cross_index_b,
    cross_indexing_report,
    learning_curve,
    nested_selection_scores,
    outer_loop_estimate,
    sequential_floating_forward_selection,
    sequential_forward_selection,
)
from latentfs.evaluate.heldout import document_completion, fold_in, split_documents
from latentfs.evaluate.navot import expected_error_mc, optimal_num_features
from latentfs.evaluate.stability import (
    NogueiraStability,
    jaccard_index,
    kuncheva_index,
    nogueira_stability,
    selection_stability,
)

__all__ = [
    "NogueiraStability",
    "cross_index_a",
    "cross_index_b",
    "cross_indexing_report",
    "document_completion",
    "expected_error_mc",
    "fold_in",
    "jaccard_index",
    "kuncheva_index",
    "learning_curve",
    "nested_selection_scores",
    "nogueira_stability",
    "optimal_num_features",
    "outer_loop_estimate",
    "selection_stability",
    "sequential_floating_forward_selection",
    "sequential_forward_selection",
    "split_documents",
]
