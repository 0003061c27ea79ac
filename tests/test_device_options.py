"""The ``device`` option of the mixture, hidden Markov and hidden-Potts engines (issue 33), on the CPU.

Each engine checks ``device`` at the boundary (a DataError naming it, the rule, the value and a remedy) and
``device="cpu"`` is the default path itself: the same numbers, bit for bit. The fits on a GPU against the
CPU are in ``tests/test_gpu.py``. The Gaussian mixture's gram E-step has a NumPy kernel (the CPU) and a torch
kernel (any other device): both are run here on the same inputs, so the GPU's arithmetic is checked on
every machine.
"""

import numpy as np
import pytest
import torch

import latentfs
from latentfs.core.data import DataError
from latentfs.inference.mixture.families import _gram_e_step_numpy, _gram_e_step_torch, family_for
from latentfs.models.hmm import CategoricalHMM, GaussianHMM
from latentfs.models.hmrf import HiddenPotts
from latentfs.models.mixture import GaussianMixture, LatentClass, LatentProfile


def _continuous():
    rng = np.random.default_rng(0)
    return rng.normal(size=(120, 3)) + np.repeat([[0.0, 0.0, 0.0], [3.0, -2.0, 1.0]], 60, axis=0)


def _items():
    return LatentClass(2).simulate(150, 5, seed=0)["items"]


def _gaussian_sequences():
    sim = GaussianHMM(2, mean_precision=0.02).simulate(3, 40, 2, seed=0)
    return sim["data"], {"lengths": sim["lengths"]}


def _symbol_sequences():
    sim = CategoricalHMM(2, 3).simulate(3, 40, seed=0)
    return sim["data"], {"lengths": sim["lengths"]}


def _lattice():
    params = {"interaction": 0.8, "means": [[0.0], [2.0]], "precision": [[1.0], [1.0]]}
    return HiddenPotts(2).simulate((16, 16), params=params, seed=0)["data"], {}


def _no_options(make):
    return lambda: (make(), {})


OPT = {"seed": 0, "max_iter": 15, "warn": False}
# (id, model, method, data and its extra options): every engine that takes ``device`` here.
ENGINES = [
    ("gmm-full-em", GaussianMixture(2), "em", _no_options(_continuous)),
    ("gmm-full-cholesky-em", GaussianMixture(2), "em", lambda: (_continuous(), {"e_step": "cholesky"})),
    ("gmm-diag-em", GaussianMixture(2, covariance_type="diag"), "em", _no_options(_continuous)),
    ("latent-profile-em", LatentProfile(2), "em", _no_options(_continuous)),
    ("latent-class-em", LatentClass(2), "em", _no_options(_items)),
    ("gmm-full-vb", GaussianMixture(2), "vb", _no_options(_continuous)),
    ("gmm-diag-vb", GaussianMixture(2, covariance_type="diag"), "vb", _no_options(_continuous)),
    ("latent-class-vb", LatentClass(2), "vb", _no_options(_items)),
    ("gaussian-hmm-em", GaussianHMM(2), "em", _gaussian_sequences),
    ("gaussian-hmm-full-em", GaussianHMM(2, covariance_type="full"), "em", _gaussian_sequences),
    ("categorical-hmm-em", CategoricalHMM(2), "em", _symbol_sequences),
    ("gaussian-hmm-vb", GaussianHMM(2), "vb", _gaussian_sequences),
    ("categorical-hmm-vb", CategoricalHMM(2), "vb", _symbol_sequences),
    ("potts-icm", HiddenPotts(2), "icm", _lattice),
    ("potts-mean-field", HiddenPotts(2), "mean_field", _lattice),
]
IDS = [e[0] for e in ENGINES]


@pytest.mark.parametrize(("model", "method", "data"), [e[1:] for e in ENGINES], ids=IDS)
def test_device_cpu_is_the_default_path_bit_for_bit(model, method, data):
    X, extra = data()
    default = latentfs.fit(model, X, method=method, **OPT, **extra)
    cpu = latentfs.fit(model, X, method=method, device="cpu", **OPT, **extra)
    np.testing.assert_array_equal(cpu.trace, default.trace)
    assert default.trace.size > 1  # the fit ran (and the trace compared is not empty)
    for site in default.sites:
        np.testing.assert_array_equal(cpu.mean(site), default.mean(site))
    for name, value in default.extras.items():
        if isinstance(value, np.ndarray):
            assert isinstance(cpu.extras[name], np.ndarray)
            np.testing.assert_array_equal(cpu.extras[name], value)


