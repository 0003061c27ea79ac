"""Hidden Markov models declared as Pyro models: Gaussian and categorical emissions.

Titterington (2006), §1.2–1.3, Case 2: the latent z_t ∈ {1..K} of consecutive observations forms a
Markov chain, P(z_1 = k) = π_k and P(z_t = l | z_{t−1} = k) = A_kl, and y_t depends on z_t only through
an emission density g_k(y_t | φ_k). The likelihood f(y | θ) = Σ_z π_{z_1} g_{z_1}(y_1) Π_t A_{z_{t−1} z_t}
g_{z_t}(y_t) is computed "by a pass through the data" (the forward algorithm, Rabiner 1989).

==================  =====================  =====================================================
site                shape                  meaning (chapter symbol)
==================  =====================  =====================================================
``startprob``       (K,)                   initial distribution π, ~ Dirichlet(α_π)
``transmat``        (K, K)                 transition matrix A (rows), each row ~ Dirichlet(α_A)
``means``           (K, d)                 Gaussian emission means μ_k
``precision``       diag (K, d);           Gaussian emission precisions Λ_k (Normal–Gamma or
                    full (K, d, d)         Normal–Wishart prior, as :class:`GaussianMixture`)
``emission_probs``  (K, S)                 categorical emission probabilities, rows ~ Dirichlet(c)
``state_<t>``       (n_sequences,)         z_t of every sequence, enumerable
``data_<t>``        (n_sequences, d) or    y_t of every sequence (masked past a sequence's end)
                    (n_sequences,)
==================  =====================  =====================================================

Several sequences of different lengths are declared with a plate over sequences and ``pyro.markov``
over time, padded to the longest sequence: past its end a sequence's state stays where it was
(a deterministic transition, so that enumeration still sums to one) and its observations are masked.
The engines in :mod:`latentfs.inference.hmm` take the hmmlearn convention instead: the sequences
concatenated row-wise, with ``lengths``; or a list of arrays, one per sequence.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pyro
import pyro.distributions as dist
import torch
from pyro import poutine

from latentfs.core.data import (
    ContinuousMatrix,
    DataError,
    as_continuous,
    check_int,
    check_n_components,
    check_positive,
)
from latentfs.core.pyro_context import simulate_sites
from latentfs.models.mixture import GaussianMixture
from latentfs.models.sequences import (  # noqa: F401  (the sequence container and checks, re-exported)
    _MAX_SYMBOL,
    SequenceData,
    _as_floats,
    _check_fit_sizes,
    _check_lengths,
    _check_lengths_arg,
    _is_array_like,
    _to_numpy,
    pad_sequences,
    split_input,
)

__all__ = ["CategoricalHMM", "GaussianHMM", "HMM_COVARIANCE_TYPES", "SequenceData", "pad_sequences"]

HMM_COVARIANCE_TYPES = ("diag", "full")


# ----------------------------------------------------------------------------- shared pieces
class _HMMBase:
    """K, the Dirichlet priors of π and the rows of A, the chain over time, scoped simulation."""

    #: the Pyro site of the observations: the name of the result's log-likelihood variable in ArviZ
    observed_site = "data"

    default_method = "em"
    data_kind = "sequences"  # rows in time order, several sequences by lengths= (latentfs.core.registry.data_kind)
    n_components: int
    startprob_concentration: float
    transition_concentration: float

    def with_n_components(self, n_components: int) -> _HMMBase:
        """A copy of this model with another number of hidden states (for model selection)."""
        new = copy.copy(self)
        new.n_components = check_n_components(n_components, 10**9)
        return new

    def _chain_sites(self, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        k = self.n_components
        startprob = pyro.sample(
            "startprob", dist.Dirichlet(torch.full((k,), float(self.startprob_concentration), dtype=dtype))
        )
        with pyro.plate("component", k, dim=-1):
            transmat = pyro.sample(
                "transmat", dist.Dirichlet(torch.full((k,), float(self.transition_concentration), dtype=dtype))
            )
        return startprob, transmat

    def _chain(self, startprob: torch.Tensor, transmat: torch.Tensor, lengths: torch.Tensor, emit: Any) -> None:
        """z_1 ~ π, z_t | z_{t−1} ~ A[z_{t−1}] inside a plate over sequences, ``emit(t, z_t, mask_t)`` each step.
        Past a sequence's end z_t = z_{t−1} with probability one (a proper distribution under enumeration)."""
        k = self.n_components
        eye = torch.eye(k, dtype=transmat.dtype)
        z: Any = None
        with pyro.plate("sequence", int(lengths.shape[0]), dim=-1):
            for t in pyro.markov(range(int(lengths.max()))):
                active = t < lengths
                if t == 0:
                    probs = startprob
                else:
                    probs = torch.where(active[..., None], transmat[z], eye[z])
                z = pyro.sample(f"state_{t}", dist.Categorical(probs), infer={"enumerate": "parallel"})
                emit(t, z, active)

    def _simulate(
        self, n_sequences: int, length: Any, params: dict[str, Any] | None, seed: Any, **sizes: Any
    ) -> dict[str, np.ndarray]:
        lens = _check_lengths_arg(n_sequences, length)
        cond = {k: torch.as_tensor(np.asarray(v, dtype=np.float64)) for k, v in (params or {}).items()}
        model = self.model  # type: ignore[attr-defined]
        out = simulate_sites(poutine.condition(model, cond), seed, lengths=torch.as_tensor(lens), **sizes)
        t_max = int(lens.max())
        states = np.stack([out.pop(f"state_{t}") for t in range(t_max)], 1)
        data = np.stack([out.pop(f"data_{t}") for t in range(t_max)], 1)
        keep = np.arange(t_max)[None, :] < lens[:, None]
        out["states"] = states[keep].astype(np.int64)
        out["data"] = data[keep]
        out["lengths"] = lens
        return out


