"""``latentfs.testing.check_engine`` on every registered (model, method) pair, parametrised from the registry:
an engine added without a tiny problem (``tiny_model``) fails here instead of escaping the checks."""

from __future__ import annotations

import pytest

from latentfs.core import registry
from latentfs.testing import check_engine, tiny_model

# The Pyro reference engine NUTS takes seconds even on the tiny corpus, and check_engine fits each pair five
# times: marked slow (CI runs it; a contributor's fast stage, -m "not slow", leaves it out).
PAIRS = [
    pytest.param(cls, method, id=f"{cls.__name__}-{method}", marks=[pytest.mark.slow] if method == "nuts" else [])
    for cls, method in sorted(registry.engines(), key=lambda p: (p[0].__name__, p[1]))
]


@pytest.mark.parametrize(("model_class", "method"), PAIRS)
def test_check_engine(model_class, method):
    check_engine(tiny_model(model_class), method)


def test_check_engine_catches_an_engine_that_records_another_seed(monkeypatch):
    # the check can fail: an engine entry function that fits with another seed than the one it was given
    from latentfs.models.mixture import GaussianMixture

    real = registry._ENGINES[(GaussianMixture, "vb")]

    def drifting(model, data, *, n_init=3, init=None, max_iter=1000, tol=1e-8, seed=0, warn=True, progress=None,
                 callback=None, device="cpu"):
        return real(model, data, n_init=n_init, init=init, max_iter=max_iter, tol=tol, seed=seed + 1, warn=warn,
                    progress=progress, callback=callback, device=device)

    monkeypatch.setitem(registry._ENGINES, (GaussianMixture, "vb"), drifting)
    with pytest.raises(AssertionError, match=r"diagnostics\['seed'\] is 4, not the seed 3"):
        check_engine(GaussianMixture(2, mean_precision=0.02), "vb")


def test_check_engine_runs_in_a_fresh_process_with_ctrl_c_checked():
    # a user's first call: the model's family is not imported yet (the registry was empty for it), and an engine with
    # a callback is interrupted at its second iteration and must come back flagged
    import subprocess
    import sys

    code = ("import latentfs.testing as t\nfrom latentfs.models.mixture import GaussianMixture\n"
            "seen = []\norig = t.check_interruptible\n"
            "t.check_interruptible = lambda *a, **k: seen.append(orig(*a, **k).diagnostics['interrupted'])\n"
            "t.check_engine(t.tiny_model(GaussianMixture), 'vb')\nprint(seen)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[True]"
