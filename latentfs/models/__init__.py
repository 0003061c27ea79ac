"""Latent-structure models declared as Pyro models (the single source of truth, DESIGN.md contract 1)."""

from latentfs.models.dca import ConditionalGammaPoissonDCA, DirichletDCA, GammaPoissonDCA
from latentfs.models.factor import FactorAnalysis, LoadingConstraints, MixtureOfFactorAnalyzers
from latentfs.models.hdda import HDDAModel
from latentfs.models.hmm import CategoricalHMM, GaussianHMM
from latentfs.models.hmrf import HiddenPotts
from latentfs.models.latent_trait import LatentTrait
from latentfs.models.mixture import GaussianMixture, LatentClass, LatentProfile, UnivariateMixtureK
from latentfs.models.plsa import PLSA

__all__ = [
    "CategoricalHMM",
    "GaussianHMM",
    "HiddenPotts",
    "PLSA",
    "ConditionalGammaPoissonDCA",
    "DirichletDCA",
    "FactorAnalysis",
    "GammaPoissonDCA",
    "GaussianMixture",
    "HDDAModel",
    "LatentClass",
    "LatentProfile",
    "LatentTrait",
    "LoadingConstraints",
    "MixtureOfFactorAnalyzers",
    "UnivariateMixtureK",
]
