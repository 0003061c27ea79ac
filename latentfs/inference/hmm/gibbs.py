"""Block Gibbs sampling for hidden Markov models; Titterington (2006) §1.6 (Robert, Celeux & Diebolt 1993).

Each sweep draws the whole state path z ~ p(z | θ, y) by forward filtering, backward sampling
(:func:`~latentfs.inference.hmm.forward_backward.sample_states`), then θ ~ p(θ | z, y) from the conjugate
posterior: π ~ Dirichlet(α_π + [z_{start_s} = k] counts), each row A_k· ~ Dirichlet(α_A + n_k·) with
n_kl the transitions k → l inside sequences, and the emission parameters from the mixture family's
Normal–Gamma / Normal–Wishart / Dirichlet updates with the hard state counts
(:func:`latentfs.inference.mixture.gibbs.conjugate_posterior`). Chains are relabelled draw by draw on the
emission site (``Posterior.align``) before convergence is checked.
"""

from __future__ import annotations

from typing import Any

import torch

from latentfs.core.data import check_choice
from latentfs.core.pipeline import EngineSpec, Export, Option, Options, chain_options
from latentfs.core.random import dirichlet_sample
from latentfs.core.registry import register_spec
from latentfs.inference.hmm.em import INITIALISATIONS, _hyperparameters, _onehot, _transition_counts, initial_params
from latentfs.inference.hmm.family import HMMFamily, prepare
from latentfs.inference.hmm.forward_backward import sample_states
from latentfs.inference.mixture.gibbs import conjugate_posterior, prior_tensors, sample_parameters
from latentfs.models.hmm import CategoricalHMM, GaussianHMM

__all__ = ["chain_prior", "gibbs_parameters", "gibbs_sweep"]


def chain_prior(fam: HMMFamily) -> dict[str, torch.Tensor]:
    """α_π (K,) and α_A (K, K) of the model, plus the emission prior (mixture family's tensors)."""
    k = fam.k
    return {
        "start": torch.full((k,), fam.model.startprob_concentration, dtype=torch.float64, device=fam.device),
        "trans": torch.full((k, k), fam.model.transition_concentration, dtype=torch.float64, device=fam.device),
        "emission": prior_tensors(fam.emission),  # type: ignore[dict-item]
    }


def gibbs_parameters(
    fam: HMMFamily, states: torch.Tensor, prior: dict[str, Any], gen: torch.Generator
) -> dict[str, Any]:
    """θ ~ p(θ | z, y): Dirichlet π and rows of A from the state counts, emissions from the conjugate update."""
    start_counts = torch.bincount(states[fam.layout.starts], minlength=fam.k).to(torch.float64)
    post = conjugate_posterior(fam.emission, fam.emission.statistics(_onehot(states, fam.k)), prior["emission"])
    emission = sample_parameters(fam.emission, post, gen)
    return {
        "startprob": dirichlet_sample(prior["start"] + start_counts, gen),
        "transmat": dirichlet_sample(prior["trans"] + _transition_counts(fam, states), gen),
        "emission": emission,
    }


def gibbs_sweep(
    fam: HMMFamily, params: dict[str, Any], prior: dict[str, Any], gen: torch.Generator
) -> tuple[dict[str, Any], torch.Tensor, torch.Tensor]:
    """One sweep: z | θ by FFBS, then θ | z. Returns the new θ, z, and the per-sequence log f(y_s | θ_in)."""
    states, seq_ll = sample_states(params["startprob"], params["transmat"], fam.log_emission(params), fam.layout, gen)
    return gibbs_parameters(fam, states, prior, gen), states, seq_ll


def _init_option(name: str, value: Any) -> Any:
    return None if value is None else check_choice(name, value, INITIALISATIONS)


