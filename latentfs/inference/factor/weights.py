"""Feature weights from factor analysis: communalities and loadings, with bands, and rotations.

* **Communality** of feature j: the share of its variance explained by the common factors,
  h_j² = Σ_k W_jk² / (Σ_k W_jk² + λ_j) (under the model of Titterington 2006, Var y_j = Σ_k W_jk² + λ_j).
  It is rotation-invariant, so Gibbs draws give a credible band with no alignment. ``kind`` chooses
  the proportion (default) or the common variance Σ_k W_jk² itself.
* **Loadings** on one factor, |W_jk| after a rotation for reporting. Per-draw rotations are each
  matched to the rotated point estimate by a signed permutation before bands are read.
* Bands come from the draws of a Gibbs :class:`~latentfs.core.results.Posterior`, or, for EM/MAP
  fits, from a nonparametric bootstrap (:func:`bootstrap_draws`: rows resampled, each refit started at
  the full-data estimate, loadings aligned to it by orthogonal Procrustes).

Rotations (orthomax family, Kaiser-normalised by default): ``varimax`` (Kaiser 1958, γ = 1),
``quartimax`` (γ = 0) and the oblique ``promax`` (Hendrickson & White 1964: varimax, then a
least-squares fit to the varimax loadings raised to ``power``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from latentfs.core.data import DataError, as_continuous
from latentfs.core.driver import chain_generators
from latentfs.core.registry import fit
from latentfs.core.results import Posterior
from latentfs.core.weights import FeatureWeights
from latentfs.inference.factor.gibbs import procrustes_rotation, signed_permutation

__all__ = [
    "orthomax",
    "varimax",
    "quartimax",
    "promax",
    "rotate",
    "bootstrap_draws",
    "communalities",
    "loading_weights",
]


def orthomax(
    loadings: Any, coefficient: float = 1.0, *, normalize: bool = True, max_iter: int = 500, tol: float = 1e-10
) -> tuple[np.ndarray, np.ndarray]:
    """Orthomax rotation: R maximising Σ_k [Σ_j L_jk⁴ − (γ/p)(Σ_j L_jk²)²], L = W R; returns (W R, R).

    ``coefficient`` is the family's γ (Harman 1976; MATLAB's ``rotatefactors`` calls it ``Coeff``): 1 gives
    varimax, 0 quartimax, q/2 equamax. It is not named ``gamma``, which the library keeps for the RBF width
    and the DCA concentration. ``normalize`` applies Kaiser's row normalisation (rows scaled to unit length
    while rotating).

    Examples
    --------
    >>> W = np.array([[0.8, 0.3], [0.7, 0.4], [0.3, 0.8], [0.2, 0.9]])
    >>> L, R = orthomax(W)
    >>> np.allclose(R @ R.T, np.eye(2)), np.allclose(L @ L.T, W @ W.T)
    (True, True)
    """
    A = np.asarray(loadings, dtype=np.float64)
    if A.ndim != 2:
        raise DataError(f"loadings must be 2-D (n_features, n_components); got shape {A.shape}.")
    p, k = A.shape
    if k == 1:
        return A.copy(), np.eye(1)
    norms = np.sqrt((A**2).sum(1, keepdims=True)) if normalize else np.ones((p, 1))
    norms = np.where(norms > 0, norms, 1.0)
    B = A / norms
    R = np.eye(k)
    # Kaiser's planar rotations: each pair of columns is turned by the angle that maximises the
    # criterion in closed form; sweeps repeat until no angle exceeds tol (monotone, no oscillation).
    for _ in range(max_iter):
        largest = 0.0
        for a in range(k - 1):
            for b in range(a + 1, k):
                phi = _orthomax_angle(B[:, a], B[:, b], coefficient)
                largest = max(largest, abs(phi))
                c, s_ = np.cos(phi), np.sin(phi)
                G = np.array([[c, -s_], [s_, c]])
                B[:, [a, b]] = B[:, [a, b]] @ G
                R[:, [a, b]] = R[:, [a, b]] @ G
        if largest < tol:
            break
    return A @ R, R


def _orthomax_angle(x: np.ndarray, y: np.ndarray, coefficient: float) -> float:
    """Angle φ maximising the orthomax criterion of the pair (x cos φ + y sin φ, −x sin φ + y cos φ)."""
    p = x.size
    u, v = x**2 - y**2, 2 * x * y
    A, B = u.sum(), v.sum()
    C, D = (u**2 - v**2).sum(), 2 * (u * v).sum()
    return 0.25 * float(np.arctan2(D - coefficient * 2 * A * B / p, C - coefficient * (A**2 - B**2) / p))


def varimax(loadings: Any, *, normalize: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Varimax rotation (Kaiser 1958): orthomax with γ = 1; returns (rotated loadings, rotation).

    Examples
    --------
    >>> simple = np.array([[1.0, 0.0], [0.9, 0.0], [0.0, 1.0], [0.0, 0.8]])
    >>> turn = np.array([[np.cos(0.5), -np.sin(0.5)], [np.sin(0.5), np.cos(0.5)]])
    >>> np.round(np.abs(varimax(simple @ turn)[0]), 6).tolist()
    [[1.0, 0.0], [0.9, 0.0], [0.0, 1.0], [0.0, 0.8]]
    """
    return orthomax(loadings, 1.0, normalize=normalize)


