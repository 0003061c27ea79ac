"""Feature weights read from the class subspaces of a fitted HDDA (Bouveyron, Girard & Schmid 2006).

Two documented measures, chosen by name from :data:`MEASURES` (π_i the class proportions, q_ijf the f-th
entry of the j-th column of Q̃_i, Σ_i = b_i I + Q̃_i diag(a_i − b_i) Q̃_iᵗ):

``"signal"``
    w_f = Σ_i π_i Σ_{j≤d_i} (a_ij − b_i) q_ijf² — the variance that feature f carries in the classes'
    signal subspaces beyond the noise level (digest §2.10, "signal variance carried by f"). Features
    outside every subspace score 0.
``"discriminative"``
    w_f = Σ_i π_i (μ_if − μ̄_f)² / (Σ_i)_ff with μ̄ = Σ_i π_i μ_i — a per-feature Fisher ratio of the class
    means' spread to the within-class variance of f under the HDDA covariances, (Σ_i)_ff =
    b_i + Σ_j (a_ij − b_i) q_ijf².

Bands come from a stratified bootstrap (rows resampled with replacement within each class, the whole
fit — dimension choice included — repeated per replicate, seeded); they are percentile bands of the
replicate scores. Caveat when n_i < p: a resample holds about 63% distinct rows, so its scatter has lower
rank and b_i comes out smaller, which inflates both measures; the band then measures ranking stability
rather than giving a calibrated interval around the point score.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from latentfs.core.base import BaseSelector
from latentfs.core.data import DataError, as_continuous, as_labels
from latentfs.core.options import as_rng
from latentfs.core.weights import FeatureWeights

__all__ = ["MEASURES", "HDDAWeights", "hdda_feature_weights", "subspace_weights"]


def _loading_energy(params: Any) -> list[np.ndarray]:
    """Σ_j (a_ij − b_i) q_ijf² for each class (p,), the signal part of diag Σ_i."""
    p = params.n_features
    out = []
    for q, a, b, d in zip(params.orientations, params.signal, params.noise, params.dims, strict=True):
        d = int(d)
        excess = np.maximum(a - (b if d < p else 0.0), 0.0)
        if d == 0:
            out.append(np.zeros(p))
        elif q is None:
            out.append(excess.copy())
        else:
            out.append((q**2) @ excess)
    return out


def signal_weight(params: Any) -> np.ndarray:
    """w_f = Σ_i π_i Σ_j (a_ij − b_i) q_ijf² (variance carried by f in the signal subspaces)."""
    return np.sum([w * e for w, e in zip(params.weights, _loading_energy(params), strict=True)], axis=0)


def discriminative_weight(params: Any) -> np.ndarray:
    """w_f = Σ_i π_i (μ_if − μ̄_f)² / (Σ_i)_ff, a per-feature Fisher ratio under the HDDA covariances."""
    p = params.n_features
    centre = params.weights @ params.means
    total = np.zeros(p)
    for w, mu, energy, b, d in zip(params.weights, params.means, _loading_energy(params), params.noise,
                                   params.dims, strict=True):
        var = energy + (b if int(d) < p else 0.0)
        total += w * (mu - centre) ** 2 / np.maximum(var, 1e-300)
    return total


#: Feature-weight measures: name -> f(HDDAParams) -> scores (p,).
MEASURES: dict[str, Callable[[Any], np.ndarray]] = {
    "signal": signal_weight,
    "discriminative": discriminative_weight,
}


def _measure(name: str) -> Callable[[Any], np.ndarray]:
    if name not in MEASURES:
        raise DataError(f"measure must be one of {sorted(MEASURES)}; got {name!r}.")
    return MEASURES[name]


def subspace_weights(fitted: Any, measure: str = "signal") -> FeatureWeights:
    """Feature weights of an already fitted :class:`~latentfs.inference.hdda.estimators.HDDA` or ``HDDC`` (no band).

    Examples
    --------
    >>> from latentfs.inference.hdda.estimators import HDDA
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 4)); X[:, 0] *= 10; y = np.repeat([0, 1], 30)
    >>> subspace_weights(HDDA("AkBkQkDk", n_dims=1).fit(X, y)).top(1)
    ['x0']
    """
    if not hasattr(fitted, "params_"):
        raise DataError(
            f"fitted must be a fitted HDDA or HDDC; got {type(fitted).__name__} without params_. Call fit first."
        )
    fn = _measure(measure)
    names = getattr(fitted, "feature_names_in_", None)
    return FeatureWeights(
        fn(fitted.params_), f"hdda.{measure}", feature_names=None if names is None else list(names),
        info={"measure": measure, "model": getattr(fitted, "model_", None), "dims": fitted.dims_.tolist()},
    )


def hdda_feature_weights(
    X: Any,
    y: Any,
    *,
    measure: str = "signal",
    n_bootstrap: int = 50,
    seed: int | np.random.Generator | None = None,
    **hdda_options: Any,
) -> FeatureWeights:
    """Fit :class:`~latentfs.inference.hdda.estimators.HDDA` on (X, y) and score features, with bootstrap draws.

    Parameters
    ----------
    X, y : the labelled data (NaN in X is an error).
    measure : {"signal", "discriminative"}
        See the module docstring.
    n_bootstrap : int, default 50
        Stratified bootstrap replicates (0 for none); each repeats the whole fit.
    seed : int or numpy Generator
    **hdda_options : passed to ``HDDA`` (``model``, ``n_dims``, ``threshold``…).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 5)); y = np.repeat([0, 1], 30); X[y == 1, 2] += 4
    >>> fw = hdda_feature_weights(X, y, measure="discriminative", n_bootstrap=10, seed=0, n_dims=1)
    >>> fw.top(1), fw.draws.shape
    (['x2'], (10, 5))
    """
    from latentfs.inference.hdda.estimators import HDDA

    fn = _measure(measure)
    if isinstance(n_bootstrap, bool) or not isinstance(n_bootstrap, (int, np.integer)) or n_bootstrap < 0:
        raise DataError(f"n_bootstrap must be a non-negative integer; got {n_bootstrap!r}.")
    data = as_continuous(X, name="X", missing="error")
    Xv = data.values
    codes, _ = as_labels(y, Xv.shape[0], name="y")
    clf = HDDA(**hdda_options).fit(data.values, codes)
    scores = fn(clf.params_)
    rng = as_rng(seed)
    members = [np.flatnonzero(codes == c) for c in range(codes.max() + 1)]
    draws = []
    for _ in range(int(n_bootstrap)):
        rows = np.concatenate([rng.choice(m, size=m.size, replace=True) for m in members])
        draws.append(fn(HDDA(**hdda_options).fit(Xv[rows], codes[rows]).params_))
    return FeatureWeights(
        scores, f"hdda.{measure}", feature_names=list(data.feature_names),
        draws=np.vstack(draws) if draws else None,
        info={"measure": measure, "model": clf.model_, "dims": clf.dims_.tolist(),
              "n_bootstrap": int(n_bootstrap)},
    )


class HDDAWeights(BaseSelector):
    """Selector: keep the features with the largest HDDA subspace weights (see :func:`hdda_feature_weights`).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 5)); y = np.repeat([0, 1], 30); X[y == 1, 3] += 4
    >>> sel = HDDAWeights(measure="discriminative", n_features_to_select=1, n_dims=1).fit(X, y)
    >>> sel.get_support().tolist()
    [False, False, False, True, False]
    """

    def __init__(
        self,
        model: Any = "AkjBkQkDk",
        *,
        measure: str = "signal",
        n_dims: Any = "cattell",
        threshold_dims: float = 0.2,
        n_bootstrap: int = 0,
        n_features_to_select: int | None = None,
        threshold: float | None = None,
        seed: int | None = None,
    ) -> None:
        self.model = model
        self.measure = measure
        self.n_dims = n_dims
        self.threshold_dims = threshold_dims
        self.n_bootstrap = n_bootstrap
        self.n_features_to_select = n_features_to_select
        self.threshold = threshold
        self.seed = seed

    def _fit(self, X: Any, y: Any) -> FeatureWeights:
        if y is None:
            raise DataError("y must be given: HDDAWeights is supervised. Pass class labels to fit(X, y).")
        return hdda_feature_weights(
            X, y, measure=self.measure, n_bootstrap=self.n_bootstrap, seed=self.seed, model=self.model,
            n_dims=self.n_dims, threshold=self.threshold_dims,
        )
