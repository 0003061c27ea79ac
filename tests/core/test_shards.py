"""A corpus on disk as one file per row shard (issue 16 item 1): open_shards / save_shards, their DataErrors,
fits on the opened array equal to in-memory fits, and a fit whose peak memory is bounded by the shards in
flight rather than by the corpus."""

import json
import os
import subprocess
import sys
import textwrap

import dask  # the latentfs[dask] extra: installed wherever the tests run (no skip)
import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp

import latentfs
from latentfs.core.data import DataError
from latentfs.core.shards import open_shards, save_shards
from latentfs.models.dca import DirichletDCA

RTOL = 1e-6  # summation order only: observed differences are ~1e-14
OPTS = dict(method="vb", seed=3, max_iter=20, tol=0.0, warn=False, num_ll_draws=0)


@pytest.fixture(scope="module")
def corpus():
    sim = DirichletDCA(4, alpha=0.3).simulate(n_documents=230, n_features=40, doc_length=30, seed=1)
    return sp.csr_matrix(sim["counts"])


def _concentration(post):
    return np.asarray(post.fitted_params("topic_word")["concentration"], dtype=float)


def _max_rel(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-300)))


# ------------------------------------------------------------------ reading and writing


@pytest.mark.parametrize("fmt", ["npz", "npy"])
def test_save_then_open_round_trips_with_one_chunk_per_file(tmp_path, corpus, fmt):
    files = save_shards(corpus, tmp_path, rows_per_shard=60, format=fmt)
    assert [p.name for p in files] == [f"shard-00000{i}.{fmt}" for i in range(4)]
    X = open_shards(tmp_path)
    assert X.shape == corpus.shape
    assert X.chunks == ((60, 60, 60, 50), (40,))
    assert isinstance(X._meta, sp.csr_matrix if fmt == "npz" else np.ndarray)
    with dask.config.set(scheduler="synchronous"):
        back = X.compute()
    np.testing.assert_array_equal(back.toarray() if sp.issparse(back) else back, corpus.toarray())


def test_default_format_follows_the_input(tmp_path, corpus):
    assert save_shards(corpus, tmp_path / "s", 100)[0].suffix == ".npz"
    assert save_shards(corpus.toarray(), tmp_path / "d", 100)[0].suffix == ".npy"
    assert save_shards(da.from_array(corpus, chunks=(100, -1), asarray=False), tmp_path / "ds")[0].suffix == ".npz"


def test_files_are_stacked_in_natural_name_order_and_empty_files_skipped(tmp_path):
    blocks = {"part-10.npy": np.full((2, 3), 10.0), "part-2.npy": np.full((1, 3), 2.0),
              "part-9.npy": np.empty((0, 3)), "part-1.npy": np.full((3, 3), 1.0)}
    for name, block in blocks.items():
        np.save(tmp_path / name, block)
    (tmp_path / "README.txt").write_text("not a shard")
    (tmp_path / ".hidden.npy").write_bytes(b"ignored")
    X = open_shards(tmp_path)
    assert X.chunks[0] == (3, 1, 2)  # part-1, part-2, part-10 (part-9 has no rows)
    np.testing.assert_array_equal(X.compute(scheduler="synchronous")[:, 0], [1, 1, 1, 2, 10, 10])


def test_mixed_dtypes_promote(tmp_path):
    np.save(tmp_path / "a.npy", np.ones((2, 3), dtype=np.int32))
    np.save(tmp_path / "b.npy", np.full((2, 3), 0.5))
    X = open_shards(tmp_path)
    assert X.dtype == np.float64
    assert X.compute(scheduler="synchronous").dtype == np.float64


def test_dask_input_is_written_one_chunk_per_file_or_rechunked(tmp_path, corpus):
    X = da.from_array(corpus.toarray(), chunks=(80, 20))  # column chunks are joined: each file holds whole rows
    assert len(save_shards(X, tmp_path / "a")) == 3
    assert open_shards(tmp_path / "a").chunks == ((80, 80, 70), (40,))
    assert len(save_shards(X, tmp_path / "b", rows_per_shard=100, format="npz")) == 3
    got = open_shards(tmp_path / "b").compute(scheduler="synchronous")
    np.testing.assert_array_equal(got.toarray(), corpus.toarray())


