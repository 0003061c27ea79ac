"""Reading a user's count file for the ``latentfs`` command (:mod:`latentfs.cli`).

CSV (header and index-column detection), Matrix Market ``.mtx``, scipy ``.npz`` and numpy ``.npy`` files, and
a ``--vocab`` file of feature names, read into a validated CountMatrix. Nothing is guessed silently: every
decision the reader makes (an index column taken as document names, a pattern matrix read as ones) is a note on
stderr, and every problem a :class:`~latentfs.core.data.DataError` naming the file or option and the remedy
(the command prints it as one line and exits with status 2).
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import warnings
from pathlib import Path
from typing import Any, NoReturn

__all__ = ["check_file", "fail", "handle_empty_documents", "note", "read_counts", "warn"]

NAME_BUDGET = 20_000_000  # rows + columns of a .mtx: a name each, ~70 bytes apiece
DENSE_BUDGET = 2 * 1024**3  # bytes of a dense .mtx/.npy read into memory


def note(message: str) -> None:
    print(f"latentfs: note: {message}", file=sys.stderr)


def warn(message: str) -> None:
    print(f"latentfs: warning: {message}", file=sys.stderr)


def fail(message: str) -> NoReturn:
    from latentfs.core.data import DataError

    raise DataError(message)




def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return text.strip() != ""


def _first_csv_row(path: Path) -> list[str]:
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            for row in csv.reader(handle):
                if row:
                    return row
    except UnicodeDecodeError:
        fail(f"{path}: not a UTF-8 text file, so not a CSV; save the counts as CSV (UTF-8), .mtx or .npz.")
    except csv.Error as exc:
        fail(f"{path}: could not be read as CSV ({exc}); check the quoting on the first line.")
    fail(f"{path} is empty; pass a CSV with one row per document (and a header row of feature names).")


def _header_mode(path: Path, first: list[str], header: str) -> bool:
    """True when the first CSV row is a header of feature names."""
    if header != "auto":
        return header == "yes"
    if any(not _is_number(f) for f in first[1:]):
        return True
    if first[0].strip() == "" and len(first) > 1:  # ",0,1,2": DataFrame.to_csv() of a frame with integer columns
        return True
    shown = ", ".join(first[:4]) + (", …" if len(first) > 4 else "")
    fail(
        f"{path}: the first row ({shown}) looks like a document, not a header of feature names. Pass "
        "--no-header if the file has no header row (features are then named w0, w1, … or by --vocab), or "
        "--header if that row is the header."
    )


def _check_unique_header(path: Path, first: list[str], has_index: bool) -> None:
    names = first[1:] if has_index else first
    offset = 1 if has_index else 0
    seen: dict[str, int] = {}
    for i, name in enumerate(names):
        if name in seen:
            fail(
                f"{path}: the header names column {name!r} twice (columns {seen[name] + offset} and {i + offset}); "
                "feature names must be unique. Rename one, or add the two columns together before fitting."
            )
        seen[name] = i


def _looks_like_row_index(column: Any) -> bool:
    import numpy as np

    values = column.to_numpy()
    if values.dtype.kind not in "iuf" or values.size < 3:
        return False
    if np.isnan(values.astype(float)).any():
        return False
    n = values.size
    return bool(np.array_equal(values, np.arange(n)) or np.array_equal(values, np.arange(1, n + 1)))


def _read_csv(path: Path, header: str, index_column: str, has_vocab: bool) -> tuple[Any, list[str] | None]:
    """A numeric DataFrame (columns = feature names when the file has a header) and the document names."""
    import pandas as pd

    first = _first_csv_row(path)
    has_header = _header_mode(path, first, header)
    if has_header and has_vocab:
        fail(f"--vocab: {path} already names its columns in its header row; drop --vocab, or pass "
              "--no-header if the first row is a document.")
    try:
        frame = pd.read_csv(path, header=0 if has_header else None, skipinitialspace=True)
    except pd.errors.EmptyDataError:
        fail(f"{path} holds no data; pass a CSV with one row per document.")
    except (pd.errors.ParserError, ValueError, UnicodeDecodeError) as exc:
        detail = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        fail(f"{path}: could not be read as CSV ({detail}). Every row needs the same number of fields.")
    if has_header:
        _check_unique_header(path, first, has_index=first[0].strip() == "")
    if frame.shape[0] == 0:
        fail(f"{path} has a header row but no documents; add one row of counts per document.")
    documents: list[str] | None = None
    if frame.shape[1] > 1 and index_column != "none":
        col = frame.columns[0]
        label = f"column {col!r}" if has_header else "the first column"
        reason = None
        if index_column == "first":
            reason = "as requested by --index-column first"
        elif has_header and str(col).startswith("Unnamed: 0"):
            reason = "it has no header (a row index written by DataFrame.to_csv())"
        elif frame[col].dtype.kind not in "biuf":
            reason = "it holds text (row names)"
        elif _looks_like_row_index(frame[col]):
            reason = f"it holds the row numbers {frame[col].iloc[0]}…{frame[col].iloc[-1]} (a row index)"
        if reason is not None:
            documents = [str(v) for v in frame[col]]
            frame = frame.drop(columns=col)
            keep = "; pass --index-column none to count it as a feature" if index_column == "auto" else ""
            note(f"{path}: {label} is used as document names, not as a feature, because {reason}{keep}.")
    text = [str(c) for c in frame.columns if frame[c].dtype.kind not in "biuf"]
    if text:
        col = text[0]
        where = f"column {col!r}" if has_header else f"column {col}"
        sample = frame[frame.columns[[str(c) for c in frame.columns].index(col)]].dropna()
        value = f" (e.g. {str(sample.iloc[0])!r})" if len(sample) else ""
        fail(
            f"{path}: {where} holds text{value}, and counts must be numbers; remove the column"
            f"{'s ' + str(text) if len(text) > 1 else ''} (labels belong in a separate file), or check the "
            "delimiter is a comma."
        )
    return frame, documents


def _read_mtx(path: Path) -> Any:
    import scipy.io
    import scipy.sparse as sp

    try:
        rows, cols, entries, fmt, field, _symmetry = scipy.io.mminfo(str(path))
    except (ValueError, OSError, IndexError, TypeError, UnicodeDecodeError, EOFError) as exc:
        fail(
            f"{path}: not a valid Matrix Market file ({_one_line(exc)}); it must start with a line like "
            "'%%MatrixMarket matrix coordinate integer general' (scipy.io.mmwrite writes one)."
        )
    if field == "complex":
        fail(f"{path}: holds complex numbers; counts must be real, non-negative integers.")
    if rows + cols > NAME_BUDGET:
        fail(
            f"{path}: declares a {rows} × {cols} matrix; latentfs keeps one name per row and column "
            f"({(rows + cols) * 70 / 1e9:.1f} GB of names for {entries} entries). Check the size line, or remove "
            "empty rows and columns before saving."
        )
    if fmt == "array" and rows * cols * 8 > DENSE_BUDGET:
        fail(f"{path}: a dense {rows} × {cols} matrix needs {rows * cols * 8 / 1e9:.1f} GB; save it in "
              "coordinate format (scipy.io.mmwrite of a sparse matrix).")
    try:
        matrix = scipy.io.mmread(str(path))
    except (ValueError, OSError, IndexError, TypeError, UnicodeDecodeError, EOFError, OverflowError) as exc:
        fail(f"{path}: not a valid Matrix Market file ({_one_line(exc)}); check the entries after the size "
              "line (one 'row column value' per line, 1-based).")
    if field == "pattern":
        note(f"{path}: a pattern matrix (no values); each listed entry is read as a count of 1.")
    return sp.coo_matrix(matrix) if sp.issparse(matrix) else matrix


def _read_npz_or_npy(path: Path) -> Any:
    import zipfile

    import numpy as np
    import scipy.sparse as sp

    errors = (ValueError, OSError, KeyError, EOFError, zipfile.BadZipFile)
    if path.suffix.lower() == ".npz":
        try:
            return sp.load_npz(path)
        except errors:
            pass
    try:
        loaded = np.load(path, allow_pickle=False)
    except errors as exc:
        kind = "an .npz archive" if path.suffix.lower() == ".npz" else "a .npy array"
        fail(f"{path}: not {kind} of counts ({_one_line(exc)}); write it with scipy.sparse.save_npz, "
              "numpy.savez or numpy.save.")
    if isinstance(loaded, np.ndarray):
        return loaded
    with loaded as archive:
        if len(archive.files) != 1:
            fail(f"{path}: holds arrays {archive.files}; save one array (numpy.savez(path, counts)) or a scipy "
                  "sparse matrix (scipy.sparse.save_npz).")
        try:
            return archive[archive.files[0]]
        except errors as exc:
            fail(f"{path}: array {archive.files[0]!r} cannot be read ({_one_line(exc)}).")


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:160]}" if text else type(exc).__name__


def _read_vocab(path: Path, n_features: int, source: Path) -> list[str]:
    _check_readable(path, "--vocab")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        fail(f"--vocab {path}: not UTF-8 text; save the vocabulary as UTF-8, one word per line.")
    words = text.splitlines()
    while words and words[-1].strip() == "":
        words.pop()
    words = [w.strip() for w in words]
    for i, w in enumerate(words):
        if w == "":
            fail(f"--vocab {path}: line {i + 1} is empty; every line must hold the name of one column.")
    if len(words) != n_features:
        fail(
            f"--vocab {path} has {len(words)} words but {source} has {n_features} columns; the vocabulary needs "
            "one word per line, one line per column, in column order."
        )
    seen: dict[str, int] = {}
    for i, w in enumerate(words):
        if w in seen:
            fail(f"--vocab {path}: {w!r} is on lines {seen[w] + 1} and {i + 1}; feature names must be unique. "
                  "Merge the two columns or rename one.")
        seen[w] = i
    return words


def _check_readable(path: Path, what: str) -> None:
    if not path.exists():
        fail(f"{what} {path} does not exist; check the path.")
    if path.is_dir():
        fail(f"{what} {path} is a folder, not a file; pass the path of the file inside it.")
    if not os.access(path, os.R_OK):
        fail(f"{what} {path} cannot be read (permission denied); check its permissions.")


def check_file(path: Path) -> None:
    if not path.exists():
        fail(f"FILE {path} does not exist; pass the path of a .mtx, .npz, .npy or .csv count matrix.")
    _check_readable(path, "FILE")


def read_counts(path: Path, args: argparse.Namespace) -> Any:
    """The validated CountMatrix of ``path`` (names from the header, index column or --vocab); ``path`` was
    checked by :func:`check_file` before the model was built."""
    from latentfs.core.data import as_counts

    suffix = path.suffix.lower()
    documents = None
    if suffix == ".csv":
        X, documents = _read_csv(path, args.header, args.index_column, args.vocab is not None)
    elif suffix == ".mtx":
        X = _read_mtx(path)
    elif suffix in (".npz", ".npy"):
        X = _read_npz_or_npy(path)
    else:
        fail(f"FILE must end in .mtx, .npz, .npy or .csv; got {path.name!r}. Save the counts in one of those "
              "formats.")
    if suffix != ".csv" and (args.header != "auto" or args.index_column != "auto"):
        fail(f"--header/--no-header/--index-column apply to CSV files only; {path.name} is not a CSV.")
    if getattr(X, "ndim", 2) != 2:
        fail(f"{path}: holds a {X.ndim}-D array of shape {X.shape}; it must be 2-D (documents × features).")
    features = None
    if args.vocab is not None:
        features = _read_vocab(Path(args.vocab), int(X.shape[1]), path)
    elif suffix != ".csv":
        note(f"{path}: no --vocab given; features are named w0…w{int(X.shape[1]) - 1}.")
    return as_counts(X, name=str(path), empty_documents="keep", feature_names=features, document_names=documents)


def handle_empty_documents(counts: Any, path: Path, rule: str) -> Any:
    import numpy as np

    from latentfs.core.data import DataWarning, as_counts

    empty = np.flatnonzero(np.diff(counts.csr.indptr) == 0)
    if empty.size == 0 or rule == "keep":
        return counts
    shown = ", ".join(counts.document_names[i] for i in empty[:5]) + (" …" if empty.size > 5 else "")
    if rule == "error":
        fail(
            f"{path} has {empty.size} document(s) with no counts ({shown}); remove them from the file, or pass "
            "--empty-documents drop to skip them, or --empty-documents keep to model them."
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        counts = as_counts(counts, name=str(path), empty_documents="drop")
    note(f"{path}: dropped {empty.size} document(s) with no counts ({shown}) as --empty-documents drop asks.")
    return counts
