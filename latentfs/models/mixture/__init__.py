"""Finite mixtures declared as Pyro models: Gaussian mixtures, latent profile and latent class models.

Titterington (2006), §1.2–1.3: a single categorical latent variable z ∈ {1..K} per unit with mixing
weights η_k, and component densities g_k(y | φ_k) under local independence where stated, so that
f(y | θ) = Σ_k η_k g_k(y | φ_k).

====================  ===============================  ==============================================
site                  shape                            meaning (chapter symbol)
====================  ===============================  ==============================================
``weights``           (K,)                             mixing weights η, ~ Dirichlet(α)
``means``             (K, d)                           component means μ_k (Gaussian models)
``precision``         full (K, d, d); tied (d, d);     inverse covariances Λ_k (Normal–Wishart or
                      diag (K, d); spherical (K, 1);   Normal–Gamma prior: μ_k | Λ_k ~ N(m0, (κ Λ_k)⁻¹))
                      tied_diag (d,)
``item_probs``        Bernoulli items (K, p)           P(y_i = 1 | z = k) (Beta prior) or, for
                      categorical: ``item_probs_<i>``  categorical items, P(y_i = s | z = k) (Dirichlet)
                      (K, S_i) per item
``assignment``        (n,)                             z, enumerable (``infer={"enumerate": "parallel"}``)
``data`` / ``items``  (n, d) / (n, p)                  observed y; NaN (missing) entries are masked out
====================  ===============================  ==============================================

Missing data (NaN). Under local independence a missing entry integrates out of g_k exactly, so in
:class:`LatentClass`, :class:`LatentProfile` and the ``diag`` / ``spherical`` :class:`GaussianMixture`
missing entries contribute nothing (``poutine.mask``). A ``full`` or ``tied`` Gaussian mixture couples the
features within a component; it rejects NaN (impute, or use a diagonal model).
"""

from latentfs.models.mixture.base import COVARIANCE_TYPES, PRIOR_RIDGE
from latentfs.models.mixture.gaussian import GaussianMixture, LatentProfile
from latentfs.models.mixture.latent_class import LatentClass
from latentfs.models.mixture.unknown_k import UnivariateMixtureK

__all__ = ["GaussianMixture", "LatentClass", "LatentProfile", "UnivariateMixtureK", "COVARIANCE_TYPES", "PRIOR_RIDGE"]
