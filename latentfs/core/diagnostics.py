"""The one diagnostics vocabulary: every key a result's ``diagnostics`` may hold, with its meaning.

One name per concept, for every engine (DESIGN.md, contract 3): ``restart_objectives`` for what each start
reached (a log-likelihood for EM, a bound for VB), ``collapsed`` for the components at a degenerate point,
``convergence`` for the one R̂/ESS of a sampler's relabelled draws, ``seed`` for the seed a fit used.
``latentfs.testing.check_engine`` refuses a key that is not here, so a new engine either reuses a name or adds
one with its meaning.
"""

from __future__ import annotations

__all__ = ["DIAGNOSTICS", "CollapsedComponentWarning", "describe"]


class CollapsedComponentWarning(UserWarning):
    """A fit kept a component (a mixture component, an HMM state) whose variance sits at the regularisation
    floor: a degenerate maximiser, listed in ``diagnostics["collapsed"]``."""

#: key -> meaning
DIAGNOSTICS: dict[str, str] = {
    # every fit
    "seed": "the integer seed the fit used (refit with seed=this for the same numbers)",
    "interrupted": "the fit was stopped by Ctrl-C; the result holds what was computed",
    "observation_dim": "the dimension whose entries are the observations of the log_likelihood group",
    "n_observations": "the number of observations (rows, documents, sequence steps, pixels)",
    "n_parameters": "free parameters counted by the information criteria",
    "chain_method": "how chains or restarts ran when asked for: 'threads' or 'parallel'",
    "seconds": "wall-clock seconds of the fit",
    "dask_dashboard": "the Dask dashboard's link, for a fit on a dask collection under a dask.distributed Client",
    # optimisers
    "converged": "the stopping rule was met (relative change of the objective ≤ tol); None for a run without one "
                 "(online VB and stepwise EM step through a stream: the run ends with the stream)",
    "n_iter": "iterations of the kept start (its short run included)",
    "restart_objectives": "the objective each start reached, in start order (−inf for a dropped start)",
    "best_restart": "the index of the start that was kept",
    "restart_scores": "the validation score each start reached (early stopping on validation documents)",
    "n_init": "the number of starts that ran",
    "objective": "the maximised objective at the result",
    "objective_name": "what the objective is (log posterior, log-likelihood, negative divergence)",
    "log_likelihood": "the observed-data log-likelihood at the result",
    "conditional_log_likelihood": "the log-likelihood given each document's own fitted proportions",
    "no_pointwise_log_likelihood": "why the result has no pointwise log-likelihood for az.loo / az.waic, and "
    "what to compare fits by instead",
    "log_prior": "the log prior at a MAP result",
    "bound": "the evidence lower bound at the result (VB)",
    "elbo": "the ELBO estimate at the result (SVI, latent-trait VB)",
    "bound_gap": "the difference between the VB bound and the marginal log-likelihood by quadrature",
    "free_energy": "the mean-field free energy at the result (hidden Potts)",
    "fixed_point_residual": "the largest change of the mean-field fixed point at the last iteration",
    "pseudo_log_likelihood": "the pseudo-log-likelihood of the labels (hidden Potts)",
    "kl_divergence": "the generalised KL divergence of the NMF fit",
    "train_perplexity": "the perplexity of the training documents",
    "aic": "Akaike's information criterion, −2ℓ + 2ν (minimised)",
    "bic": "the Bayesian information criterion, −2ℓ + ν log N (minimised)",
    "icl": "the integrated completed likelihood, BIC + 2 × classification entropy (minimised)",
    "entropy": "the classification entropy −Σ τ log τ of the responsibilities",
    "reg_covar": "the variance floor, as a multiple of each column's variance",
    "collapsed": "components at a degenerate point (a variance at the floor): component, feature, relative "
                 "variance, weight; [] when none",
    "heywood_features": "features whose noise variance sits at its bound (a Heywood case)",
    "at_bound": "parameters whose estimate sits at a bound of its search (the fit ran to the cap); [] when none",
    "symmetric_saddle": "the topic model ended at the symmetric saddle (every topic alike)",
    "clipped_priors": "Dirichlet parameters below 1 raised to 1 for a MAP fit (the mode exists only then)",
    "zero_doc_entries": "document-topic proportions exactly zero at the MAP",
    "zero_topic_word_entries": "topic-word probabilities exactly zero at the MAP",
    "theta_update": "the update of the document proportions ('chapter' or 'full')",
    "tempered": "tempered EM was used (its inverse temperature schedule)",
    "best_iter": "the iteration with the best validation score (early stopping)",
    "best_validation_score": "the best validation score reached (early stopping)",
    "final_beta": "the inverse temperature at the end of tempered EM",
    "stopped_early": "the validation score stopped improving before max_iter",
    "unseen_validation_tokens": "validation tokens of words never seen in training",
    "zero_probability_validation_tokens": "validation tokens the model gave probability zero",
    "schedule": "the update schedule of the NMF fit",
    "missing_fraction": "the share of missing entries in the data",
    "n_patterns": "distinct response patterns the E-step ran over",
    "n_nodes": "quadrature nodes per latent dimension",
    "quadrature": "the quadrature rule of the latent-trait integral",
    "submodel": "the covariance submodel fitted (which parameters are shared or free)",
    "dims": "the intrinsic dimension of each class's subspace",
    "shards": "the number of dask shards the E-steps ran over",
    "init_rows": "rows the starts were computed on",
    # streams
    "tau0": "the step-size delay τ0 of ρ_t = (τ0 + t)^(−κ)",
    "kappa": "the step-size decay κ of ρ_t = (τ0 + t)^(−κ)",
    "n_seen": "rows seen by the stream so far",
    "total_documents": "the corpus size the online updates scale to",
    # samplers
    "num_chains": "the number of chains kept",
    "num_warmup": "steps of each chain before draws were kept",
    "num_samples": "draws kept per chain",
    "num_draws": "draws kept per chain (or drawn from a variational posterior)",
    "thin": "every thin-th step after warm-up was kept",
    "convergence": "R̂ and bulk/tail ESS of each sampled site after relabelling: r_hat_max, r_hat_argmax, "
                   "ess_bulk_min, ess_tail_min, entries_checked, n_entries",
    "chain_modes": "chains that are each stationary but sit in different modes",
    "stored_sites": "the sites whose draws were kept",
    "align": "how the draws were relabelled (the site and the method), when asked for",
    "storage": "how the draws are stored (per-k blocks of a reversible-jump chain)",
    "acceptance": "the Metropolis–Hastings acceptance rate of each move",
    "proposed": "how often each move was proposed",
    "mh_steps": "Metropolis–Hastings steps per token and sweep",
    "sweep": "the collapsed sweep used ('sparse', 'dense')",
    "init": "how the chains were started",
    "n_threads": "threads of each chain's compiled sweep",
    "hyper_drift": "the change of learned hyperparameters over the kept draws",
    "prior": "the prior over the number of components",
    "prior_only": "the likelihood was switched off (a prior check)",
    "interaction_acceptance": "the acceptance rate of the Potts interaction's updates",
    "interaction_estimated": "the Potts interaction was estimated rather than fixed",
    "interaction_step": "the random-walk step of the Potts interaction",
    "interaction_target": "the acceptance rate the interaction's step was tuned to",
    "n_pixels": "pixels of the lattice",
    "n_sequences": "the number of sequences",
}


def describe(key: str) -> str:
    """The meaning of a diagnostics key (KeyError names the vocabulary when it is not one)."""
    try:
        return DIAGNOSTICS[key]
    except KeyError:
        raise KeyError(f"{key!r} is not a diagnostics key; see latentfs.core.diagnostics.DIAGNOSTICS") from None
