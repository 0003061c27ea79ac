"""Latent-structure models declared as Pyro models (the single source of truth, DESIGN.md contract 1)."""

from latentfs.models.dca import DirichletDCA, GammaPoissonDCA

__all__ = ["DirichletDCA", "GammaPoissonDCA"]