# ----------------------------------------------------------------------------- Gaussian emissions
class GaussianHMM(_HMMBase):
    """Hidden Markov model with Gaussian emissions; Titterington (2006) §1.3, Case 2.

    y_t | z_t = k ~ N(μ_k, Λ_k⁻¹), with Λ_k diagonal (``diag``) or full. The Bayesian engines (Gibbs, VB)
    use π ~ Dirichlet(α_π), rows of A ~ Dirichlet(α_A), and the emission priors of
    :class:`~latentfs.models.mixture.GaussianMixture` (Normal–Gamma for ``diag``, Normal–Wishart for
    ``full``); EM ignores the priors.

    Parameters
    ----------
    n_components : int
        K, the number of hidden states.
    covariance_type : {"diag", "full"}, default "diag"
        Diagonal covariances allow missing entries (NaN), which integrate out of g_k; a row entirely missing
        keeps its step in the chain with g_k = 1 (its transition still counts). ``full`` refuses NaN.
    startprob_concentration, transition_concentration : float, default 1.0
        α_π and α_A.
    mean_prior, mean_precision, degrees_of_freedom, covariance_prior
        The emission prior, as in :class:`~latentfs.models.mixture.GaussianMixture`.

    Examples
    --------
    >>> hmm = GaussianHMM(2, mean_precision=0.05)
    >>> sim = hmm.simulate(3, [10, 7, 5], seed=0)
    >>> sim["data"].shape, sim["states"].shape, sim["lengths"].tolist()
    ((22, 1), (22,), [10, 7, 5])
    """

    data_site = "data"

    def __init__(
        self,
        n_components: int,
        *,
        covariance_type: str = "diag",
        startprob_concentration: float = 1.0,
        transition_concentration: float = 1.0,
        mean_prior: Any = None,
        mean_precision: float = 1.0,
        degrees_of_freedom: float | None = None,
        covariance_prior: Any = None,
    ) -> None:
        self.n_components = check_n_components(n_components, 10**9)
        if covariance_type not in HMM_COVARIANCE_TYPES:
            raise DataError(
                f"covariance_type must be one of {list(HMM_COVARIANCE_TYPES)} for a GaussianHMM; got "
                f"{covariance_type!r}."
            )
        self.covariance_type = covariance_type
        self.startprob_concentration = float(check_positive(startprob_concentration, "startprob_concentration"))
        self.transition_concentration = float(check_positive(transition_concentration, "transition_concentration"))
        self.emission = GaussianMixture(
            self.n_components,
            covariance_type=covariance_type,
            mean_prior=mean_prior,
            mean_precision=mean_precision,
            degrees_of_freedom=degrees_of_freedom,
            covariance_prior=covariance_prior,
        )

    def __repr__(self) -> str:
        return f"GaussianHMM({self.n_components}, covariance_type={self.covariance_type!r})"

    def with_n_components(self, n_components: int) -> GaussianHMM:
        new = copy.copy(self)
        new.n_components = check_n_components(n_components, 10**9)
        new.emission = self.emission.with_n_components(n_components)  # type: ignore[assignment]
        return new

    @property
    def allows_missing(self) -> bool:
        return self.covariance_type == "diag"

    def hyperparameters(self) -> dict[str, Any]:
        em = self.emission.hyperparameters()
        return {
            "n_components": self.n_components,
            "covariance_type": self.covariance_type,
            "startprob_concentration": self.startprob_concentration,
            "transition_concentration": self.transition_concentration,
            "mean_precision": em["mean_precision"],
            "degrees_of_freedom": em["degrees_of_freedom"],
            "mean_prior": em["mean_prior"],
            "covariance_prior": em["covariance_prior"],
        }

    def n_parameters(self, n_features: int) -> int:
        """(K−1) start + K(K−1) transition + K d means + K d (diag) or K d(d+1)/2 (full) covariance."""
        k, d = self.n_components, int(n_features)
        cov = k * d if self.covariance_type == "diag" else k * d * (d + 1) // 2
        return (k - 1) + k * (k - 1) + k * d + cov

    def check_data(self, X: Any, lengths: Any = None, *, name: str = "X", for_fit: bool = True) -> SequenceData:
        """Validate sequences: a list of (T_s, d) arrays, or one (N, d) array with ``lengths``.

        For fitting, N must be at least K, some sequence must have length ≥ 2 (else no transition is
        observed), and no column may be constant. A 1-D array is one univariate sequence.
        """
        arr, lens, orig = split_input(X, lengths, name=name)
        read = _as_floats(arr)
        values = read if read is not None and read.ndim == 2 else np.zeros((0, 1))
        gaps = np.isnan(values).all(1)
        if self.covariance_type == "full" and bool(np.isnan(values).any()):
            r, c = np.argwhere(np.isnan(values))[0]
            raise DataError(
                f"{name} must not contain NaN for this method (covariance_type='full'); row {r} column {c} is NaN. "
                "Use covariance_type='diag' (the default), which integrates out missing entries and takes rows "
                "entirely missing, or impute the missing values."
            )
        if gaps.any():
            if gaps.all():
                raise DataError(
                    f"every row of {name} is entirely missing (NaN): there is nothing to fit or decode. Pass "
                    "sequences with some observed values."
                )
            # A step with nothing observed still carries its transition; its emission factor is 1 (the
            # emission family gives log g_k(y_t) = 0 there). The rows are validated with the first observed
            # row standing in (its non-finite entries as NaN, so an infinite value is reported at its own row).
            source = values[int(np.flatnonzero(~gaps)[0])]
            stand_in = values.copy()
            stand_in[gaps] = np.where(np.isfinite(source), source, np.nan)
            arr = stand_in
        data = as_continuous(
            arr,
            name=name,
            missing="allow" if self.allows_missing else "error",
            allow_constant=not for_fit,
        )
        if gaps.any():
            data.values[gaps] = np.nan
        names = data.feature_names
        if hasattr(orig, "columns") and hasattr(orig, "iloc"):
            names = tuple(str(c) for c in orig.columns)
        if for_fit:
            _check_fit_sizes(self.n_components, lens, name)
        return SequenceData(values=data.values, lengths=lens, feature_names=names)

    def prior(self, X: np.ndarray | None, n_features: int) -> dict[str, np.ndarray]:
        """The resolved emission prior (see :meth:`GaussianMixture.prior`)."""
        return self.emission.prior(X, n_features)

    # ---------------------------------------------------------------- the Pyro model
    def model(
        self,
        sequences: torch.Tensor | None = None,
        lengths: torch.Tensor | None = None,
        *,
        n_features: int | None = None,
    ) -> None:
        """The HMM with every z_t enumerable; ``sequences`` (n_sequences, T_max, d) padded
        (:func:`pad_sequences`) with ``lengths``, or ``lengths`` and ``n_features`` to simulate."""
        if lengths is None:
            if sequences is None:
                raise DataError("model needs sequences (padded) with lengths, or lengths and n_features to simulate.")
            lengths = torch.full((sequences.shape[0],), sequences.shape[1], dtype=torch.long)
        if sequences is not None:
            n_features = int(sequences.shape[-1])
        if n_features is None:
            raise DataError("model needs sequences, or n_features to simulate.")
        d = int(n_features)
        dtype = sequences.dtype if sequences is not None else torch.float64
        if self.covariance_type == "full" and sequences is not None and bool(torch.isnan(sequences).any()):
            raise DataError("sequences must not contain NaN for covariance_type='full'; impute or use 'diag'.")
        raw = None
        if sequences is not None:
            keep = torch.arange(sequences.shape[1])[None, :] < lengths[:, None]
            raw = sequences[keep].detach().cpu().numpy()
        prior = {k: torch.as_tensor(v, dtype=dtype) for k, v in self.prior(raw, d).items()}
        k = self.n_components
        startprob, transmat = self._chain_sites(dtype)
        kappa, nu0 = prior["mean_precision"], prior["dof"]
        if self.covariance_type == "full":
            scale0 = torch.linalg.inv(nu0 * prior["covariance"])  # W0 with E[Λ] = Σ0⁻¹
            with pyro.plate("component_emission", k, dim=-1):
                precision = pyro.sample("precision", dist.Wishart(nu0, covariance_matrix=scale0))
                means = pyro.sample("means", dist.MultivariateNormal(prior["mean"], precision_matrix=kappa * precision))
        else:
            a0, b0 = nu0 / 2, nu0 * prior["covariance"] / 2
            with pyro.plate("component_emission", k, dim=-2), pyro.plate("feature", d, dim=-1):
                precision = pyro.sample("precision", dist.Gamma(a0, b0))
                means = pyro.sample("means", dist.Normal(prior["mean"], (kappa * precision).rsqrt()))

        def emit(t: int, z: torch.Tensor, active: torch.Tensor) -> None:
            obs = None if sequences is None else sequences[:, t]
            if self.covariance_type == "full":
                law: Any = dist.MultivariateNormal(means[z], precision_matrix=precision[z])
            else:
                law = dist.Normal(means[z], precision[z].rsqrt())
                if obs is not None:
                    # A missing entry integrates out of the diagonal Gaussian: mask that entry only.
                    law = law.mask(~torch.isnan(obs))
                    obs = torch.nan_to_num(obs)
                law = law.to_event(1)
            with poutine.mask(mask=active):  # type: ignore[call-overload]
                pyro.sample(f"data_{t}", law, obs=obs)

        self._chain(startprob, transmat, lengths, emit)

    def simulate(
        self,
        n_sequences: int,
        length: Any,
        n_features: int = 1,
        *,
        params: dict[str, Any] | None = None,
        seed: Any = None,
    ) -> dict[str, np.ndarray]:
        """Draw from :meth:`model`: ``startprob``, ``transmat``, ``means``, ``precision``, ``states`` (N,),
        ``data`` (N, d) concatenated, ``lengths`` (n_sequences,). ``length`` is one int or one per sequence;
        ``params`` fixes any parameter site."""
        if isinstance(n_features, bool) or not isinstance(n_features, (int, np.integer)) or n_features < 1:
            raise DataError(f"n_features must be a positive integer; got {n_features!r}.")
        out = self._simulate(n_sequences, length, params, seed, n_features=int(n_features))
        out["data"] = out["data"].reshape(-1, int(n_features))
        return out