class HMMGibbs(EngineSpec):
    """Block Gibbs with forward-filtering backward-sampling (:func:`latentfs.fit` with ``method="gibbs"``).

    Each chain starts from k-means (Gaussian) or random (categorical) states, as EM does, draws θ given
    them, then alternates z | θ (FFBS) and θ | z. Each kept draw of θ comes with every sequence's forward
    log-likelihood log f(y_s | θ) (the ``log_likelihood`` group, ``observation_dim="sequence"``: what ``az.loo``
    and ``az.waic`` assume, the states integrated out), taken from the forward pass of the sweep that starts from
    that θ. Draws are relabelled per draw on every state-indexed site
    jointly (``Posterior.align``; both axes of ``transmat`` follow), then R̂ and ESS are checked
    (``Posterior.check_convergence``, a ConvergenceWarning when ``warn``), by the pipeline.

    Examples
    --------
    >>> import latentfs
    >>> from latentfs.models.hmm import GaussianHMM
    >>> sim = GaussianHMM(2, mean_precision=0.02).simulate(3, 40, seed=0)
    >>> res = latentfs.fit(GaussianHMM(2), sim["data"], method="gibbs", lengths=sim["lengths"],
    ...                    num_chains=2, num_warmup=20, num_samples=30, seed=0, warn=False)
    >>> res.samples("transmat").shape
    (2, 30, 2, 2)
    """

    method = "gibbs"
    kind = "sampler"
    desc = "Gibbs"
    options = {
        **chain_options(num_chains=4, num_warmup=200, num_samples=500),
        "lengths": Option(None, None, "sequence of int or None", "lengths of the sequences concatenated in the data"),
        "init": Option(None, _init_option, "str or None", "'kmeans' or 'random' starting states"),
    }

    def describe(self, model_name: str) -> str:
        return f"Gibbs {model_name}"

    def prepare(self, model: Any, data: Any, o: Options) -> Any:
        from types import SimpleNamespace

        fam = prepare(model, data, o.lengths)
        return SimpleNamespace(model=model, fam=fam, prior=chain_prior(fam))

    def init(self, prep: Any, o: Options, gen: torch.Generator) -> dict[str, Any]:
        fam = prep.fam
        start = initial_params(fam, o.init, gen, 1e-6)
        states, _ = sample_states(start["startprob"], start["transmat"], fam.log_emission(start), fam.layout, gen)
        return {"params": gibbs_parameters(fam, states, prep.prior, gen), "states": states}

    def sample(self, prep: Any, o: Options, state: dict[str, Any], gen: torch.Generator) -> tuple[Any, float]:
        params, states, seq_ll = gibbs_sweep(prep.fam, state["params"], prep.prior, gen)
        # the sweep's forward pass gave each sequence's log f(y_s | θ) at the θ it started from: that θ is kept
        # with it, so a kept draw's pointwise log-likelihood costs nothing (a forward pass per kept draw would
        # add half a sweep)
        return {"params": params, "states": states, "seq_ll": seq_ll, "kept": state["params"]}, float(seq_ll.sum())

    def collect(self, prep: Any, o: Options, state: dict[str, Any]) -> dict[str, Any]:
        # the draw kept is the θ the last sweep started from, with its per-sequence log-likelihood: the chain's
        # draws are those of the θ sequence one step earlier, each paired with its own log f(y_s | θ)
        out: dict[str, Any] = prep.fam.export(state["kept"])
        out["_seq_loglik"] = state["seq_ll"].cpu().numpy()
        return out

    def hyperparameters(self, model: Any, prep: Any, o: Options) -> dict[str, Any]:
        return _hyperparameters(model, prep.fam)

    def export(self, prep: Any, o: Options, outcome: Any) -> Export:
        fam, model = prep.fam, prep.model
        draws = dict(outcome.draws)
        seq_ll = draws.pop("_seq_loglik")
        return Export(
            dims=fam.dims(), coords=fam.coords(), draws=draws, log_likelihood=seq_ll,
            diagnostics={"observation_dim": "sequence", "num_warmup": int(o.num_warmup), "n_observations": fam.n,
                         "n_sequences": len(fam.data.lengths), "n_parameters": model.n_parameters(fam.n_features)},
            extras={"lengths": fam.data.lengths},
            relabel=("emission_probs" if fam.categorical else "means", "component"),
            relabel_also=("component_to",),  # both axes of the transition matrix follow
        )


register_spec(HMMGibbs(), GaussianHMM, CategoricalHMM)
