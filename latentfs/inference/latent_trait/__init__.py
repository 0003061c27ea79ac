"""Latent trait analysis (binary 2PL and ordinal graded-response items): the engines of
:mod:`latentfs.models.latent_trait`.

* :mod:`~latentfs.inference.latent_trait.quadrature` the Gauss–Hermite grid, the marginal likelihood and EAP scores;
* :mod:`~latentfs.inference.latent_trait.em` Bock–Aitkin marginal maximum likelihood EM (``method="em"``);
* :mod:`~latentfs.inference.latent_trait.vb` variational EM with the Jaakkola–Jordan bound (``method="vb"``);
* :mod:`~latentfs.inference.latent_trait.estimator` the scikit-learn estimator :class:`LatentTraitAnalyzer`;
* :mod:`~latentfs.inference.latent_trait.weights` item discriminations as feature weights, item curves.

Importing this package registers every engine of the family with :func:`latentfs.fit`.
"""

from typing import TYPE_CHECKING

from latentfs._lazy import attach_family
from latentfs.core.registry import register_new_data as _register_new_data
from latentfs.inference.latent_trait.weights import discrimination_weights, item_characteristic_curves

__all__ = ["LatentTraitAnalyzer", "discrimination_weights", "item_characteristic_curves"]

# Engines register themselves on import; the scikit-learn estimators hold none and are imported on first use.
_EXPORTS: dict[str, tuple[str, ...]] = {
    "latentfs.inference.latent_trait.estimator": ("LatentTraitAnalyzer",),
}
__getattr__, __dir__ = attach_family(__name__, __path__, _EXPORTS)

if TYPE_CHECKING:  # the same names, for type checkers and editors
    from latentfs.inference.latent_trait.estimator import LatentTraitAnalyzer

# Posterior.transform / score of latent-trait results (core names no family: each family registers its own)
_register_new_data("LatentTrait", "latentfs.inference.latent_trait.estimator", "LatentTraitAnalyzer",
                   lambda h: {"n_levels": h.get("n_levels")})