# ----------------------------------------------------------------------------- categorical emissions
class CategoricalHMM(_HMMBase):
    """Hidden Markov model with categorical emissions: y_t ∈ {0..S−1}, P(y_t = s | z_t = k) = B_ks.

    Rows of B ~ Dirichlet(c) for the Bayesian engines. Data are integer symbols: one (N,) or (N, 1)
    array with ``lengths``, or a list of 1-D arrays.

    Parameters
    ----------
    n_components : int
        K.
    n_categories : int, optional
        S; by default one more than the largest symbol in the data.
    startprob_concentration, transition_concentration, emission_concentration : float, default 1.0
        α_π, α_A and c.

    Examples
    --------
    >>> hmm = CategoricalHMM(2, n_categories=3)
    >>> sim = hmm.simulate(2, 6, seed=0)
    >>> sim["data"].shape, sim["emission_probs"].shape
    ((12,), (2, 3))
    """

    data_site = "data"

    def __init__(
        self,
        n_components: int,
        n_categories: int | None = None,
        *,
        startprob_concentration: float = 1.0,
        transition_concentration: float = 1.0,
        emission_concentration: float = 1.0,
    ) -> None:
        self.n_components = check_n_components(n_components, 10**9)
        if n_categories is not None and (
            isinstance(n_categories, bool) or not isinstance(n_categories, (int, np.integer)) or n_categories < 2
        ):
            raise DataError(
                f"n_categories must be an integer ≥ 2 (or None to read it from the data); got {n_categories!r}."
            )
        self.n_categories = None if n_categories is None else int(n_categories)
        self.startprob_concentration = float(check_positive(startprob_concentration, "startprob_concentration"))
        self.transition_concentration = float(check_positive(transition_concentration, "transition_concentration"))
        self.emission_concentration = float(check_positive(emission_concentration, "emission_concentration"))

    def __repr__(self) -> str:
        return f"CategoricalHMM({self.n_components}, n_categories={self.n_categories!r})"

    allows_missing = False

    def hyperparameters(self) -> dict[str, Any]:
        return {
            "n_components": self.n_components,
            "n_categories": self.n_categories,
            "startprob_concentration": self.startprob_concentration,
            "transition_concentration": self.transition_concentration,
            "emission_concentration": self.emission_concentration,
        }

    def n_parameters(self, n_categories: int) -> int:
        """(K−1) + K(K−1) + K(S−1)."""
        k = self.n_components
        return (k - 1) + k * (k - 1) + k * (int(n_categories) - 1)

    def check_data(self, X: Any, lengths: Any = None, *, name: str = "X", for_fit: bool = True) -> SequenceData:
        """Validate symbol sequences: integers 0..S−1 (no NaN), one column."""
        arr, lens, _ = split_input(X, lengths, name=name)
        data: ContinuousMatrix = as_continuous(arr, name=name, missing="error")
        v = data.values
        if v.shape[1] != 1:
            raise DataError(
                f"{name} must hold one symbol per row for a CategoricalHMM (shape (n_samples,) or (n_samples, 1)); "
                f"got {v.shape[1]} columns. Encode each combination of columns as one symbol."
            )
        v = v[:, 0]
        bad = np.flatnonzero((v != np.round(v)) | (v < 0))
        if bad.size:
            i = int(bad[0])
            raise DataError(
                f"{name} must hold symbols coded 0, 1, …, S−1; row {i} holds {v[i]:g}. Recode the symbols as "
                "consecutive integers from 0."
            )
        huge = np.flatnonzero(v >= _MAX_SYMBOL)
        if huge.size:
            i = int(huge[0])
            raise DataError(
                f"{name} must hold symbols coded 0, 1, …, S−1; row {i} holds {v[i]:g}, too large to be a category "
                f"code (at most {_MAX_SYMBOL - 1}). Recode the symbols as consecutive integers from 0."
            )
        s = self.n_categories
        if s is not None and v.size and int(v.max()) >= s:
            i = int(np.argmax(v))
            remedy = (
                f"Pass n_categories ≥ {int(v.max()) + 1}, or recode the symbols."
                if for_fit
                else "Decode only symbols the model was fitted on (or refit with a larger n_categories)."
            )
            raise DataError(f"{name} holds symbol {int(v[i])} (row {i}) but n_categories={s}. {remedy}")
        if for_fit:
            if s is None and int(v.max()) < 1:
                raise DataError(
                    f"{name} holds a single symbol ({int(v.max())}); an HMM over one category is trivial. Pass "
                    "n_categories ≥ 2 if other symbols are possible, or use more varied data."
                )
            _check_fit_sizes(self.n_components, lens, name)
        return SequenceData(values=v.astype(np.int64), lengths=lens, feature_names=("symbol",))

    def categories(self, data: SequenceData) -> int:
        """S: ``n_categories``, or one more than the largest symbol."""
        return self.n_categories if self.n_categories is not None else max(int(data.values.max()) + 1, 2)

    def model(
        self,
        sequences: torch.Tensor | None = None,
        lengths: torch.Tensor | None = None,
        *,
        n_categories: int | None = None,
    ) -> None:
        """The HMM with every z_t enumerable; ``sequences`` (n_sequences, T_max) padded symbols with
        ``lengths``, or ``lengths`` (and ``n_categories`` unless the model fixes it) to simulate."""
        if lengths is None:
            if sequences is None:
                raise DataError("model needs sequences (padded) with lengths, or lengths to simulate.")
            lengths = torch.full((sequences.shape[0],), sequences.shape[1], dtype=torch.long)
        s = n_categories or self.n_categories
        if s is None:
            if sequences is None:
                raise DataError("model needs n_categories to simulate (the model does not fix it).")
            s = int(sequences.max()) + 1
        dtype = torch.float64
        startprob, transmat = self._chain_sites(dtype)
        with pyro.plate("component_emission", self.n_components, dim=-1):
            emission_probs = pyro.sample(
                "emission_probs", dist.Dirichlet(torch.full((int(s),), self.emission_concentration, dtype=dtype))
            )

        def emit(t: int, z: torch.Tensor, active: torch.Tensor) -> None:
            obs = None if sequences is None else sequences[:, t].long()
            with poutine.mask(mask=active):  # type: ignore[call-overload]
                pyro.sample(f"data_{t}", dist.Categorical(emission_probs[z]), obs=obs)

        self._chain(startprob, transmat, lengths, emit)

    def simulate(
        self,
        n_sequences: int,
        length: Any,
        *,
        n_categories: int | None = None,
        params: dict[str, Any] | None = None,
        seed: Any = None,
    ) -> dict[str, np.ndarray]:
        """Draw from :meth:`model`: ``startprob``, ``transmat``, ``emission_probs``, ``states`` (N,),
        ``data`` (N,) int64 symbols, ``lengths``."""
        if n_categories is not None:
            n_categories = check_int("n_categories", n_categories, low=2)
        s = n_categories or self.n_categories
        if s is None and params is not None and "emission_probs" in params:
            s = int(np.shape(params["emission_probs"])[-1])
        if s is None:
            raise DataError("simulate needs n_categories (or a model with n_categories set).")
        out = self._simulate(n_sequences, length, params, seed, n_categories=int(s))
        out["data"] = out["data"].astype(np.int64)
        return out