@pytest.mark.parametrize(("model", "method", "data"), [e[1:] for e in ENGINES], ids=IDS)
@pytest.mark.parametrize(
    ("device", "match"),
    [
        ("gpu0", r"device must be a torch device name such as 'cpu', 'cuda' or 'cuda:0'; got 'gpu0'\. "
                 r"Write 'cuda:0' for the first GPU, or 'cpu'"),
        (0.5, r"device must be a device name such as 'cpu' or 'cuda:0', or a torch\.device; got 0\.5 \(float\)"),
        ("meta", r"device must be a device that holds data; got 'meta' \(shapes only, no values\)\. "
                 r"Pass device='cpu'"),
    ],
    ids=["unknown-name", "not-a-name", "meta"],
)
def test_a_bad_device_is_one_data_error_naming_it(model, method, data, device, match):
    X, extra = data()
    with pytest.raises(DataError, match=match):
        latentfs.fit(model, X, method=method, device=device, **OPT, **extra)


@pytest.mark.parametrize(("model", "method", "data"), [e[1:] for e in ENGINES], ids=IDS)
def test_cuda_is_refused_with_the_remedy_where_there_is_no_gpu(model, method, data):
    X, extra = data()
    if torch.cuda.is_available():  # on a GPU machine the same call must simply work
        assert latentfs.fit(model, X, method=method, device="cuda", **OPT, **extra).trace.size > 1
    else:
        with pytest.raises(DataError, match=r"device is 'cuda' but CUDA is not available here.*device='cpu'"):
            latentfs.fit(model, X, method=method, device="cuda", **OPT, **extra)


def test_a_dask_array_with_a_gpu_device_is_refused_with_the_remedy(monkeypatch):
    import dask.array as da  # a test extra (latentfs[dask])
    # The check runs before anything touches the device: a machine that says it has CUDA is enough.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    X = da.from_array(_continuous(), chunks=(40, 3))
    with pytest.raises(DataError, match=r"device='cuda' applies to data in memory; the shards of a dask array X "
                                        r"are fitted on the CPU by their workers\. Pass device='cpu', or X\.compute\(\)"):
        latentfs.fit(GaussianMixture(2), X, method="em", device="cuda", warn=False)


def test_the_gpu_gram_e_step_equals_the_cpu_one():
    # The torch kernel is what runs on a GPU; here both kernels get the same host tensors.
    fam = family_for(GaussianMixture(3), _continuous())
    assert fam.e_step_variant == "gram"
    rng = np.random.default_rng(1)
    resp = torch.as_tensor(rng.dirichlet(np.ones(3), size=fam.n))
    params = fam.m_step(resp, 1e-6 * fam.column_variance)
    from latentfs.inference.mixture.families import _gram_coefficients

    coef = _gram_coefficients(fam, params, torch.log(params["weights"]))
    resp_np, ll_np = _gram_e_step_numpy(coef.clone(), fam.gram_t)
    resp_t, ll_t = _gram_e_step_torch(coef.clone(), fam.gram_t)
    np.testing.assert_allclose(resp_t.numpy(), resp_np.numpy(), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(ll_t.numpy(), ll_np.numpy(), rtol=1e-12)
    # and both equal the E-step without the stored features (the Cholesky variant)
    chol = family_for(GaussianMixture(3), _continuous(), e_step="cholesky")
    resp_c, ll_c = chol.e_step(params)
    np.testing.assert_allclose(resp_t.numpy(), resp_c.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(ll_t.numpy(), ll_c.numpy(), rtol=1e-10)


def test_the_hmm_scan_that_runs_on_a_gpu_equals_the_compiled_cpu_recursion():
    # On the CPU in float64 forward_backward uses the compiled recursion; any other device runs the torch
    # scans, reached here through their building blocks on the same inputs (3011 rows: the blocked scan).
    from latentfs.inference.hmm.forward_backward import (
        ChainLayout,
        _backward,
        forward_backward,
        forward_filter,
    )

    rng = np.random.default_rng(2)
    k, lengths = 3, [50, 1, 2960]
    layout = ChainLayout.from_lengths(lengths)
    start = torch.as_tensor(rng.dirichlet(np.ones(k)))
    trans = torch.as_tensor(rng.dirichlet(np.ones(k), size=k))
    log_em = torch.as_tensor(rng.normal(size=(sum(lengths), k)))
    compiled = forward_backward(start, trans, log_em, layout)
    filtered, log_norm, b = forward_filter(start, trans, log_em, layout)
    beta = _backward(trans, start, b, layout)
    gamma = filtered * beta / (filtered * beta).sum(1, keepdim=True)
    np.testing.assert_allclose(filtered.numpy(), compiled.filtered.numpy(), rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(gamma.numpy(), compiled.gamma.numpy(), rtol=1e-10, atol=1e-14)
    at_end = log_norm[layout.ends]
    np.testing.assert_allclose(torch.diff(at_end, prepend=at_end.new_zeros(1)).numpy(),
                               compiled.log_likelihood.numpy(), rtol=1e-12)
    assert layout.to(None) is layout and layout.to("cpu").is_start.device.type == "cpu"
