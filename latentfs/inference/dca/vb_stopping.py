"""When a DCA VB fit may stop (:mod:`latentfs.inference.dca.vb`): not while it sits at the symmetric saddle of its
near-uniform start, and not while a learned γ is still moving; a fit that ends at the saddle is flagged.
"""

from __future__ import annotations

import torch

from latentfs.core.results import Posterior

#: Θ's rows all lie within this total-variation distance of their mean at the symmetric saddle that a fit
#: from the near-uniform start of :func:`~latentfs.inference.dca.vb_updates.init_topic_word` crosses first:
#: measured 0.013–0.03 on its plateau (5,000 documents × 20,000 words, 1M tokens, K = 50, where the bound
#: changed by only 3e-6 relative per cycle for 25 cycles), against 0.29–0.55 for fits of structureless Poisson
#: counts and 0.67 for a fit that found the planted components.
SADDLE_TV = 0.05


def components_separated(topic_word: torch.Tensor) -> bool:
    """False while every component's word distribution is within :data:`SADDLE_TV` (total variation) of
    their mean: the fit is still at the symmetric saddle, and a small change of the bound there is not
    convergence (the ``settled`` check of :func:`latentfs.core.driver.run_optimizer`)."""
    if topic_word.shape[0] < 2:
        return True
    theta = topic_word / topic_word.sum(-1, keepdim=True)
    spread = 0.5 * theta.sub_(theta.mean(0, keepdim=True)).abs_().sum(-1)  # in place: one K × J temporary
    return bool(spread.max() > SADDLE_TV)


#: Relative change of a learned γ per cycle under which it counts as settled (the fit does not stop before).
GAMMA_TOL = 1e-3


def gamma_settled(trace: list[float] | None) -> bool:
    """True unless γ is learned (``trace``: its value after every cycle) and has not yet been updated twice, or its
    last update moved it by more than :data:`GAMMA_TOL` (relative)."""
    if trace is None:
        return True
    return len(trace) >= 2 and abs(trace[-1] - trace[-2]) <= GAMMA_TOL * abs(trace[-1])


def flag_saddle(post: Posterior, topic_word: torch.Tensor, *, warn: bool, n_iter: int) -> None:
    """Record ``diagnostics["symmetric_saddle"]``, and warn when the fit stopped with all components alike."""
    at_saddle = not components_separated(topic_word)  # it works on a normalised copy
    post.diagnostics["symmetric_saddle"] = at_saddle
    if at_saddle:
        post.diagnostics["converged"] = False
        if warn:
            import warnings

            from latentfs.core.driver import ConvergenceWarning

            K = topic_word.shape[0]
            warnings.warn(
                f"VB stopped after {n_iter} cycles at the symmetric saddle: all {K} components are within "
                f"{SADDLE_TV} (total variation) of their mean word distribution, so this is one unigram model "
                "repeated, not a topic model. Raise max_iter, use a smaller gamma (the prior is pulling the "
                "components together), fewer n_components, or n_init > 1.",
                ConvergenceWarning,
                stacklevel=3,
            )