def quartimax(loadings: Any, *, normalize: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Quartimax rotation: orthomax with γ = 0; returns (rotated loadings, rotation).

    Examples
    --------
    >>> W = np.array([[0.8, 0.3], [0.7, 0.4], [0.3, 0.8]])
    >>> L, R = quartimax(W)
    >>> bool((L**4).sum() >= (W**4).sum() - 1e-12)
    True
    """
    return orthomax(loadings, 0.0, normalize=normalize)


def promax(loadings: Any, *, power: float = 4.0, normalize: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Promax (oblique) rotation, Hendrickson & White (1964); returns (pattern loadings, T).

    The pattern is W T; the factor correlation matrix is inv(Tᵗ T) (unit diagonal).

    Examples
    --------
    >>> W = np.array([[0.8, 0.3], [0.7, 0.4], [0.3, 0.8], [0.2, 0.9]])
    >>> P, T = promax(W)
    >>> np.allclose(np.diag(np.linalg.inv(T.T @ T)), 1.0)
    True
    """
    if power <= 1:
        raise DataError(f"power must be greater than 1 for promax; got {power}. The usual choice is 4.")
    V, R = varimax(loadings, normalize=normalize)
    if V.shape[1] == 1:
        return V, R
    norms = np.sqrt((V**2).sum(1, keepdims=True)) if normalize else np.ones((V.shape[0], 1))
    norms = np.where(norms > 0, norms, 1.0)
    Vn = V / norms
    target = Vn * np.abs(Vn) ** (power - 1)
    U = np.linalg.lstsq(Vn, target, rcond=None)[0]
    U = U @ np.diag(np.sqrt(np.diag(np.linalg.inv(U.T @ U))))
    return V @ U, R @ U


_ROTATIONS: dict[str, Any] = {
    "varimax": varimax,
    "quartimax": quartimax,
    "promax": promax,
    "none": lambda W, normalize=True: (np.asarray(W, dtype=np.float64).copy(), np.eye(np.shape(W)[1])),
}


def rotate(loadings: Any, method: str = "varimax", *, normalize: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Rotate loadings for reporting with ``method`` in {"varimax", "quartimax", "promax", "none"}.

    Examples
    --------
    >>> rotate(np.eye(3)[:, :2], "quartimax")[0].shape
    (3, 2)
    """
    if method not in _ROTATIONS:
        raise DataError(f"rotation must be one of {sorted(_ROTATIONS)}; got {method!r}.")
    return _ROTATIONS[method](loadings, normalize=normalize)


def bootstrap_draws(
    model: Any,
    X: Any,
    result: Posterior,
    *,
    n_boot: int = 50,
    seed: Any = 0,
    **fit_options: Any,
) -> dict[str, np.ndarray]:
    """Nonparametric bootstrap of an EM/MAP factor-analysis fit: ``loadings`` (B, d, q), ``noise_variance`` (B, d).

    Each replicate refits ``result.method`` on rows resampled with replacement, starting at the
    full-data estimate; its loadings are rotated onto the full-data loadings (orthogonal Procrustes),
    so bands on single loadings are meaningful.

    Examples
    --------
    >>> import latentfs
    >>> from latentfs.models.factor import FactorAnalysis
    >>> fa = FactorAnalysis(1)
    >>> X = fa.simulate(100, loadings=[[1.0], [0.9], [0.8]], noise_variance=0.2, mean=0.0, seed=0)["data"]
    >>> res = latentfs.fit(fa, X, method="em")
    >>> bootstrap_draws(fa, X, res, n_boot=3)["loadings"].shape
    (3, 3, 1)
    """
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 2:
        raise DataError(f"n_boot must be an integer ≥ 2; got {n_boot!r}.")
    if result.is_sampled:
        raise DataError("bootstrap_draws is for point fits (em, map); a Gibbs result already has draws.")
    values = as_continuous(X, missing="allow").values
    n = values.shape[0]
    W0, psi0, mu0 = (result.mean(s) for s in ("loadings", "noise_variance", "mean"))
    options = {"max_iter": 500, "tol": 1e-7, "warn": False, "progress": False, **fit_options}
    loads, noises = [], []
    for gen in chain_generators(seed, int(n_boot)):
        rng = np.random.default_rng(int(gen.initial_seed()))
        rows = rng.integers(0, n, size=n)
        Xb = values[rows]
        keep = ~np.all(np.isnan(Xb), axis=0)
        if not keep.all():
            continue  # a column with no observed entry in this replicate: skip the replicate
        rep = fit(model, Xb, method=result.method, init={"loadings": W0, "noise_variance": psi0, "mean": mu0},
                  regularization=1e-6, **options)
        W = rep.mean("loadings")
        loads.append(W @ procrustes_rotation(W, W0))
        noises.append(rep.mean("noise_variance"))
    return {"loadings": np.stack(loads), "noise_variance": np.stack(noises)}


def _point_and_draws(result: Posterior, bootstrap: dict[str, np.ndarray] | None) -> tuple[dict, dict | None]:
    point = {s: result.mean(s) for s in ("loadings", "noise_variance")}
    if result.is_sampled:
        draws = {s: result.samples(s).reshape((-1,) + point[s].shape) for s in point}
    elif bootstrap is not None:
        draws = {s: np.asarray(bootstrap[s]) for s in point}
    else:
        draws = None
    return point, draws


def _communality_proportion(W: np.ndarray, psi: np.ndarray) -> np.ndarray:
    common = (W**2).sum(-1)
    return common / (common + psi)


def _communality_common_variance(W: np.ndarray, psi: np.ndarray) -> np.ndarray:
    return (W**2).sum(-1)


_COMMUNALITY = {"proportion": _communality_proportion, "common_variance": _communality_common_variance}


def communalities(
    result: Posterior, *, kind: str = "proportion", bootstrap: dict[str, np.ndarray] | None = None
) -> FeatureWeights:
    """Communalities as :class:`FeatureWeights`, with draws from Gibbs or from ``bootstrap``.

    For a Gibbs result the score is the posterior mean of h_j² (not h_j² at the mean loadings).

    Examples
    --------
    >>> import latentfs
    >>> from latentfs.models.factor import FactorAnalysis
    >>> fa = FactorAnalysis(1)
    >>> X = fa.simulate(300, loadings=[[1.0], [0.5], [0.1]], noise_variance=0.25, mean=0.0, seed=0)["data"]
    >>> communalities(latentfs.fit(fa, X, method="em")).top(1)
    ['x0']
    """
    if kind not in _COMMUNALITY:
        raise DataError(f"kind must be one of {sorted(_COMMUNALITY)}; got {kind!r}.")
    fn = _COMMUNALITY[kind]
    point, draws = _point_and_draws(result, bootstrap)
    d = None if draws is None else fn(draws["loadings"], draws["noise_variance"])
    scores = d.mean(0) if result.is_sampled and d is not None else fn(point["loadings"], point["noise_variance"])
    return FeatureWeights(
        scores, f"factor.communality.{kind}", feature_names=result.coords.get("feature"), draws=d,
        info={"definition": "sum_k W_jk^2 / (sum_k W_jk^2 + noise_variance_j)" if kind == "proportion"
              else "sum_k W_jk^2", "source": "gibbs" if result.is_sampled else
              ("bootstrap" if bootstrap is not None else result.method)},
    )


def loading_weights(
    result: Posterior,
    factor: int | str,
    *,
    rotation: str = "varimax",
    bootstrap: dict[str, np.ndarray] | None = None,
    absolute: bool = True,
) -> FeatureWeights:
    """The absolute loading of each feature on one factor after ``rotation``, with draws from Gibbs or a bootstrap.

    The point loadings (posterior mean for Gibbs) are rotated; each draw is rotated the same way
    and then matched to the rotated point loadings by a signed permutation, so column ``factor``
    means the same factor in every draw. ``absolute=False`` keeps the sign.

    Examples
    --------
    >>> import latentfs
    >>> from latentfs.models.factor import FactorAnalysis
    >>> fa = FactorAnalysis(2)
    >>> W = [[1.0, 0.0], [0.9, 0.0], [0.0, 1.0], [0.0, 0.9], [0.5, 0.5]]
    >>> X = fa.simulate(500, loadings=W, noise_variance=0.1, mean=0.0, seed=0)["data"]
    >>> fw = loading_weights(latentfs.fit(fa, X, method="em"), 0)
    >>> sorted(fw.top(2)) in (['x0', 'x1'], ['x2', 'x3'])
    True
    """
    point, draws = _point_and_draws(result, bootstrap)
    q = point["loadings"].shape[1]
    names = result.coords.get("factor", [f"f{k}" for k in range(q)])
    if isinstance(factor, str):
        if factor not in names:
            raise DataError(f"factor must be one of {names} or an index below {q}; got {factor!r}.")
        factor = names.index(factor)
    if isinstance(factor, bool) or not isinstance(factor, (int, np.integer)) or not 0 <= factor < q:
        raise DataError(f"factor must be an index in [0, {q}) or a factor name; got {factor!r}.")
    rotated, T = rotate(point["loadings"], rotation)
    transform = (lambda x: np.abs(x)) if absolute else (lambda x: x)
    d = None
    if draws is not None:
        reps = []
        for W in draws["loadings"]:
            R = rotate(W, rotation)[0]
            reps.append((R @ signed_permutation(R, rotated))[:, factor])
        d = transform(np.stack(reps))
    return FeatureWeights(
        transform(rotated[:, factor]), f"factor.loading.{rotation}", feature_names=result.coords.get("feature"),
        draws=d, info={"factor": names[factor], "rotation": rotation, "absolute": absolute,
                       "rotation_matrix": T.tolist()},
    )