def test_open_shards_data_errors(tmp_path, monkeypatch):
    with pytest.raises(DataError, match=r"path '.*nowhere' does not exist\. Pass a directory of \.npz"):
        open_shards(tmp_path / "nowhere")
    np.save(tmp_path / "one.npy", np.ones((2, 2)))
    with pytest.raises(DataError, match=r"is a file, not a directory of shards.*numpy\.load"):
        open_shards(tmp_path / "one.npy")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DataError, match=r"holds no \.npz or \.npy shard files \(it is empty\)"):
        open_shards(empty)
    (empty / "data.csv").write_text("1,2\n")
    with pytest.raises(DataError, match=r"holds no \.npz or \.npy shard files \(it holds 'data\.csv'\)"):
        open_shards(empty)
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    np.save(mixed / "a.npy", np.ones((2, 2)))
    sp.save_npz(mixed / "b.npz", sp.csr_matrix(np.ones((2, 2))))
    with pytest.raises(DataError, match=r"mixes shard formats: 1 \.npz file\(s\) \(e\.g\. 'b\.npz'\) and 1 \.npy.*one format"):
        open_shards(mixed)
    cols = tmp_path / "cols"
    cols.mkdir()
    sp.save_npz(cols / "a.npz", sp.csr_matrix(np.ones((2, 3))))
    sp.save_npz(cols / "b.npz", sp.csr_matrix(np.ones((4, 5))))
    with pytest.raises(DataError, match=r"disagree on the number of columns: 'a\.npz' has 3 .* 'b\.npz' has 5 \(shape \(4, 5\)\)"):
        open_shards(cols)
    flat = tmp_path / "flat"
    flat.mkdir()
    np.save(flat / "a.npy", np.ones(4))
    with pytest.raises(DataError, match=r"'a\.npy' holds a 1-D array of shape \(4,\); every shard must be 2-D"):
        open_shards(flat)
    text = tmp_path / "text"
    text.mkdir()
    np.save(text / "a.npy", np.array([["a", "b"]]))
    with pytest.raises(DataError, match=r"'a\.npy' holds values of dtype <U1; shards must be numeric"):
        open_shards(text)
    plain = tmp_path / "plain"
    plain.mkdir()
    np.savez(plain / "a.npz", x=np.ones(3))
    with pytest.raises(DataError, match=r"'a\.npz' is not a scipy\.sparse\.save_npz file: it holds the arrays \['x'\]"):
        open_shards(plain)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "a.npy").write_bytes(b"not numpy at all")
    with pytest.raises(DataError, match=r"'a\.npy' is not a readable \.npy array"):
        open_shards(broken)
    store = tmp_path / "store.zarr"
    store.mkdir()
    (store / ".zarray").write_text("{}")
    monkeypatch.setitem(sys.modules, "zarr", None)  # as where zarr is not installed (it is not in the test extra)
    with pytest.raises(DataError, match=r"is a zarr store but zarr is not installed.*pip install zarr"):
        open_shards(store)


def test_a_file_changed_after_opening_raises_in_its_task(tmp_path, corpus):
    save_shards(corpus, tmp_path, rows_per_shard=100)
    X = open_shards(tmp_path)
    sp.save_npz(tmp_path / "shard-000001.npz", sp.csr_matrix(corpus[:10]))
    with pytest.raises(DataError, match=r"'shard-000001\.npz' changed after open_shards read it: its shape is now "
                                        r"\(10, 40\), not \(100, 40\)\. Call open_shards again"):
        X.compute(scheduler="synchronous")


@pytest.mark.parametrize("fmt", ["npy", "npz"])
def test_a_file_cut_short_behind_an_intact_header_raises_in_its_task(tmp_path, corpus, fmt):
    # before: numpy's ValueError ("Failed to read all data for array") or zipfile's error from inside the task
    import zipfile

    save_shards(corpus, tmp_path, rows_per_shard=100, format=fmt)
    victim = tmp_path / f"shard-000001.{fmt}"
    if fmt == "npy":
        victim.write_bytes(victim.read_bytes()[:-40])
    else:  # the 'data' entry cut short (its header intact), in a zip that is itself sound
        with zipfile.ZipFile(victim) as z:
            members = {n: z.read(n) for n in z.namelist()}
        members["data.npy"] = members["data.npy"][:-40]
        with zipfile.ZipFile(victim, "w") as z:
            for name, data in members.items():
                z.writestr(name, data)
    X = open_shards(tmp_path)
    with pytest.raises(DataError, match=rf"shard file 'shard-000001\.{fmt}' cannot be read \(.+\)\. Rewrite it "
                                        r"\(numpy\.save, scipy\.sparse\.save_npz or save_shards\) and call "
                                        r"open_shards again\."):
        X.compute(scheduler="synchronous")


