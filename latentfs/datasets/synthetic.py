"""Synthetic feature-selection problems of Wolf & Shashua (2005), reproduced from their descriptions.

Each function takes a numpy Generator (``latentfs.core.data.as_rng(seed)`` makes one) and returns ``(X, labels)``.
They are the planted problems of the Q-alpha tests and tutorial 05: Weston et al.'s linear and nonlinear
problems (relevant features first), §4.2's multi-class clusters, and §4.4's kernel "sessions" problem.
"""

from __future__ import annotations

import numpy as np

__all__ = ["multiclass", "sessions", "weston_linear", "weston_nonlinear"]


def weston_nonlinear(n, rng, d=52):
    """Weston et al. (2001) nonlinear problem as recalled in the digest: 2 relevant of 52 features,
    each class a mixture of two Gaussian clusters with zero class mean."""
    y = rng.choice([-1, 1], size=n)
    X = rng.normal(0, 20, size=(n, d))
    s = rng.random(n) < 0.5
    neg = np.where(s[:, None], [-0.75, -3.0], [0.75, 3.0])
    pos = np.where(s[:, None], [3.0, -3.0], [-3.0, 3.0])
    X[:, :2] = np.where((y == -1)[:, None], neg, pos) + rng.normal(size=(n, 2))
    return X, y



def weston_linear(n, rng, d=202):
    """Weston et al. (2001) linear problem: 6 relevant of 202 features."""
    y = rng.choice([-1, 1], size=n)
    X = rng.normal(0, 20, size=(n, d))
    first = rng.random(n) < 0.7
    for i in range(3):
        X[:, i] = np.where(first, y * rng.normal(i + 1, 1, n), rng.normal(0, 1, n))
        X[:, i + 3] = np.where(first, rng.normal(0, 1, n), y * rng.normal(i + 1, 1, n))
    return X, y



def multiclass(nc, rng, n_rel=5, n_irr=120, n_points=60):
    """§4.2: n_c clusters in 5 relevant coordinates, 120 permuted irrelevant ones."""
    lab = np.repeat(np.arange(nc), int(np.ceil(n_points / nc)))

    def block(dim):
        c = rng.uniform(-1, 1, size=(nc, dim))
        sd = np.sqrt(rng.uniform(0, 0.02, size=(nc, dim)))
        return c[lab] + sd[lab] * rng.normal(size=(lab.size, dim))

    irr = block(n_irr)
    irr = np.column_stack([rng.permutation(col) for col in irr.T])
    return np.hstack([block(n_rel), irr]), lab



def sessions(lam, rng, n=120, n_rel=12, n_irr=48, session=8, nc=3):
    """§4.4: hidden ±1 'sessions' of 8 samples destroy second-order structure."""
    lab = np.repeat(np.arange(nc), n // nc)

    def block(dim):
        c = rng.uniform(0, 1, size=(nc, dim))
        sd = np.sqrt(rng.uniform(lam, 2 * lam, size=(nc, dim)))
        return c[lab] + sd[lab] * rng.normal(size=(n, dim))

    irr = block(n_irr)
    X = np.hstack([block(n_rel), np.column_stack([rng.permutation(c) for c in irr.T])])
    signs = rng.choice([-1.0, 1.0], size=(n // session, X.shape[1]))
    return X * np.repeat(signs, session, axis=0)
