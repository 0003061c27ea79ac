"""Latent class models (:mod:`latentfs.models.mixture`): categorical items, local independence."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyro
import pyro.distributions as dist
import torch
from pyro import poutine

from latentfs.core.data import DataError, as_continuous, check_n_components, check_positive
from latentfs.core.pyro_context import simulate_sites
from latentfs.models.mixture.base import _check_simulate_sizes, _MixtureBase


def item_levels(n_levels: int | Sequence[int] | None, n_items: int) -> np.ndarray:
    """The number of categories of each of ``n_items`` items, int64 (n_items,), from a categorical-item model's
    ``n_levels``: None (binary items, 2 each), one int for every item, or one number per item."""
    if n_levels is None:
        return np.full(n_items, 2, dtype=np.int64)
    if isinstance(n_levels, int):
        return np.full(n_items, n_levels, dtype=np.int64)
    if len(n_levels) != n_items:
        raise DataError(
            f"n_levels must give one number per item: got {len(n_levels)} for {n_items} items. "
            "Pass a single int when all items have the same number of categories."
        )
    return np.asarray(n_levels, dtype=np.int64)


class LatentClass(_MixtureBase):
    """Latent class analysis: categorical items, locally independent given the class; Titterington §1.2.

    g(y | z = k) = Π_i Π_s θ_{iks}^{y_is}, with θ_{ik·} ~ Dirichlet(c) (Beta(c, c) for binary items) and
    η ~ Dirichlet(α). Items are coded 0..S_i−1; NaN marks a missing answer, which contributes nothing.

    Parameters
    ----------
    n_components : int
    n_levels : int or sequence of int, optional
        Levels per item. ``None`` means binary (Bernoulli) items coded 0/1, declared with a Beta prior
        and a Bernoulli likelihood; otherwise items are categorical.
    weight_concentration : float, default 1.0
    item_concentration : float, default 1.0
        c, the symmetric Beta/Dirichlet prior on each item's response probabilities.

    Examples
    --------
    >>> lc = LatentClass(2)
    >>> sim = lc.simulate(20, 4, seed=0)
    >>> sim["items"].shape, lc.n_parameters(4)
    ((20, 4), 9)
    """

    #: the Pyro site of the observations: the name of the result's log-likelihood variable in ArviZ
    observed_site = "items"

    data_site = "items"

    def __init__(
        self,
        n_components: int,
        *,
        n_levels: int | Sequence[int] | None = None,
        weight_concentration: float = 1.0,
        item_concentration: float = 1.0,
    ) -> None:
        self.n_components = check_n_components(n_components, 10**9)
        if n_levels is not None:
            lv = np.atleast_1d(np.asarray(n_levels))
            if lv.dtype.kind not in "iu" or (lv < 2).any() or lv.ndim != 1:
                raise DataError(
                    f"n_levels must be an integer ≥ 2 or a list of them (one per item); got {n_levels!r}. "
                    "Binary items need no n_levels."
                )
            n_levels = int(lv[0]) if lv.size == 1 and np.ndim(n_levels) == 0 else [int(v) for v in lv]
        self.n_levels = n_levels
        self.weight_concentration = float(check_positive(weight_concentration, "weight_concentration"))
        self.item_concentration = float(check_positive(item_concentration, "item_concentration"))

    def __repr__(self) -> str:
        return f"LatentClass({self.n_components}, n_levels={self.n_levels!r})"

    @property
    def binary(self) -> bool:
        return self.n_levels is None

    allows_missing = True

    def levels(self, n_items: int) -> np.ndarray:
        """S_i per item (2 for binary items)."""
        return item_levels(self.n_levels, n_items)

    def hyperparameters(self) -> dict[str, Any]:
        return {
            "n_components": self.n_components,
            "n_levels": self.n_levels,
            "weight_concentration": self.weight_concentration,
            "item_concentration": self.item_concentration,
        }

    def check_data(self, X: Any, *, name: str = "X") -> Any:
        """Validate item codes: integers in 0..S_i−1 or NaN; no all-missing rows/columns; no constant item."""
        data = as_continuous(X, name=name, missing="allow", allow_constant=False, min_samples=2)
        v = data.values
        obs = ~np.isnan(v)
        levels = self.levels(v.shape[1])
        bad = obs & ((v != np.round(np.nan_to_num(v))) | (v < 0))
        if bad.any():
            r, c = np.argwhere(bad)[0]
            raise DataError(
                f"{name} must hold item codes 0, 1, …, S_i−1 (or NaN for missing); row {r} column {c} "
                f"holds {v[r, c]:g}. Recode the answers as consecutive integers from 0."
            )
        over = obs & (np.nan_to_num(v) >= levels[None, :])
        if over.any():
            r, c = np.argwhere(over)[0]
            what = "binary items must be coded 0/1" if self.binary else f"item {c} has n_levels={levels[c]}"
            raise DataError(
                f"{name} holds a level that was not declared: row {r} column {c} holds {v[r, c]:g}, but {what}. "
                "Pass n_levels with the true number of levels per item, or recode the item."
            )
        check_n_components(self.n_components, v.shape[0], what=f"the number of rows of {name}")
        return data

    def n_parameters(self, n_features: int) -> int:
        """(K−1) + K Σ_i (S_i − 1) (Goodman 1974)."""
        k = self.n_components
        return (k - 1) + k * int((self.levels(int(n_features)) - 1).sum())

    def model(
        self, items: torch.Tensor | None = None, *, n_samples: int | None = None, n_features: int | None = None
    ) -> torch.Tensor:
        """The latent class model with z enumerable. Pass ``items`` (n, p) (NaN = missing) or the sizes."""
        if items is not None:
            n_samples, n_features = items.shape
        if n_samples is None or n_features is None:
            raise DataError("model needs items, or n_samples and n_features to simulate.")
        dtype = items.dtype if items is not None else torch.float64
        k, p = self.n_components, n_features
        levels = self.levels(p)
        c = float(self.item_concentration)
        weights = self._weights_site(dtype)
        mask = None if items is None else ~torch.isnan(items)
        obs = None if items is None else torch.nan_to_num(items).round()
        if self.binary:
            item_plate = pyro.plate("item", p, dim=-1)
            with pyro.plate("component", k, dim=-2), item_plate:
                probs = pyro.sample("item_probs", dist.Beta(torch.tensor(c, dtype=dtype), torch.tensor(c, dtype=dtype)))
            with pyro.plate("sample", n_samples, dim=-2):
                z = pyro.sample(
                    "assignment", dist.Categorical(weights).expand([n_samples, 1]), infer={"enumerate": "parallel"}
                )
                with item_plate, poutine.mask(mask=mask if mask is not None else True):  # type: ignore[arg-type]
                    return pyro.sample("items", dist.Bernoulli(probs[z[..., 0]]), obs=obs)
        item_probs = []
        with pyro.plate("component", k, dim=-1):
            for i, s in enumerate(levels):
                item_probs.append(pyro.sample(f"item_probs_{i}", dist.Dirichlet(torch.full((int(s),), c, dtype=dtype))))
        outs = []
        with pyro.plate("sample", n_samples, dim=-1):
            z = pyro.sample("assignment", dist.Categorical(weights), infer={"enumerate": "parallel"})
            for i in range(p):
                m = True if mask is None else mask[:, i]
                with poutine.mask(mask=m):  # type: ignore[arg-type]
                    outs.append(
                        pyro.sample(
                            f"item_{i}",
                            dist.Categorical(item_probs[i][z]),
                            obs=None if obs is None else obs[:, i].long(),
                        )
                    )
        return torch.stack([o.to(dtype) for o in outs], -1)

    def simulate(
        self, n_samples: int, n_features: int, *, params: dict[str, Any] | None = None, seed: Any = None
    ) -> dict[str, np.ndarray]:
        """Draw from :meth:`model`: ``weights``, ``item_probs`` (K, p) or (K, p, S_max) padded with 0,
        ``assignment`` and ``items`` (n, p) coded 0..S_i−1. ``params`` may fix ``weights``/``item_probs``.
        """
        n_samples, n_features = _check_simulate_sizes(n_samples, n_features)
        cond = {}
        for key, v in (params or {}).items():
            arr = torch.as_tensor(np.asarray(v, dtype=np.float64))
            if key == "item_probs" and not self.binary:
                for i, s in enumerate(self.levels(int(n_features))):
                    cond[f"item_probs_{i}"] = arr[:, i, : int(s)]
            else:
                cond[key] = arr
        out = simulate_sites(
            poutine.condition(self.model, cond), seed, n_samples=int(n_samples), n_features=int(n_features)
        )
        if not self.binary:
            levels = self.levels(int(n_features))
            probs = np.zeros((self.n_components, int(n_features), int(levels.max())))
            for i, s in enumerate(levels):
                probs[:, i, : int(s)] = out.pop(f"item_probs_{i}")
            out["item_probs"] = probs
            out["items"] = np.stack([out.pop(f"item_{i}") for i in range(int(n_features))], -1).astype(np.float64)
        else:
            out["items"] = out["items"].reshape(int(n_samples), int(n_features))
        out["assignment"] = out["assignment"].reshape(-1).astype(np.int64)
        return out
