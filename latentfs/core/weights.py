"""The one feature-weights type (DESIGN.md, contract 4).

Every latentfs method that scores features returns a :class:`FeatureWeights`: one score per feature,
higher meaning more important, optionally with draws of the score (posterior draws, bootstrap
replicates) from which a credible or confidence band is read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from latentfs.core.data import DataError, _generated_names

__all__ = ["Band", "FeatureWeights"]


@dataclass(frozen=True)
class FeatureWeights:
    """Scores of features, with an optional band from draws.

    Parameters
    ----------
    scores : array of shape (n_features,)
        Point scores; higher means more important.
    method : str
        What computed them (for example ``"dca.word_importance"``, ``"q_alpha"``).
    feature_names : sequence of str, optional
        Defaults to ``"x0"``, ``"x1"``, ….
    draws : array of shape (n_draws, n_features), optional
        Replicates of the scores (posterior draws, bootstrap); they give :meth:`band`. A single replicate
        (the scores of a point estimate) is dropped: it has no band.
    info : dict, optional
        Method-specific extras (definitions, parameters); JSON-friendly values.

    Examples
    --------
    >>> fw = FeatureWeights([0.1, 0.7, 0.3], method="demo", feature_names=["a", "b", "c"])
    >>> fw.top(2)
    ['b', 'c']
    >>> fw.support(threshold=0.2).tolist()
    [False, True, True]
    """

    scores: np.ndarray
    method: str
    feature_names: tuple[str, ...] = ()
    draws: np.ndarray | None = None
    info: dict[str, Any] = field(default_factory=dict)

    def __init__(
        self,
        scores: Any,
        method: str,
        feature_names: Sequence[str] | None = None,
        draws: Any = None,
        info: dict[str, Any] | None = None,
    ) -> None:
        s = np.asarray(scores, dtype=np.float64).copy()
        if s.ndim != 1:
            raise DataError(f"scores must be 1-D (one per feature); got shape {s.shape}.")
        if np.isnan(s).any():
            raise DataError(
                f"scores must not contain NaN; feature {int(np.flatnonzero(np.isnan(s))[0])} is NaN."
            )
        if feature_names is None:
            names = _generated_names("x", s.size)
        elif isinstance(feature_names, tuple) and set(map(type, feature_names)) <= {str}:
            names = feature_names  # validated data's names: no per-name copy (50,000 names took 16 ms)
        else:
            names = tuple(str(n) for n in feature_names)
        if len(names) != s.size:
            raise DataError(
                f"feature_names must have one name per score: got {len(names)} names for {s.size} scores."
            )
        d = None
        if draws is not None:
            d = np.asarray(draws, dtype=np.float64).copy()
            if d.ndim != 2 or d.shape[1] != s.size:
                raise DataError(
                    f"draws must have shape (n_draws, {s.size}); got {d.shape}. Stack the replicates by row."
                )
            if d.shape[0] < 2:
                # One replicate (a point estimate) gives no band: a point is never shown as a distribution.
                d = None
                info = {**(info or {}), "band": "none: the scores come from a point estimate"}
            else:
                d.setflags(write=False)
        s.setflags(write=False)
        object.__setattr__(self, "scores", s)
        object.__setattr__(self, "method", str(method))
        object.__setattr__(self, "feature_names", names)
        object.__setattr__(self, "draws", d)
        object.__setattr__(self, "info", dict(info or {}))

    @property
    def n_features(self) -> int:
        return int(self.scores.size)

    def ranking(self) -> np.ndarray:
        """Feature indices, most important first (ties keep the input order)."""
        return np.argsort(-self.scores, kind="stable")

    def top(self, k: int) -> list[str]:
        """Names of the ``k`` highest-scoring features, best first."""
        k = _check_k(k, self.n_features)
        return [self.feature_names[i] for i in self.ranking()[:k]]

    def support(self, k: int | None = None, *, threshold: float | None = None) -> np.ndarray:
        """Boolean mask of selected features: the top ``k``, or those with score ≥ ``threshold``."""
        if (k is None) == (threshold is None):
            raise DataError("support needs exactly one of k or threshold; got "
                            f"k={k!r}, threshold={threshold!r}.")
        mask = np.zeros(self.n_features, dtype=bool)
        if k is not None:
            mask[self.ranking()[: _check_k(k, self.n_features)]] = True
        else:
            mask[self.scores >= float(threshold)] = True  # type: ignore[arg-type]
        return mask

    def band(self, level: float = 0.9) -> Band:
        """Equal-tailed band of the scores from the draws, at the given coverage level.

        Returns a :class:`Band`: it unpacks as ``lower, upper = weights.band(0.9)`` (two arrays in feature
        order) and prints, or shows in a notebook, as a table with the feature names as its index;
        ``.to_frame()`` gives that table as a pandas DataFrame.
        """
        if self.draws is None:
            raise DataError(
                f"band needs draws, and the weights of {self.method!r} have none. Fit with a "
                "sampler or request bootstrap draws."
            )
        if not 0 < level < 1:
            raise DataError(f"level must lie in (0, 1); got {level}.")
        lo, hi = np.quantile(self.draws, [(1 - level) / 2, (1 + level) / 2], axis=0)
        return Band(lo, hi, level, self.feature_names)

    def to_frame(self, level: float = 0.9) -> Any:
        """A pandas DataFrame (feature, score, rank, and the band when draws exist), best first."""
        import pandas as pd

        order = self.ranking()
        cols: dict[str, Any] = {
            "feature": [self.feature_names[i] for i in order],
            "score": self.scores[order],
            "rank": np.arange(1, self.n_features + 1),
        }
        if self.draws is not None:
            lo, hi = self.band(level)
            cols["lower"] = lo[order]
            cols["upper"] = hi[order]
        return pd.DataFrame(cols)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly representation (used by save/load)."""
        return {
            "scores": self.scores.tolist(),
            "method": self.method,
            "feature_names": list(self.feature_names),
            "draws": None if self.draws is None else self.draws.tolist(),
            "info": self.info,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FeatureWeights:
        return cls(d["scores"], d["method"], d["feature_names"], d.get("draws"), d.get("info"))

    def __repr__(self) -> str:
        best = ", ".join(self.top(min(3, self.n_features)))
        band = f", {self.draws.shape[0]} draws" if self.draws is not None else ""
        return f"FeatureWeights(method={self.method!r}, n_features={self.n_features}{band}, top=[{best}])"

    def _repr_html_(self, top: int = 10, level: float = 0.9) -> str:
        """The weights as a notebook shows them: method, number of features, what the band comes from, and a
        table of the ``top`` features (rank, name, score, and the ``level`` band when there are draws). Every
        string is HTML-escaped: feature names come from users' files."""
        import html

        e = html.escape
        k = min(top, self.n_features)
        table = self.to_frame(level).head(k)  # best first, with the band's columns when there are draws
        banded = "lower" in table.columns
        if self.draws is not None:
            source = f"{level:.0%} band from {self.draws.shape[0]} draws"
            if "band" in self.info:
                source += f" ({self.info['band']})"
        else:
            source = str(self.info.get("band", "no band (no draws)"))
        head = "<tr><th>rank</th><th>feature</th><th>score</th>"
        head += f"<th>{level:.0%} band</th></tr>" if banded else "</tr>"
        rows = []
        for row in table.itertuples(index=False):
            band = f"<td>[{row.lower:.4g}, {row.upper:.4g}]</td>" if banded else ""
            rows.append(f"<tr><td>{row.rank}</td><td><code>{e(str(row.feature))}</code></td>"
                        f"<td>{row.score:.4g}</td>{band}</tr>")
        more = self.n_features - k
        rest = f"<p>… {more} more feature(s); <code>.to_frame()</code> lists them all.</p>" if more else ""
        return (
            '<div class="latentfs-feature-weights">'
            f"<p><b>FeatureWeights</b> by <code>{e(self.method)}</code>: {self.n_features} features; "
            f"{e(source)}</p>"
            f"<table><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>{rest}</div>"
        )


class Band(tuple):  # type: ignore[type-arg]
    """An equal-tailed band of feature scores: ``(lower, upper)`` with the feature names and the level.

    A tuple of two arrays, so ``lower, upper = weights.band(0.9)`` and ``band[0]`` mean what they always meant;
    its ``repr`` and its notebook display are a table with one row per feature (the feature names as the index,
    columns ``lower`` and ``upper``, the level in the header), and :meth:`to_frame` returns that table. A pandas
    DataFrame is not returned itself because unpacking one yields its column *names*: ``lo, hi = frame`` would
    silently bind two strings.

    Examples
    --------
    >>> draws = [[0.1, 0.9], [0.3, 0.7], [0.2, 0.8]]
    >>> band = FeatureWeights([0.2, 0.8], "demo", ["a", "b"], draws=draws).band(0.5)
    >>> lower, upper = band
    >>> band  # doctest: +NORMALIZE_WHITESPACE
    Band(level=0.5, n_features=2)
    50% band  lower  upper
    feature
    a          0.15   0.25
    b          0.75   0.85
    """

    level: float
    feature_names: tuple[str, ...]

    def __new__(cls, lower: Any, upper: Any, level: float, feature_names: Sequence[str]) -> Band:
        self = super().__new__(cls, (np.asarray(lower), np.asarray(upper)))
        self.level = float(level)
        self.feature_names = tuple(feature_names)
        return self

    def __getnewargs__(self) -> tuple[Any, ...]:  # type: ignore[override]
        return (self[0], self[1], self.level, self.feature_names)

    @property
    def lower(self) -> np.ndarray:
        """The lower end of each feature's band, in feature order."""
        return self[0]  # type: ignore[no-any-return]

    @property
    def upper(self) -> np.ndarray:
        """The upper end of each feature's band, in feature order."""
        return self[1]  # type: ignore[no-any-return]

    def to_frame(self) -> Any:
        """A pandas DataFrame: index ``feature`` (the names), columns ``lower`` and ``upper``; the level is in
        ``frame.attrs["level"]`` and names the columns' axis (``"90% band"``)."""
        import pandas as pd

        frame = pd.DataFrame(
            {"lower": self.lower, "upper": self.upper}, index=pd.Index(list(self.feature_names), name="feature")
        )
        frame.columns.name = f"{100 * self.level:g}% band"
        frame.attrs["level"] = self.level
        return frame

    def __repr__(self) -> str:
        return f"Band(level={self.level:g}, n_features={len(self.feature_names)})\n{self.to_frame()!r}"

    def _repr_html_(self) -> str:
        head = f"<p><b>Band</b>: {100 * self.level:g}%, equal-tailed, {len(self.feature_names)} features</p>"
        return head + str(self.to_frame()._repr_html_())


def _check_k(k: Any, n: int) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise DataError(f"k must be a positive integer; got {k!r}.")
    if k > n:
        raise DataError(f"k must be at most the number of features ({n}); got {k}. Choose a smaller k.")
    return int(k)