def test_save_shards_data_errors(tmp_path, corpus):
    with pytest.raises(DataError, match=r"rows_per_shard is required for an in-memory X.*rows_per_shard=10000"):
        save_shards(corpus, tmp_path / "a")
    with pytest.raises(DataError, match=r"rows_per_shard must be an integer ≥ 1; got 0"):
        save_shards(corpus, tmp_path / "a", 0)
    with pytest.raises(DataError, match=r"format must be one of \['npz', 'npy'\]; got 'csv'"):
        save_shards(corpus, tmp_path / "a", 10, format="csv")
    with pytest.raises(DataError, match=r"X must be 2-D .*got shape \(5,\)"):
        save_shards(np.ones(5), tmp_path / "a", 2)
    save_shards(corpus, tmp_path / "b", 100)
    with pytest.raises(DataError, match=r"already holds 3 shard file\(s\) \(e\.g\. 'shard-00000.\.npz'\); pass overwrite=True"):
        save_shards(corpus, tmp_path / "b", 50)
    assert len(save_shards(corpus, tmp_path / "b", 50, overwrite=True)) == 5
    assert open_shards(tmp_path / "b").chunks[0] == (50, 50, 50, 50, 30)


# ------------------------------------------------------------------ fitting a corpus on disk


@pytest.mark.parametrize(("fmt", "persist"), [("npz", False), ("npy", False), ("npz", True)])
def test_fit_on_shards_on_disk_equals_in_memory_fit(tmp_path, corpus, fmt, persist):
    ref = latentfs.fit(DirichletDCA(4), corpus, **OPTS)
    save_shards(corpus, tmp_path, rows_per_shard=60, format=fmt)
    with dask.config.set(scheduler="synchronous"):
        got = latentfs.fit(DirichletDCA(4), open_shards(tmp_path), persist=persist, **OPTS)
    assert got.diagnostics["shards"] == 4
    assert _max_rel(_concentration(got), _concentration(ref)) < RTOL
    assert _max_rel(got.trace, ref.trace) < RTOL
    doc = got.fitted_params("doc_topic")["concentration"]
    assert _max_rel(doc, ref.fitted_params("doc_topic")["concentration"]) < RTOL


# A fresh interpreter fits the sharded corpus with persist=False on the synchronous scheduler (one shard in
# flight) and reports its peak resident set size before the fit (after the imports) and after it.
_MEMORY_CHILD = textwrap.dedent("""
    import json, resource, sys
    import dask
    import latentfs
    from latentfs.core.shards import open_shards
    from latentfs.models.dca import DirichletDCA

    X = open_shards(sys.argv[1])
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale
    with dask.config.set(scheduler="synchronous"):
        post = latentfs.fit(DirichletDCA(5), X, method="vb", persist=False, max_iter=3, num_ll_draws=0,
                            warn=False, seed=0)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale
    print("RESULT " + json.dumps({"before": before, "after": after, "shards": post.diagnostics["shards"],
                                  "documents": len(post.coords["document"])}))
""")


def test_fit_of_a_corpus_on_disk_holds_far_less_than_the_corpus(tmp_path):
    # 64 dense float64 .npy shards of 125 × 5000 (5 MB each, 305 MiB in all), ~13% of cells non-zero, from a
    # 5-topic DCA-like mean (seeded). Why half the corpus is an honest bound: loading every shard at once (or
    # gathering them into one process) costs at least the corpus bytes, twice the bound; keeping every shard
    # validated in memory (persist=True) costs ~50 bytes per non-zero (CSR plus the engine's index tensors),
    # ~0.8-1.1× the corpus bytes at this density, so it fails too. One shard in flight costs ~5× its bytes,
    # plus ~35 MB of first-call overhead and what the allocator keeps. Measured on this corpus (bound 153 MiB):
    # persist=False +90 MiB; the same child with persist=True +340 MiB, so the test tells the two apart.
    rng = np.random.default_rng(20261125)
    n_shards, rows, cols = 64, 125, 5000
    topics = rng.dirichlet(np.full(cols, 0.05), size=5)
    corpus_bytes = 0
    for s in range(n_shards):
        mix = rng.dirichlet(np.full(5, 0.3), size=rows)
        block = rng.poisson(1300.0 * (mix @ topics)).astype(np.float64)
        np.save(tmp_path / f"shard-{s:04d}.npy", block)
        corpus_bytes += block.nbytes
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", _MEMORY_CHILD, str(tmp_path)], capture_output=True, text=True,
                          env=env, check=False)
    lines = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    out = json.loads(lines[-1][len("RESULT "):])
    assert out["shards"] == n_shards and out["documents"] == n_shards * rows
    increase = out["after"] - out["before"]
    assert increase < corpus_bytes / 2, f"peak RSS rose by {increase / 2**20:.0f} MiB for a {corpus_bytes / 2**20:.0f} MiB corpus"
