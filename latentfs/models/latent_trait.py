"""Latent trait analysis declared as a Pyro model: binary items (2-parameter logistic) and ordinal items
(graded response, cumulative logit).

Titterington (2006), §1.2, "discrete y, continuous z" (Bartholomew's latent trait analysis): under local
independence g(y | z) = Π_j g_j(y_j | z), each item a logistic regression on the latent traits
z ~ N(0, I_q). For a binary item (Bartholomew, Knott & Moustaki 2011, §4.2; Bock & Aitkin 1981):

    P(y_ij = 1 | z_i) = σ(α_j0 + α_jᵀ z_i).

For an ordinal item with S_j ordered categories 0 < 1 < … < S_j − 1, the graded-response (cumulative
logit) model (Samejima 1969; Bartholomew et al. 2011, §5.3):

    P(y_ij ≥ s | z_i) = σ(α_js + α_jᵀ z_i),   s = 1, …, S_j − 1,   α_j1 > α_j2 > … ,

so P(y_ij = s | z_i) = P(y_ij ≥ s | z_i) − P(y_ij ≥ s + 1 | z_i). With S_j = 2 it is the binary model.
In Pyro's terms an ordinal item is ``OrderedLogistic(α_jᵀ z, cutpoints = −(α_j1, …, α_j,S−1))``.

Sites (shared by the engines in :mod:`latentfs.inference.latent_trait`; q is ``n_components``):

==================  ================================  ================================================
site                shape                             meaning (symbol)
==================  ================================  ================================================
``intercepts``      binary: (n_items,)                α_j0 (binary); α_js, decreasing in s (ordinal);
                    ordinal: (n_items, S_max − 1)     entries past S_j − 1 are unused padding
``discrimination``  (n_items, q)                      α_j, the item discriminations (slopes)
``traits``          (n_samples, q)                    z_i ~ N(0, I_q), the person's latent traits
``items``           (n_samples, n_items)              binary responses (NaN = missing)
``item_<j>``        (n_samples,)                      ordinal responses of item j (NaN = missing)
==================  ================================  ================================================

The item parameters have flat (improper) priors, so the log joint with the traits integrated out is the
marginal log-likelihood that Bock–Aitkin EM maximises. A missing answer (NaN) is masked out of the
likelihood (under local independence it integrates out exactly). The traits are identified up to an
orthogonal rotation (for q = 1: up to sign); the engines orient each trait so that its discriminations
sum to a non-negative number.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyro
import pyro.distributions as dist
import torch
from pyro import poutine
from torch.distributions import constraints

from latentfs.core.data import DataError, as_continuous, check_int, check_seed
from latentfs.core.pyro_context import simulate_sites
from latentfs.models.mixture.latent_class import item_levels

__all__ = ["LatentTrait", "n_free_parameters"]


def _flat(shape: tuple[int, ...], support: Any) -> dist.TorchDistribution:
    """An improper flat prior (log density 0): maximum likelihood is MAP under it."""
    return dist.ImproperUniform(support, torch.Size(()), torch.Size(shape))


def n_free_parameters(levels: np.ndarray, n_components: int) -> int:
    """Free parameters of the q-trait model (q = ``n_components``): Σ_j (S_j − 1) intercepts + p q slopes
    − q(q−1)/2 for rotation."""
    p, q = int(levels.size), int(n_components)
    return int((levels - 1).sum()) + p * q - q * (q - 1) // 2


class LatentTrait:
    """The latent trait model for binary (2PL) or ordinal (graded response) items; module docstring.

    Parameters
    ----------
    n_components : int, default 1
        q, the number of latent traits.
    n_levels : int or sequence of int, optional
        Categories per item. None (default) means binary items coded 0/1 (the 2-parameter logistic
        model, one ``items`` site); an int (the same for every item) or one int per item gives ordinal
        items coded 0..S_j − 1 (graded response model, one ``item_<j>`` site per item).

    Examples
    --------
    >>> lt = LatentTrait(1)
    >>> sim = lt.simulate(200, intercepts=[0.5, -0.2, 1.0], discrimination=[[1.0], [1.5], [0.8]], seed=0)
    >>> sim["items"].shape, sim["traits"].shape
    ((200, 3), (200, 1))
    >>> sorted(np.unique(sim["items"]).tolist())
    [0.0, 1.0]
    """

    #: the Pyro site of the observations: the name of the result's log-likelihood variable in ArviZ
    observed_site = "items"

    default_method = "em"
    data_site = "items"

    def __init__(self, n_components: int = 1, *, n_levels: int | Sequence[int] | None = None) -> None:
        self.n_components = check_int("n_components", n_components, low=1,
                                      remedy="Pass n_components=1 for one latent trait.")
        if n_levels is not None:
            lv = np.atleast_1d(np.asarray(n_levels))
            if lv.dtype.kind not in "iu" or lv.ndim != 1 or lv.size == 0 or (lv < 2).any():
                raise DataError(
                    f"n_levels must be an integer ≥ 2 or a list of them (one per item); got {n_levels!r}. "
                    "An item with one category carries no information: drop it. Binary items need no n_levels."
                )
            n_levels = int(lv[0]) if np.ndim(n_levels) == 0 else [int(v) for v in lv]
        self.n_levels = n_levels

    def __repr__(self) -> str:
        return f"LatentTrait({self.n_components}, n_levels={self.n_levels!r})"

    @property
    def binary(self) -> bool:
        """Whether the items are binary (declared with ``n_levels=None``)."""
        return self.n_levels is None

    def levels(self, n_items: int) -> np.ndarray:
        """S_j per item (2 for binary items)."""
        return item_levels(self.n_levels, n_items)

    def hyperparameters(self) -> dict[str, Any]:
        return {"n_components": self.n_components, "n_levels": self.n_levels}

    def with_n_components(self, n_components: int) -> LatentTrait:
        """A copy of this model with another number of latent traits q (for model selection); n_levels is kept."""
        return type(self)(n_components, n_levels=self.n_levels)

    def n_parameters(self, n_items: int) -> int:
        """Free parameters: Σ_j (S_j − 1) + p q − q(q − 1)/2 (the rotation of the traits is not identified)."""
        return n_free_parameters(self.levels(int(n_items)), self.n_components)

    # ------------------------------------------------------------------ data
    def check_data(self, X: Any, *, name: str = "X") -> Any:
        """Validate responses: codes 0..S_j − 1 or NaN (missing), every declared category seen in every item
        (so at least two), and no more traits than the response table identifies. Returns a
        :class:`~latentfs.core.data.ContinuousMatrix`.
        """
        data = as_continuous(X, name=name, missing="allow", min_samples=2)
        v = data.values
        n, p = v.shape
        levels = self.levels(p)
        obs = ~np.isnan(v)
        filled = np.nan_to_num(v)
        if self.binary:
            bad = obs & (filled != 0) & (filled != 1)
            if bad.any():
                r, c = np.argwhere(bad)[0]
                raise DataError(
                    f"{name} must hold binary items coded 0/1 (or NaN for missing); row {r} column {c} holds "
                    f"{v[r, c]:g}. Recode the answers to 0/1, or declare ordinal items with "
                    "LatentTrait(n_levels=...) (codes 0..S−1)."
                )
        else:
            bad = obs & ((filled != np.round(filled)) | (filled < 0))
            if bad.any():
                r, c = np.argwhere(bad)[0]
                raise DataError(
                    f"{name} must hold ordinal item codes 0, 1, …, S_j−1 (or NaN for missing); row {r} column {c} "
                    f"holds {v[r, c]:g}. Recode the answers as consecutive integers from 0."
                )
            over = obs & (filled >= levels[None, :])
            if over.any():
                r, c = np.argwhere(over)[0]
                raise DataError(
                    f"{name} holds a category that was not declared: row {r} column {c} holds {v[r, c]:g}, but "
                    f"item {c} has n_levels={levels[c]}. Pass n_levels with the true number of categories per item."
                )
        for j in range(p):
            seen = np.unique(v[obs[:, j], j])
            if seen.size < 2:
                raise DataError(
                    f"{name} column {j} ({data.feature_names[j]!r}) has one category (every answer is "
                    f"{seen[0]:g}); an item with one category carries no information about the traits. Drop it."
                )
            if seen.size < levels[j]:
                unused = sorted(set(range(int(levels[j]))) - {int(x) for x in seen})
                raise DataError(
                    f"{name} column {j} ({data.feature_names[j]!r}) never uses categor"
                    f"{'y' if len(unused) == 1 else 'ies'} {unused} of its {levels[j]}; the thresholds next to an "
                    "unused category cannot be estimated. Merge it with a neighbouring category (recode to "
                    "consecutive codes) and lower n_levels for that item."
                )
        k = n_free_parameters(levels, self.n_components)
        cells = float(np.prod(levels.astype(np.float64))) - 1.0
        if k > cells:
            raise DataError(
                f"n_components={self.n_components} (latent traits) is more than {p} items can identify: the model has "
                f"{k} free parameters but the table of response patterns has only {cells:g} degrees of freedom. Use "
                "fewer traits or more items."
            )
        return data

    # ------------------------------------------------------------------ the Pyro model
    def model(
        self,
        data: torch.Tensor | None = None,
        *,
        n_samples: int | None = None,
        n_items: int | None = None,
        dtype: torch.dtype = torch.float64,
    ) -> torch.Tensor:
        """The model; ``data`` (n, p) holds item codes, NaN = missing (masked out of the likelihood).

        Without data pass ``n_samples`` and ``n_items`` (to simulate; ``dtype`` is then used).
        """
        if data is not None:
            n_samples, n_items = data.shape
            dtype = data.dtype
        if n_samples is None or n_items is None:
            raise DataError("model needs data, or n_samples and n_items to simulate.")
        n, p, q = int(n_samples), int(n_items), self.n_components
        levels = self.levels(p)
        mask = None if data is None else ~torch.isnan(data)
        obs = None if data is None else torch.nan_to_num(data)
        with pyro.plate("item", p, dim=-1):
            discrimination = pyro.sample("discrimination", _flat((q,), constraints.real_vector))
            if self.binary:
                intercepts = pyro.sample("intercepts", _flat((), constraints.real))
            else:
                m = int(levels.max()) - 1
                intercepts = pyro.sample("intercepts", _flat((m,), constraints.real_vector))
        with pyro.plate("sample", n, dim=-1):
            traits = pyro.sample("traits", dist.Normal(torch.zeros(q, dtype=dtype), 1.0).to_event(1))
        eta = traits @ discrimination.transpose(-1, -2)  # (n, p): α_jᵀ z_i
        if self.binary:
            with pyro.plate("sample_", n, dim=-2), pyro.plate("item_", p, dim=-1):
                with poutine.mask(mask=mask if mask is not None else True):  # type: ignore[arg-type]
                    return pyro.sample("items", dist.Bernoulli(logits=intercepts + eta), obs=obs)
        outs = []
        with pyro.plate("sample_", n, dim=-1):
            for j in range(p):
                s = int(levels[j]) - 1
                cut = -intercepts[..., j, :s]  # increasing cutpoints
                with poutine.mask(mask=True if mask is None else mask[:, j]):  # type: ignore[arg-type]
                    outs.append(
                        pyro.sample(
                            f"item_{j}",
                            dist.OrderedLogistic(eta[..., j], cut),
                            obs=None if obs is None else obs[:, j],
                        )
                    )
        return torch.stack([o.to(dtype) for o in outs], -1)

    def simulate(
        self,
        n_samples: int,
        *,
        intercepts: Any,
        discrimination: Any,
        missing_fraction: float = 0.0,
        seed: Any = None,
    ) -> dict[str, np.ndarray]:
        """Draw ``items`` (n, p; codes 0..S_j − 1, NaN where missing) and ``traits`` (n, q) from :meth:`model`
        at the given item parameters.

        Parameters
        ----------
        n_samples : int
        intercepts : array (p,) for binary items, (p, S_max − 1) for ordinal items (decreasing along a row;
            entries past S_j − 1 are ignored).
        discrimination : array (p, q)
        missing_fraction : float, default 0
            Blank this fraction of the answers completely at random (keeping one answer per person).
        seed : int, optional
        """
        n = check_int("n_samples", n_samples, low=1)
        seed = check_seed(seed)
        A = np.asarray(discrimination, dtype=np.float64)
        if A.ndim == 1 and self.n_components == 1:
            A = A[:, None]
        if A.ndim != 2 or A.shape[1] != self.n_components or not np.isfinite(A).all():
            raise DataError(
                f"discrimination must be a finite array of shape (n_items, {self.n_components}); got {A.shape}."
            )
        p = A.shape[0]
        levels = self.levels(p)
        c = np.asarray(intercepts, dtype=np.float64)
        m = int(levels.max()) - 1
        want: tuple[int, ...] = (p,) if self.binary else (p, m)
        if c.ndim == 1 and not self.binary and m == 1:
            c = c[:, None]
        if c.shape != want:
            raise DataError(f"intercepts must have shape {want} for these items; got {c.shape}.")
        if not self.binary:
            for j in range(p):
                row = c[j, : int(levels[j]) - 1]
                if not np.isfinite(row).all() or (np.diff(row) >= 0).any():
                    raise DataError(
                        f"intercepts of item {j} must be finite and strictly decreasing (α_j1 > α_j2 > …, "
                        f"P(y ≥ s) falls with s); got {row.tolist()}."
                    )
            c = np.where(np.arange(m)[None, :] < (levels - 1)[:, None], c, 0.0)
        elif not np.isfinite(c).all():
            raise DataError("intercepts must be finite.")
        if not 0.0 <= float(missing_fraction) < 1.0:
            raise DataError(f"missing_fraction must lie in [0, 1); got {missing_fraction}.")
        fixed = {"intercepts": torch.as_tensor(c), "discrimination": torch.as_tensor(A)}
        out = simulate_sites(poutine.condition(self.model, fixed), seed, n_samples=n, n_items=p)
        if self.binary:
            items = out.pop("items").reshape(n, p)
        else:
            items = np.stack([out.pop(f"item_{j}") for j in range(p)], -1).astype(np.float64)
        if missing_fraction > 0:
            rng = np.random.default_rng(None if seed is None else [int(seed), 11])
            drop = rng.uniform(size=items.shape) < missing_fraction
            drop[np.arange(n), rng.integers(0, p, size=n)] = False
            items = np.where(drop, np.nan, items)
        out["items"] = items
        out["traits"] = out["traits"].reshape(n, self.n_components)
        return out
