"""Finite mixtures (Gaussian, latent class, latent profile): the engines of :mod:`latentfs.models.mixture`.

* :mod:`~latentfs.inference.mixture.em` EM with restarts (on a dask array through the pipeline's data back-end,
  :mod:`latentfs.core.backends`: one E-step task per row chunk),
  :mod:`~latentfs.inference.mixture.online` stepwise EM (``method="online_em"``, the estimators' ``partial_fit``),
  :mod:`~latentfs.inference.mixture.gibbs` block Gibbs, :mod:`~latentfs.inference.mixture.vb` mean-field VB;
* :mod:`~latentfs.inference.mixture.model_selection` AIC / BIC / ICL / DIC and the bootstrap LRT;
  :mod:`~latentfs.inference.mixture.dic` DIC (Spiegelhalter et al. 2002) and the label-free DIC_3 (Celeux et
  al. 2006); :mod:`~latentfs.inference.mixture.reversible_jump` the posterior over k of a univariate mixture
  (Richardson & Green 1997);
* :mod:`~latentfs.inference.mixture.weights` separation weights B/(B+W).

Importing this package registers every engine of the family with :func:`latentfs.fit`.
"""

from typing import TYPE_CHECKING

from latentfs._lazy import attach_family, public_names
from latentfs.core.registry import register_new_data as _register_new_data
from latentfs.inference.mixture.dic import DICWarning, dic, dic_from_loglik  # noqa: F401
from latentfs.inference.mixture.reversible_jump import predictive_density  # noqa: F401

# Engines register themselves on import; the estimators, selectors and criteria hold none and are imported on first
# use, so a fit does not import scikit-learn (about 1 s in a fresh process).
_EXPORTS: dict[str, tuple[str, ...]] = {
    "latentfs.inference.mixture.estimator": ("GaussianMixtureClusterer", "LatentClassClusterer",
                                             "LatentProfileClusterer"),
    "latentfs.inference.mixture.weights": ("MixtureSeparationSelector", "bootstrap_feature_weights",
                                           "mixture_feature_weights"),
    "latentfs.inference.mixture.model_selection": ("bootstrap_lrt", "information_criteria", "n_parameters",
                                                   "select_n_components"),
}
# (dic stays eager: importing the module latentfs.inference.mixture.dic, as model_selection does, sets the package's
# attribute "dic" to that module, which would shadow the lazily imported function of the same name.)
__getattr__, __dir__ = attach_family(__name__, __path__, _EXPORTS)
__all__ = public_names(_EXPORTS, "DICWarning", "dic", "dic_from_loglik", "predictive_density")

if TYPE_CHECKING:  # the same names, for type checkers and editors
    from latentfs.inference.mixture.estimator import (  # noqa: F401
        GaussianMixtureClusterer,
        LatentClassClusterer,
        LatentProfileClusterer,
    )
    from latentfs.inference.mixture.model_selection import (  # noqa: F401
        bootstrap_lrt,
        information_criteria,
        n_parameters,
        select_n_components,
    )
    from latentfs.inference.mixture.weights import (  # noqa: F401
        MixtureSeparationSelector,
        bootstrap_feature_weights,
        mixture_feature_weights,
    )

# Posterior.transform / predict / score of mixture results (core names no family: each family registers its own)
_register_new_data("GaussianMixture", "latentfs.inference.mixture.estimator", "GaussianMixtureClusterer",
                   lambda h: {"covariance_type": h.get("covariance_type", "full")})
_register_new_data("LatentProfile", "latentfs.inference.mixture.estimator", "LatentProfileClusterer",
                   lambda h: {"variance": "shared" if h.get("covariance_type") == "tied_diag" else "free"})
_register_new_data("LatentClass", "latentfs.inference.mixture.estimator", "LatentClassClusterer",
                   lambda h: {"n_levels": h.get("n_levels")})
