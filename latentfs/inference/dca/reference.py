"""Pyro's own inference (NUTS, SVI) on the DCA models: the reference the fast engines are tested against.

These run the declared ``model`` as it is, on a dense count matrix, so they are meant for small data (a few
thousand cells). Both are :class:`~latentfs.core.pipeline.EngineSpec` s run by the one pipeline:

* **NUTS** is a sampler spec around Pyro's own kernel (:class:`pyro.infer.NUTS`): a chain's ``init`` is the
  kernel's ``setup`` (the initial position and the adaptation schedule), each ``sample`` one ``kernel.sample``
  (one NUTS transition, step size and mass matrix adapted during the warm-up), the loop Pyro's ``MCMC`` runs
  (``pyro.infer.mcmc.api._gen_samples``) with the pipeline in its place, so the pipeline owns the chains (one
  after another, in threads or in processes), Ctrl-C, the relabelling and the one R̂/ESS check. The kept draws
  are the unconstrained positions, mapped to the model's supports by the kernel's transforms in ``export``, laid
  out and transformed as ``MCMC.get_samples`` does.
* **SVI** is an optimiser spec: an ``AutoNormal`` guide, ``Trace_ELBO`` and Adam; one ``step`` is one
  ``SVI.step``, the objective the ELBO estimate; ``export`` draws ``num_draws`` draws from the fitted guide as one
  chain.

Pyro draws from the global random generators and keeps its parameters in a global store. Each step runs under
:func:`~latentfs.core.pyro_context.pyro_scope` (the process-wide Pyro lock; the caller's random states restored
afterwards) with the chain's or the fit's own random states and parameter store put back first and saved after
(:class:`PyroRandom`, :func:`_resumed`): a chain continues exactly where its last step stopped, whatever ran in
between, so a fit changes no global state and gives the same numbers in one thread or several.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyro
import torch
from pyro import poutine
from pyro.infer import NUTS, SVI, Trace_ELBO
from pyro.infer.autoguide import AutoNormal

from latentfs.core.data import DataError
from latentfs.core.options import check_float, check_int
from latentfs.core.pipeline import EngineSpec, Export, Option, Options, chain_options, shared
from latentfs.core.pyro_context import pyro_scope
from latentfs.core.registry import register_spec
from latentfs.inference.dca.common import DCAData, DCAModel, dims_and_coords, log_joint, prepare, resolve_model
from latentfs.models.dca import DirichletDCA, GammaPoissonDCA

if TYPE_CHECKING:
    from pyro.params.param_store import StateDict

__all__ = ["NUTSChain", "PyroNUTS", "PyroRandom", "PyroSVI", "SVIFit", "fit_nuts", "fit_svi"]

_MAX_CELLS = 200_000


# ----------------------------------------------------------------------------- the data
@dataclass(frozen=True)
class _Prep:
    """What both engines fit: the model with its data-dependent defaults filled in (GaP's β), the validated data,
    its dense counts (what the Pyro model observes) and the result's axes."""

    model: DCAModel
    data: DCAData
    counts: torch.Tensor
    dims: dict[str, tuple[str, ...]]
    coords: dict[str, list[str]]


def _dense(model: DCAModel, X: Any, dtype: torch.dtype, empty_documents: str) -> _Prep:
    if getattr(model, "groups", None) is not None:
        raise DataError(
            "the generic Pyro engines (nuts, svi) do not support grouped models (groups=…); use method='vb' or "
            "method='gibbs', whose grouped updates are tested against the same Pyro model."
        )
    data = prepare(X, dtype=dtype, empty_documents=empty_documents)
    model = resolve_model(model, data)
    cells = data.n_documents * data.n_features
    if cells > _MAX_CELLS:
        raise DataError(
            f"X has {cells} cells; the generic Pyro engines work on a dense matrix and are meant for at most "
            f"{_MAX_CELLS}. Use method='vb' or method='gibbs' for data of this size."
        )
    dims, coords = dims_and_coords(model, data)
    return _Prep(model, data, data.dense(), dims, coords)


def _sites(prep: _Prep) -> tuple[str, str]:
    return ("topic_word", prep.model.doc_site)


# ----------------------------------------------------------------------------- Pyro's global state, carried
@dataclass
class PyroRandom:
    """The global random states a Pyro program draws from, carried between the steps of one chain or fit.

    Attributes
    ----------
    python : tuple
        Python's ``random.getstate()``.
    numpy : tuple
        NumPy's legacy ``np.random.get_state()``.
    torch : uint8 tensor
        torch's CPU ``torch.get_rng_state()`` (what ``pyro.sample`` draws from).
    """

    python: Any
    numpy: Any
    torch: torch.Tensor

    @classmethod
    def now(cls) -> PyroRandom:
        return cls(random.getstate(), np.random.get_state(), torch.get_rng_state())

    def restore(self) -> None:
        random.setstate(self.python)
        np.random.set_state(self.numpy)
        torch.set_rng_state(self.torch)


def _seed_of(gen: torch.Generator) -> int:
    return int(torch.randint(0, 2**31 - 1, (1,), generator=gen).item())


@contextmanager
def _resumed(rng: PyroRandom | None, params: StateDict | None = None, *, seed: int | None = None,
             mcmc: bool = False) -> Iterator[PyroRandom]:
    """A block of Pyro code that continues a chain or a fit: under :func:`pyro_scope` (seeded with ``seed`` at a
    start), with the random states ``rng`` put back first (a start has none) and ``params`` as the parameter
    store (a Pyro ``ParamStoreDict.scope`` state, updated in place); yields the random states, which are saved
    into it when the block ends. ``mcmc`` runs the block as Pyro's ``MCMC.run`` runs its kernel: validation off
    and the kernel's own sample sites hidden from any handler outside (``poutine.block``)."""
    with pyro_scope(seed):
        if rng is not None:
            rng.restore()
        with ExitStack() as stack:
            if params is not None:
                stack.enter_context(pyro.get_param_store().scope(params))
            if mcmc:
                stack.enter_context(pyro.validation_enabled(False))
                stack.enter_context(poutine.block())
            out = rng if rng is not None else PyroRandom.now()
            yield out
        saved = PyroRandom.now()
        out.python, out.numpy, out.torch = saved.python, saved.numpy, saved.torch


# ----------------------------------------------------------------------------- the result
def _log_joint_draws(prep: _Prep, draws: dict[str, np.ndarray]) -> np.ndarray:
    """log p(w, latent, Θ) at every draw (chain, draw): the result's trace and ``sample_stats["lp"]``."""
    topic_word, doc = draws["topic_word"], draws[prep.model.doc_site]
    n_chains, n_draws = topic_word.shape[:2]
    lp = np.empty((n_chains, n_draws))
    for c in range(n_chains):
        for d in range(n_draws):
            t = torch.as_tensor(topic_word[c, d], dtype=prep.data.dtype)
            x = torch.as_tensor(doc[c, d], dtype=prep.data.dtype)
            lp[c, d] = float(log_joint(prep.model, prep.data, t, x))
    return lp


def _export(prep: _Prep, draws: dict[str, np.ndarray], diagnostics: dict[str, Any]) -> Export:
    lp = _log_joint_draws(prep, draws)
    return Export(
        dims=prep.dims, coords=prep.coords, draws=draws, trace=lp, sample_stats={"lp": lp},
        extras={"doc_lengths": prep.data.counts.doc_lengths},
        diagnostics={**diagnostics, "num_draws": int(lp.shape[1]), "observation_dim": "document"},
    )


def _pointwise_loglik(post: Any, prep: _Prep) -> None:
    """log p(w_(i) | Θ) at each draw, the document's latent integrated out (what ``az.loo`` assumes), on first
    use."""
    from latentfs.inference.dca.loo import count_constants, lazy_marginal_loglik

    n_chains = post.samples("topic_word").shape[0]
    post.log_likelihood = lazy_marginal_loglik(post, prep.data.counts.csr, count_constants(prep.model, prep.data),
                                               [prep.model] * n_chains, [{}] * n_chains, 0)


def _target_accept_prob(name: str, value: Any) -> float:
    return check_float(name, value, 0.0, 1.0, low_open=True, high_open=True, remedy="Pass a probability such as 0.8.")


def _positive_int(name: str, value: Any) -> int:
    return check_int(name, value, low=1)


# ----------------------------------------------------------------------------- NUTS
@dataclass
class NUTSChain:
    """One NUTS chain between transitions.

    Attributes
    ----------
    kernel : pyro.infer.NUTS
        Pyro's kernel, set up for this chain: its step size, mass matrix and their adaptation during the warm-up,
        and the transforms from the unconstrained space to the model's supports.
    params : dict site -> tensor
        The chain's position z, every latent site in the unconstrained space.
    rng : PyroRandom
        The chain's random states after its last transition.
    """

    kernel: NUTS
    params: dict[str, torch.Tensor]
    rng: PyroRandom


class PyroNUTS(EngineSpec):
    """NUTS on :meth:`model.model` (``latentfs.fit(model, X, method="nuts")``), small data only.

    ``init_values`` (site -> array) starts every chain there (FIELD_NOTES: explicit starts avoid chains in
    label-swapped modes); otherwise Pyro's default initialisation is used. The draws are relabelled per draw,
    within and across chains, and checked for convergence (a :class:`~latentfs.core.driver.ConvergenceWarning`
    when R̂ or ESS is off, unless ``warn=False``). Ctrl-C keeps the draws made so far. Chain ``c`` seeds Pyro with
    one draw from the ``c``-th generator spawned from ``seed``.

    Options: ``num_samples``, ``num_warmup``, ``num_chains`` (500, 500 and 2 by default), ``thin``,
    ``init_values``, ``target_accept_prob`` (NUTS's target acceptance probability during step-size adaptation,
    in (0, 1)), ``seed``, ``dtype``, ``empty_documents``, ``progress``, ``warn``.

    The trace is log p(w, latent, Θ) at each kept draw; ``diagnostics`` adds ``num_draws`` and
    ``observation_dim``.

    Examples
    --------
    >>> import latentfs
    >>> model = latentfs.DirichletDCA(2)
    >>> X = model.simulate(n_documents=8, n_features=5, doc_length=20, seed=0)["counts"]
    >>> post = latentfs.fit(model, X, method="nuts", num_chains=1, num_warmup=5, num_samples=3, warn=False)
    >>> post.samples("topic_word").shape
    (1, 3, 2, 5)
    """

    method = "nuts"
    kind = "sampler"
    desc = "NUTS"
    options = {
        **chain_options(num_chains=2, num_warmup=500, num_samples=500),
        "init_values": Option(None, None, "dict site -> array or None",
                              "where every chain starts (Pyro's init_to_value); None: Pyro's default initialisation"),
        "target_accept_prob": Option(0.8, _target_accept_prob, "float in (0, 1)",
                                     "NUTS's target acceptance probability during step-size adaptation"),
        "dtype": shared("dtype"),
        "empty_documents": shared("empty_documents"),
    }

    def describe(self, model_name: str) -> str:
        return f"{model_name} NUTS"

    def prepare(self, model: Any, X: Any, o: Options) -> _Prep:
        return _dense(model, X, o.dtype, o.empty_documents)

    def hyperparameters(self, model: Any, prep: _Prep, o: Options) -> dict[str, Any]:
        return dict(prep.model.hyperparameters())

    def _kernel(self, prep: _Prep, o: Options) -> NUTS:
        kwargs: dict[str, Any] = {"target_accept_prob": o.target_accept_prob}
        if o.init_values is not None:
            from pyro.infer.autoguide.initialization import init_to_value

            values = {k: torch.as_tensor(np.asarray(v), dtype=o.dtype) for k, v in o.init_values.items()}
            kwargs["init_strategy"] = init_to_value(values=values)
        return NUTS(prep.model.model, **kwargs)

    def init(self, prep: _Prep, o: Options, gen: torch.Generator) -> NUTSChain:
        kernel = self._kernel(prep, o)
        with _resumed(None, seed=_seed_of(gen), mcmc=True) as rng:
            kernel.setup(o.num_warmup, prep.counts.detach())
            params = kernel.initial_params
        return NUTSChain(kernel, params, rng)

    def sample(self, prep: _Prep, o: Options, state: NUTSChain, gen: torch.Generator) -> tuple[NUTSChain, float]:
        with _resumed(state.rng, mcmc=True):
            state.params = state.kernel.sample(state.params)
        # the kernel caches the potential energy −log p(z) of the position it returned (unconstrained space)
        return state, -float(state.kernel._potential_energy_last)

    def collect(self, prep: _Prep, o: Options, state: NUTSChain) -> dict[str, Any]:
        return {site: value.detach().cpu().numpy() for site, value in state.params.items()}

    def export(self, prep: _Prep, o: Options, outcome: Any) -> Export:
        transforms = outcome.final_states[0].kernel.transforms
        unconstrained = outcome.draws
        names = sorted(unconstrained)
        n_draws = int(outcome.n_draws)
        chains: dict[str, list[np.ndarray]] = {s: [] for s in _sites(prep)}
        for c in range(int(outcome.trace.shape[0])):
            # MCMC.get_samples's layout: one flat row per draw, each site a slice of it, then its transform
            flat = torch.cat([torch.as_tensor(unconstrained[s][c]).reshape(n_draws, -1) for s in names], -1)[None]
            pos = 0
            for s in names:
                shape = unconstrained[s].shape[2:]
                size = int(np.prod(shape, dtype=np.int64))
                z = flat[:, :, pos:pos + size].reshape((1, n_draws, *shape))
                pos += size
                if s in chains:
                    value = transforms[s].inv(z) if s in transforms else z
                    chains[s].append(value[0].detach().cpu().numpy())
        draws = {s: np.stack(v) for s, v in chains.items()}
        ex = _export(prep, draws, {"num_warmup": int(o.num_warmup), "thin": int(o.thin)})
        ex.relabel = ("topic_word", "component")
        return ex

    def finalize(self, post: Any, prep: _Prep, o: Options, outcome: Any) -> None:
        _pointwise_loglik(post, prep)


# ----------------------------------------------------------------------------- SVI
@dataclass
class SVIFit:
    """The SVI fit between steps.

    Attributes
    ----------
    svi : pyro.infer.SVI
        The model, the ``AutoNormal`` guide, Adam (its moments) and ``Trace_ELBO``.
    guide : pyro.infer.autoguide.AutoNormal
        The guide: a normal per unconstrained latent, its locations and scales the parameters fitted.
    params : dict
        The fit's parameter store (a ``ParamStoreDict.scope`` state: the guide's parameters by name).
    rng : PyroRandom
        The random states after the last step.
    n_steps : int
        Steps taken.
    """

    svi: SVI
    guide: AutoNormal
    params: StateDict
    rng: PyroRandom
    n_steps: int = 0


def _learning_rate(name: str, value: Any) -> float:
    return check_float(name, value, 0.0, low_open=True, remedy="Pass a small positive step, e.g. 0.02.")


class PyroSVI(EngineSpec):
    """SVI with an ``AutoNormal`` guide and ``Trace_ELBO`` (``latentfs.fit(model, X, method="svi")``).

    The trace is the ELBO estimate per step. The result holds ``num_draws`` draws from the fitted guide as one
    chain. ``tol=0`` (default) runs all ``num_steps`` steps; a positive ``tol`` stops early when the ELBO's
    relative change is at most ``tol``.

    Options: ``num_steps`` (SVI steps, Adam updates of the guide's parameters), ``learning_rate`` (Adam's step
    size, > 0), ``num_draws`` (draws taken from the fitted guide into the result), ``tol``, ``seed``, ``dtype``,
    ``empty_documents``, ``progress``.

    Examples
    --------
    >>> import latentfs
    >>> model = latentfs.DirichletDCA(2)
    >>> X = model.simulate(n_documents=8, n_features=5, doc_length=20, seed=0)["counts"]
    >>> post = latentfs.fit(model, X, method="svi", num_steps=20, num_draws=4)
    >>> post.samples("topic_word").shape, post.trace.shape
    ((1, 4, 2, 5), (1, 20))
    """

    method = "svi"
    kind = "optimizer"
    desc = "SVI"
    options = {
        "num_steps": Option(2000, _positive_int, "int ≥ 1", "SVI steps (Adam updates of the guide's parameters)"),
        "learning_rate": Option(0.02, _learning_rate, "float > 0", "Adam's step size"),
        "num_draws": Option(500, _positive_int, "int ≥ 1", "draws taken from the fitted guide into the result"),
        "seed": shared("seed"),
        "dtype": shared("dtype"),
        "empty_documents": shared("empty_documents"),
        "progress": shared("progress"),
        "tol": shared("tol", 0.0, "stop when the ELBO's relative change is at most this (0: run every step)"),
    }

    def describe(self, model_name: str) -> str:
        return f"{model_name} SVI"

    def max_iter(self, prep: _Prep, o: Options) -> int:
        return int(o.num_steps)  # the pipeline's bound on a run's iterations is SVI's step count

    def prepare(self, model: Any, X: Any, o: Options) -> _Prep:
        return _dense(model, X, o.dtype, o.empty_documents)

    def hyperparameters(self, model: Any, prep: _Prep, o: Options) -> dict[str, Any]:
        return dict(prep.model.hyperparameters())

    def start(self, prep: _Prep, o: Options, gen: torch.Generator, index: int) -> SVIFit:
        params: StateDict = {"params": {}, "constraints": {}}
        with _resumed(None, params, seed=_seed_of(gen)) as rng:
            guide = AutoNormal(prep.model.model)
            optimizer = pyro.optim.Adam({"lr": o.learning_rate})  # type: ignore[attr-defined]  # made at import
            svi = SVI(prep.model.model, guide, optimizer, Trace_ELBO())
        return SVIFit(svi, guide, params, rng)

    def step(self, prep: _Prep, o: Options, state: SVIFit) -> tuple[SVIFit, float]:
        with _resumed(state.rng, state.params):
            loss = state.svi.step(prep.counts)
        state.n_steps += 1
        return state, -loss

    def settled(self, prep: _Prep, o: Options, state: SVIFit) -> bool:
        return o.tol > 0 or state.n_steps >= o.num_steps  # tol=0: every step is run

    def warn_unconverged(self, prep: _Prep, o: Options) -> bool:
        return False  # a fixed number of stochastic steps, not a run to convergence

    def export(self, prep: _Prep, o: Options, outcome: Any) -> Export:
        state: SVIFit = outcome.run.state
        with _resumed(state.rng, state.params), torch.no_grad():
            samples = [state.guide() for _ in range(o.num_draws)]
        draws = {s: np.stack([d[s].cpu().numpy() for d in samples])[None] for s in _sites(prep)}
        ex = _export(prep, draws, {"num_chains": 1, "elbo": outcome.run.objective})
        ex.trace = None  # the ELBO per step (the pipeline's trace of the run)
        return ex

    def finalize(self, post: Any, prep: _Prep, o: Options, outcome: Any) -> None:
        _pointwise_loglik(post, prep)


#: the specs, callable as ``fit_nuts(model, X, **options)`` and ``fit_svi(model, X, **options)`` (the pipeline
#: runs them)
fit_nuts = register_spec(PyroNUTS(), DirichletDCA, GammaPoissonDCA)
fit_svi = register_spec(PyroSVI(), DirichletDCA, GammaPoissonDCA)
