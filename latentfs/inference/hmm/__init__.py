"""Hidden Markov models (Gaussian and categorical emissions): the engines of :mod:`latentfs.models.hmm`.

* :mod:`~latentfs.inference.hmm.forward_backward` scaled forward–backward, Viterbi and FFBS over all
  sequences at once;
* :mod:`~latentfs.inference.hmm.em` Baum–Welch EM with restarts, :mod:`~latentfs.inference.hmm.gibbs` block
  Gibbs (FFBS), :mod:`~latentfs.inference.hmm.vb` variational Bayes (MacKay 1997, Beal 2003);
* :mod:`~latentfs.inference.hmm.decode` posterior state marginals, Viterbi paths and log-likelihoods from
  a fitted result.

Importing this package registers every engine of the family with :func:`latentfs.fit`.
"""

from typing import TYPE_CHECKING

from latentfs._lazy import attach_family
from latentfs.core.registry import register_new_data as _register_new_data
from latentfs.inference.hmm.decode import sequence_log_likelihood, state_marginals, viterbi

__all__ = ["CategoricalHMMEstimator", "GaussianHMMEstimator", "sequence_log_likelihood", "state_marginals", "viterbi"]

# Engines register themselves on import; the scikit-learn estimators hold none and are imported on first use.
_EXPORTS: dict[str, tuple[str, ...]] = {
    "latentfs.inference.hmm.estimator": ("CategoricalHMMEstimator", "GaussianHMMEstimator"),
}
__getattr__, __dir__ = attach_family(__name__, __path__, _EXPORTS)

if TYPE_CHECKING:  # the same names, for type checkers and editors
    from latentfs.inference.hmm.estimator import CategoricalHMMEstimator, GaussianHMMEstimator

# Posterior.transform / predict / score of HMM results: a new sequence is passed as one array (those methods take no
# ``lengths``). Core names no family: each family registers its own.
_register_new_data("GaussianHMM", "latentfs.inference.hmm.estimator", "GaussianHMMEstimator", lambda h: {
    "covariance_type": h.get("covariance_type", "diag"),
    "startprob_concentration": h.get("startprob_concentration", 1.0),
    "transition_concentration": h.get("transition_concentration", 1.0),
    "mean_precision": h.get("mean_precision", 1.0),
    "degrees_of_freedom": h.get("degrees_of_freedom"),
})
_register_new_data("CategoricalHMM", "latentfs.inference.hmm.estimator", "CategoricalHMMEstimator", lambda h: {
    "n_categories": h.get("n_categories"),
    "startprob_concentration": h.get("startprob_concentration", 1.0),
    "transition_concentration": h.get("transition_concentration", 1.0),
    "emission_concentration": h.get("emission_concentration", 1.0),
})
