"""Factor scores E[z | y_o] of new or training rows under a fitted factor analysis, lazily for a dask array."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from latentfs.core.data import DataError
from latentfs.core.results import Posterior
from latentfs.inference.factor.data import row_shard_values
from latentfs.inference.factor.numerics import FAParams, factor_posterior, prepare_fa_data

__all__ = ["factor_scores"]


def _block_scores(block: Any, params: dict[str, np.ndarray]) -> np.ndarray:
    values = row_shard_values(block)
    data = prepare_fa_data(values, dtype=torch.float64, device="cpu", use_moments=False)
    p = FAParams(*(torch.as_tensor(params[k], dtype=torch.float64) for k in ("loadings", "noise_variance", "mean")))
    return factor_posterior(p, data)[1].numpy()


def factor_scores(result: Posterior, X: Any) -> Any:
    """E[z | y_o] for every row of ``X`` under a fitted factor analysis (Gruber & Weiss 2006, eq. 5).

    For a dask array the scores are a lazy dask array with ``X``'s row chunks (one task per chunk, nothing
    gathered); otherwise an ndarray (n_samples, n_factors). NaN entries of ``X`` are missing.

    Examples
    --------
    >>> import latentfs
    >>> from latentfs.models.factor import FactorAnalysis
    >>> fa = FactorAnalysis(1)
    >>> X = fa.simulate(50, loadings=[[1.0], [0.9], [0.8]], noise_variance=0.2, mean=0.0, seed=0)["data"]
    >>> factor_scores(latentfs.fit(fa, X, method="em"), X).shape
    (50, 1)
    """
    if not isinstance(result, Posterior) or result.model != "FactorAnalysis":
        raise DataError("result must be a FactorAnalysis fit (latentfs.fit(FactorAnalysis(q), X, method='em')).")
    params = {k: np.asarray(result.mean(k), dtype=np.float64) for k in ("loadings", "noise_variance", "mean")}
    d, q = params["loadings"].shape
    shape = getattr(X, "shape", None)
    if shape is not None and len(shape) == 2 and shape[1] != d:
        raise DataError(f"X must have {d} features (as the fit); got {X.shape[1]}.")
    from latentfs.core.shards import is_dask_array, row_shards

    if is_dask_array(X):
        row_shards(X)  # one column chunk, known chunk sizes
        return X.map_blocks(_block_scores, params, chunks=(X.chunks[0], (q,)), dtype=np.float64,
                            meta=np.empty((0, 0), dtype=np.float64))
    return _block_scores(X, params)
