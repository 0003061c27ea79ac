"""Prepared HMM data and parameters: the chain layout plus an emission family.

The emission families are those of the finite mixtures (:mod:`latentfs.inference.mixture.em`): a hidden
Markov chain's M-step for the emissions is the mixture's M-step with the posterior state marginals γ in
place of the responsibilities, and its conjugate updates are the mixture's with hard or soft state counts
(Titterington 2006, §1.3–1.6). Only π and A are the chain's own.

Parameters are held as ``{"startprob": (K,), "transmat": (K, K), "emission": {...}}`` with the emission
part in the mixture family's (centred) coordinates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from latentfs.core.data import ContinuousMatrix, DataError, check_float, check_int, check_seed
from latentfs.core.relabel import component_labels
from latentfs.inference.emissions import CategoricalFamily, GaussianFamily
from latentfs.inference.hmm.forward_backward import ChainLayout
from latentfs.models.hmm import CategoricalHMM, GaussianHMM, SequenceData
from latentfs.models.mixture import GaussianMixture, LatentClass

__all__ = ["HMMFamily", "check_optimizer_options", "prepare", "model_from_result"]


class _PreparedGaussian(GaussianMixture):
    """The emission mixture of a :class:`GaussianHMM`, taking data the HMM has already validated."""

    def check_data(self, X: Any, *, name: str = "X") -> Any:
        if isinstance(X, ContinuousMatrix):
            return X
        return super().check_data(X, name=name)


def _gaussian_emission(model: GaussianHMM, data: SequenceData, for_fit: bool = True,
                       device: Any = None) -> GaussianFamily:
    em = model.emission
    prepared = _PreparedGaussian.__new__(_PreparedGaussian)
    prepared.__dict__.update(em.__dict__)
    prepared.n_components = model.n_components
    matrix = ContinuousMatrix(
        values=data.values,
        sample_names=(),
        feature_names=data.feature_names,
    )
    return GaussianFamily.prepare(prepared, matrix, for_fit=for_fit, device=device)


def _categorical_emission(model: CategoricalHMM, data: SequenceData, n_categories: int,
                          device: Any = None) -> CategoricalFamily:
    lc = LatentClass(
        model.n_components,
        n_levels=[n_categories],
        weight_concentration=model.startprob_concentration,
        item_concentration=model.emission_concentration,
    )
    n = data.values.shape[0]
    onehot = np.zeros((n, n_categories))
    onehot[np.arange(n), data.values] = 1.0
    return CategoricalFamily(
        lc,
        torch.as_tensor(onehot, device=device),
        torch.ones(n, 1, dtype=torch.float64, device=device),
        torch.zeros(n_categories, dtype=torch.long, device=device),
        np.array([n_categories]),
        ("symbol",),
        data.values[:, None].astype(np.float64),
    )


@dataclass
class HMMFamily:
    """Everything an engine needs about the data and the model.

    Attributes
    ----------
    model : GaussianHMM or CategoricalHMM
    data : SequenceData (validated; concatenated)
    layout : ChainLayout (sequence starts in the concatenated chain)
    emission : GaussianFamily or CategoricalFamily (log g_k(y_t), M-step, conjugate statistics)
    n_categories : S for categorical emissions, else 0

    The layout's and the emission family's tensors live on one torch device (the CPU unless ``device`` was
    given to :func:`prepare`); :meth:`export` returns NumPy arrays.
    """

    model: Any
    data: SequenceData
    layout: ChainLayout
    emission: Any
    n_categories: int = 0

    @property
    def k(self) -> int:
        return int(self.model.n_components)

    @property
    def n(self) -> int:
        return int(self.data.values.shape[0])

    @property
    def device(self) -> torch.device:
        return self.layout.is_start.device

    @property
    def categorical(self) -> bool:
        return isinstance(self.model, CategoricalHMM)

    @property
    def n_features(self) -> int:
        return self.n_categories if self.categorical else int(self.data.values.shape[1])

    def log_emission(self, params: dict[str, Any]) -> torch.Tensor:
        """log g_k(y_t), (N, K)."""
        return self.emission.log_component(params["emission"])

    # ---------------------------------------------------------------- user-facing parameters
    def export(self, params: dict[str, Any]) -> dict[str, np.ndarray]:
        """``startprob``, ``transmat`` and ``means``/``covariance``/``precision`` or ``emission_probs``."""
        out = {"startprob": params["startprob"].cpu().numpy().copy(),
               "transmat": params["transmat"].cpu().numpy().copy()}
        em = self.emission.export(params["emission"])
        em.pop("weights", None)
        if self.categorical:
            out["emission_probs"] = em["item_probs"][:, 0, :].copy()
        else:
            out.update(em)
        return out

    def import_(self, given: dict[str, Any], reg: float = 0.0) -> dict[str, Any]:
        """Parameters from user values in the shapes :meth:`export` gives (``covariance`` or ``precision``)."""
        k = self.k
        try:
            start = torch.as_tensor(np.asarray(given["startprob"], dtype=np.float64), device=self.device).reshape(k)
            trans = torch.as_tensor(np.asarray(given["transmat"], dtype=np.float64), device=self.device).reshape(k, k)
        except KeyError as exc:
            raise DataError(f"init must give startprob (K,) and transmat (K, K); {exc} is missing.") from None
        except (ValueError, RuntimeError) as exc:
            raise DataError(f"init's startprob must have shape ({k},) and transmat ({k}, {k}); {exc}.") from None
        for name, arr, axis in (("startprob", start, 0), ("transmat", trans, -1)):
            total = arr.sum(axis)
            if bool((arr < 0).any()) or not bool(torch.allclose(total, torch.ones_like(total), atol=1e-8)):
                raise DataError(
                    f"init[{name!r}] must hold probabilities (non-negative, summing to 1 along its last axis); "
                    f"got sums {total.tolist()}."
                )
        em_given: dict[str, Any] = {"weights": np.full(k, 1.0 / k)}
        if self.categorical:
            probs = np.asarray(given.get("emission_probs"), dtype=np.float64)
            if probs.shape != (k, self.n_categories):
                raise DataError(
                    f"init['emission_probs'] must have shape (K, S) = {(k, self.n_categories)}; got {probs.shape}."
                )
            em_given["item_probs"] = probs[:, None, :]
        else:
            em_given.update({key: given[key] for key in ("means", "covariance", "precision") if key in given})
        return {"startprob": start, "transmat": trans, "emission": self.emission.import_(em_given, reg)}

    def dims(self) -> dict[str, tuple[str, ...]]:
        out = {"startprob": ("component",), "transmat": ("component", "component_to")}
        if self.categorical:
            out["emission_probs"] = ("component", "symbol")
            return out
        cov = ("component", "feature") if self.model.covariance_type == "diag" else (
            "component", "feature", "feature_bis")
        out.update(means=("component", "feature"), covariance=cov, precision=cov)
        return out

    def coords(self) -> dict[str, list[str]]:
        comps = component_labels(self.k)
        out = {"component": comps, "component_to": comps, "sequence": [f"s{i}" for i in range(len(self.data.lengths))]}
        if self.categorical:
            out["symbol"] = [str(s) for s in range(self.n_categories)]
        else:
            names = list(self.data.feature_names)
            out.update(feature=names, feature_bis=names)
        return out


def prepare(
    model: Any, X: Any, lengths: Any = None, *, for_fit: bool = True, n_categories: int | None = None,
    device: Any = None,
) -> HMMFamily:
    """Validate ``X`` (and ``lengths``) for ``model`` and build the :class:`HMMFamily`, its tensors on
    ``device`` (a ``torch.device``; None = CPU)."""
    if not isinstance(model, (GaussianHMM, CategoricalHMM)):
        raise DataError(f"model must be a GaussianHMM or CategoricalHMM; got {type(model).__name__}.")
    data = model.check_data(X, lengths, for_fit=for_fit)
    layout = ChainLayout.from_lengths(torch.as_tensor(data.lengths)).to(device)
    if isinstance(model, CategoricalHMM):
        s = n_categories if n_categories is not None else model.categories(data)
        _check_symbol_table(data.values.shape[0], s)
        if int(data.values.max()) >= s:
            raise DataError(
                f"X holds symbol {int(data.values.max())} but the fitted model has {s} categories; decode only "
                "symbols the model was fitted on."
            )
        return HMMFamily(model, data, layout, _categorical_emission(model, data, s, device), s)
    return HMMFamily(model, data, layout, _gaussian_emission(model, data, for_fit, device))


def _check_symbol_table(n: int, s: int) -> None:
    """The engines hold an (n, S) one-hot table of the symbols: refuse S that would not fit in memory."""
    from latentfs.core.driver import available_memory

    need = float(n) * float(s) * 8.0
    avail = available_memory()
    budget = 2.0**31 if avail is None else avail / 2
    if need > budget:
        raise DataError(
            f"X has {s} categories (its largest symbol is {s - 1}): the one-hot table of {n} observations × {s} "
            f"categories would take {need / 2**30:.3g} GiB, over the budget of {budget / 2**30:.3g} GiB. Recode "
            "the symbols as consecutive integers from 0 (np.unique(X, return_inverse=True)[1])."
        )


def model_from_result(result: Any) -> Any:
    """Rebuild the model of a fitted :class:`~latentfs.core.results.Posterior` from its hyperparameters."""
    hp = dict(result.hyperparameters)
    if result.model == "GaussianHMM":
        return GaussianHMM(
            hp["n_components"],
            covariance_type=hp["covariance_type"],
            startprob_concentration=hp["startprob_concentration"],
            transition_concentration=hp["transition_concentration"],
            mean_precision=hp["mean_precision"],
            degrees_of_freedom=hp["degrees_of_freedom"],
            mean_prior=hp["mean_prior"],
            covariance_prior=hp["covariance_prior"],
        )
    if result.model == "CategoricalHMM":
        return CategoricalHMM(
            hp["n_components"],
            hp["n_categories"],
            startprob_concentration=hp["startprob_concentration"],
            transition_concentration=hp["transition_concentration"],
            emission_concentration=hp["emission_concentration"],
        )
    raise DataError(f"result must come from a GaussianHMM or CategoricalHMM fit; it comes from {result.model!r}.")


def check_optimizer_options(*, n_init: Any, max_iter: Any, tol: Any, seed: Any, reg_covar: Any = 0.0) -> dict[str, Any]:
    """The options of the EM and VB engines, checked with :mod:`latentfs.core.data`'s shared checkers."""
    return {
        "n_init": check_int("n_init", n_init, low=1, remedy="Pass n_init=1 or more restarts."),
        "max_iter": check_int("max_iter", max_iter, low=1, remedy="Pass max_iter=1 or more iterations."),
        "tol": check_float("tol", tol, 0.0, remedy="Pass a small non-negative relative tolerance, e.g. tol=1e-6."),
        "seed": check_seed(seed),
        "reg_covar": check_float(
            "reg_covar", reg_covar, 0.0, remedy="Pass a small non-negative variance floor, e.g. reg_covar=1e-6."
        ),
    }
