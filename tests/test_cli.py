"""The latentfs command, end to end in a new process (``python -m latentfs``, through the running interpreter, so
the suite passes when started as ``<venv>/bin/python -m pytest`` without the venv's ``bin/`` on PATH): reading a
user's file without silent corruption, one-line errors (exit status 2) naming the file or option and the remedy,
and the demo. The console script's entry point is checked in tests/test_packaging.py."""

import re
import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.io
import scipy.sparse as sp

import latentfs
from latentfs.cli import build_parser, main

N_DOCS, N_WORDS = 20, 8


def _corpus():
    return np.asarray(latentfs.DirichletDCA(2, alpha=0.5).simulate(N_DOCS, N_WORDS, doc_length=30, seed=0)["counts"])


def run(*args, cwd=None):
    """Run the command in a new process of this interpreter; returns (rc, stdout, stderr)."""
    done = subprocess.run([sys.executable, "-m", "latentfs", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=300)
    return done.returncode, done.stdout, done.stderr


def call(capsys, *args):
    """The same command in this process (for the many variants of one case; the new-process tests above
    each class cover process start-up and the entry point). Returns (rc, stdout, stderr)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", latentfs.ConvergenceWarning)  # short fits on purpose
        rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


def one_line_error(rc, err, pattern):
    """rc 2, no traceback, and exactly one 'error' line on stderr that matches ``pattern``."""
    assert rc == 2, err
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if ": error: " in line]
    assert len(errors) == 1, err
    assert re.search(pattern, errors[0]), errors[0]


FAST = ["-k", "2", "--iterations", "5", "--quiet"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    X = _corpus()
    words = [f"word{j}" for j in range(N_WORDS)]
    pd.DataFrame(X, columns=words).to_csv(d / "plain.csv", index=False)
    pd.DataFrame(X, columns=words).to_csv(d / "with_index.csv")  # to_csv's default: index column included
    pd.DataFrame(X, columns=words, index=[f"doc-{i}" for i in range(N_DOCS)]).to_csv(d / "row_names.csv",
                                                                                   index_label="doc")
    pd.DataFrame(X).to_csv(d / "no_header.csv", index=False, header=False)
    scipy.io.mmwrite(str(d / "c.mtx"), sp.csr_matrix(X))
    sp.save_npz(d / "c.npz", sp.csr_matrix(X))
    (d / "vocab.txt").write_text("\n".join(words) + "\n")
    (d / "short_vocab.txt").write_text("\n".join(words[:-1]) + "\n")
    (d / "dup_vocab.txt").write_text("\n".join(words[:-1] + ["word0"]) + "\n")
    return d


# --- what works, and what used to corrupt data silently ---------------------------------------------------


def test_version_and_help_text_on_every_option():
    rc, out, _ = run("--version")
    assert rc == 0 and out.strip() == f"latentfs {latentfs.__version__}"
    rc, out, _ = run("fit", "--help")
    assert rc == 0
    for option in ("--no-header", "--vocab", "--device", "--alpha", "--gamma", "--empty-documents", "--index-column"):
        assert option in out
    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command").choices
    for name, sub in subparsers.items():
        for action in sub._actions:
            assert action.help, f"latentfs {name} {action.option_strings or action.dest} has no help text"


def test_python_m_latentfs_is_the_command(tmp_path):
    # from a folder that is not the checkout, as a user with the package installed would run it
    rc, out, err = run("--help", cwd=tmp_path)
    assert rc == 0, err
    assert out.startswith("usage: latentfs [-h] [--version] COMMAND")  # the command's name, not __main__.py
    assert re.search(r"^\s+demo\s+fit DCA to the Reuters sample", out, re.M)
    assert re.search(r"^\s+fit\s+fit a DCA model to a count matrix file", out, re.M)
    rc, _, err = run("no-such-command", cwd=tmp_path)
    one_line_error(rc, err, r"^latentfs: error: argument COMMAND: invalid choice: 'no-such-command'")


def test_index_column_written_by_to_csv_is_not_fitted_as_a_word(files, tmp_path):
    # before: 'Unnamed: 0' was fitted as a word and became the top word of every component
    rc, _, err = run("fit", files / "with_index.csv", *FAST, "-o", tmp_path / "r")
    assert rc == 0, err
    assert re.search(r"note: .*with_index\.csv: column 'Unnamed: 0' is used as document names, not as a feature, "
                     r"because it has no header \(a row index written by DataFrame\.to_csv\(\)\); pass "
                     r"--index-column none", err)
    result = latentfs.load(tmp_path / "r.npz")
    assert result.coords["feature"] == [f"word{j}" for j in range(N_WORDS)]
    assert result.coords["document"][:2] == ["0", "1"]


def test_text_row_names_become_document_names(files, tmp_path, capsys):
    rc, _, err = call(capsys, "fit", files / "row_names.csv", *FAST, "-o", tmp_path / "r")
    assert rc == 0 and "because it holds text (row names)" in err
    assert latentfs.load(tmp_path / "r.npz").coords["document"][:2] == ["doc-0", "doc-1"]


def test_a_named_column_of_row_numbers_is_detected(tmp_path, capsys):
    X = _corpus()
    df = pd.DataFrame(X, columns=[f"w{j}" for j in range(N_WORDS)])
    df.insert(0, "id", np.arange(N_DOCS))
    df.to_csv(tmp_path / "ids.csv", index=False)
    rc, _, err = call(capsys, "fit", tmp_path / "ids.csv", *FAST, "-o", tmp_path / "r")
    assert rc == 0 and re.search(r"column 'id' is used as document names.*row numbers 0…19 \(a row index\)", err)
    assert len(latentfs.load(tmp_path / "r.npz").coords["feature"]) == N_WORDS


def test_a_csv_without_header_is_refused_unless_said_and_then_keeps_every_document(files, tmp_path):
    # before: the first document was silently taken as the header
    rc, _, err = run("fit", files / "no_header.csv", *FAST)
    one_line_error(rc, err, r"no_header\.csv: the first row \([\d.]+, [\d.]+, [\d.]+, [\d.]+, …\) looks like a document, not "
                            r"a header of feature names\. Pass --no-header .* or --header")
    rc, _, err = run("fit", files / "no_header.csv", *FAST, "--no-header", "--vocab", files / "vocab.txt",
                     "-o", tmp_path / "r")
    assert rc == 0, err
    result = latentfs.load(tmp_path / "r.npz")
    assert len(result.coords["document"]) == N_DOCS and result.coords["feature"][0] == "word0"


def test_vocab_names_the_features_of_mtx_and_npz(files, tmp_path, capsys):
    rc, _, err = run("fit", files / "c.mtx", *FAST, "--vocab", files / "vocab.txt", "-o", tmp_path / "m")
    assert rc == 0, err
    assert latentfs.load(tmp_path / "m.npz").coords["feature"] == [f"word{j}" for j in range(N_WORDS)]
    rc, _, err = call(capsys, "fit", files / "c.npz", *FAST, "--vocab", files / "vocab.txt", "-o", tmp_path / "z")
    assert rc == 0 and latentfs.load(tmp_path / "z.npz").coords["feature"][-1] == "word7"
    rc, _, err = call(capsys, "fit", files / "c.npz", *FAST, "-o", tmp_path / "nv")
    assert rc == 0 and re.search(r"note: .*c\.npz: no --vocab given; features are named w0…w7", err)


def test_engines_and_hyperparameters_are_options(files, tmp_path, capsys):
    rc, out, err = run("fit", files / "c.mtx", "--vocab", files / "vocab.txt", "-k", "2", "--method", "collapsed_gibbs",
                       "--alpha", "0.3", "--gamma", "0.2", "--iterations", "10", "--samples", "5", "-o", tmp_path / "g")
    assert rc == 0, err
    assert "Fitting DirichletDCA(2, alpha=0.3, gamma=0.2) with --method collapsed_gibbs to 20 documents" in out
    # The band says which engine it comes from, its units, and that 10 sweeps have not converged.
    assert re.search(r"Most important words overall \(saliency per word, probability units; 90% credible band "
                     r"from collapsed_gibbs draws; NOT CONVERGED: max R-hat [0-9.]+", out), out
    with pytest.warns(latentfs.ConvergenceWarning, match="did not converge in 5 iterations"):
        rc = main(["fit", str(files / "c.mtx"), "-k", "2", "--model", "gap", "--method", "nmf_kl", "--iterations", "5",
                   "-o", str(tmp_path / "n")])
    assert rc == 0 and "point estimate of nmf_kl, no band" in capsys.readouterr().out


def test_empty_documents_message_names_the_cli_option(tmp_path, capsys):
    X = _corpus()
    X[3] = 0
    pd.DataFrame(X, columns=[f"w{j}" for j in range(N_WORDS)]).to_csv(tmp_path / "e.csv", index=False)
    rc, _, err = run("fit", tmp_path / "e.csv", *FAST)
    one_line_error(rc, err, r"e\.csv has 1 document\(s\) with no counts \(3\); remove them from the file, or pass "
                            r"--empty-documents drop .* --empty-documents keep")
    assert "empty_documents=" not in err  # no Python keyword the command does not have
    rc, _, err = call(capsys, "fit", tmp_path / "e.csv", *FAST, "--empty-documents", "drop", "-o", tmp_path / "r")
    assert rc == 0 and re.search(r"dropped 1 document\(s\) with no counts \(3\)", err)
    assert len(latentfs.load(tmp_path / "r.npz").coords["document"]) == N_DOCS - 1


def test_large_k_for_the_data_is_warned_about(tmp_path):
    X = latentfs.DirichletDCA(3, alpha=0.5).simulate(200, 80, doc_length=20, seed=1)["counts"]
    sp.save_npz(tmp_path / "big.npz", sp.csr_matrix(np.asarray(X)))
    rc, _, err = run("fit", tmp_path / "big.npz", "-k", "60", "--iterations", "2", "--quiet", "-o", tmp_path / "r")
    assert rc == 0, err
    assert re.search(r"warning: -k 60 is large for 200 documents .* Try -k 40 or fewer", err)


# --- every bad input: one line, exit status 2 -------------------------------------------------------------


def test_output_path_is_checked_before_fitting(files):
    # before: the whole fit ran, then the save crashed with a traceback
    rc, out, err = run("fit", files / "plain.csv", "-k", "2", "-o", "/nonexistent/dir/x.npz")
    one_line_error(rc, err, r"--output /nonexistent/dir/x\.npz: the folder /nonexistent/dir does not exist; create it")
    assert "Fitting" not in out


@pytest.mark.parametrize(
    "content, pattern",
    [
        (b"", r"empty\.csv is empty; pass a CSV with one row per document"),
        (b"a,b,c\n", r"empty\.csv has a header row but no documents"),
        (b"a,b\n1,2\n3,4,5\n", r"empty\.csv: could not be read as CSV \(.*line 3.*\)\. Every row needs the same"),
        (b"\xff\xfe\x00\x81binary", r"empty\.csv: not a UTF-8 text file"),
        (b"a,label\n1,spam\n2,ham\n", r"empty\.csv: column 'label' holds text \(e\.g\. 'spam'\), and counts must be "
                                      r"numbers"),
        (b"a,b,a\n1,2,3\n", r"empty\.csv: the header names column 'a' twice \(columns 0 and 2\)"),
        (b"a,b\n1.5,2\n0,1\n", r"empty\.csv must hold non-negative integer counts; row 0 column 0 holds 1\.5"),
    ],
    ids=["empty", "header-only", "ragged", "binary", "text-column", "duplicate-header", "fractional"],
)
def test_bad_csv(tmp_path, capsys, content, pattern):
    (tmp_path / "empty.csv").write_bytes(content)
    # the empty file goes through the console script (no traceback from pandas); the others in process
    rc, _, err = run("fit", tmp_path / "empty.csv", *FAST) if not content else call(capsys, "fit", tmp_path / "empty.csv",
                                                                                       *FAST)
    one_line_error(rc, err, pattern)


@pytest.mark.parametrize(
    "content, pattern",
    [
        (b"this is not a matrix market file\n", r"bad\.mtx: not a valid Matrix Market file \(.*\); it must start"),
        (b"%%MatrixMarket matrix coordinate integer general\n3 3 3\n1 1 2\n",
         r"bad\.mtx: not a valid Matrix Market file \(.*\); check the entries"),
        (b"%%MatrixMarket matrix coordinate integer general\n100000000 100000000 2\n1 1 2\n2 2 1\n",
         r"bad\.mtx: declares a 100000000 × 100000000 matrix; latentfs keeps one name per row and column"),
    ],
    ids=["garbage", "truncated", "huge-declared"],
)
def test_bad_mtx(tmp_path, capsys, content, pattern):
    (tmp_path / "bad.mtx").write_bytes(content)
    garbage = content.startswith(b"this")
    rc, _, err = run("fit", tmp_path / "bad.mtx", *FAST) if garbage else call(capsys, "fit", tmp_path / "bad.mtx", *FAST)
    one_line_error(rc, err, pattern)


def test_unreadable_inputs(tmp_path, capsys):
    (tmp_path / "folder.csv").mkdir()
    one_line_error(*run("fit", tmp_path / "folder.csv", *FAST)[::2], r"folder\.csv is a folder, not a file")
    one_line_error(*call(capsys, "fit", tmp_path / "missing.mtx", *FAST)[::2], r"FILE .*missing\.mtx does not exist")
    (tmp_path / "x.txt").write_text("1 2")
    one_line_error(*call(capsys, "fit", tmp_path / "x.txt", *FAST)[::2],
                   r"FILE must end in \.mtx, \.npz, \.npy or \.csv; got 'x\.txt'")
    (tmp_path / "random.npz").write_bytes(bytes(range(256)) * 4)
    one_line_error(*call(capsys, "fit", tmp_path / "random.npz", *FAST)[::2],
                   r"random\.npz: not an \.npz archive of counts")


@pytest.mark.parametrize(
    "args, pattern",
    [
        (["--vocab", "short_vocab.txt"], r"--vocab .*short_vocab\.txt has 7 words but .*c\.mtx has 8 columns"),
        (["--vocab", "dup_vocab.txt"], r"--vocab .*dup_vocab\.txt: 'word0' is on lines 1 and 8; feature names must "
                                       r"be unique"),
        (["--vocab", "nowhere.txt"], r"--vocab .*nowhere\.txt does not exist"),
        (["--method", "nmf_kl"], r"--method nmf_kl is not available for --model dirichlet; choose one of \["),
        (["--alpha", "-1"], r"--alpha must be a number > 0; got -1\. Pass a positive number, e\.g\. --alpha 0\.1"),
        (["--beta", "1"], r"--beta is the Gamma-Poisson rate; it applies to --model gap only"),
        (["--seed", "-1"], r"--seed must be an int ≥ 0, .*; got -1\. Pass a non-negative integer"),
        (["--iterations", "0"], r"--iterations must be an integer ≥ 1; got 0"),
        (["--samples", "10"], r"--samples applies to the samplers \(collapsed_gibbs, gibbs, mh, nuts, "
                              r"partially_collapsed\); --method vb"),
        (["--device", "gpu0"], r"--device must be a torch device name such as 'cpu', 'cuda' or 'cuda:0'; got 'gpu0'"),
        (["--device", "meta"], r"--device must be a device that holds data; got 'meta'"),
        # a CPU build says CUDA is missing; a GPU machine says this engine runs on the CPU only
        (["--device", "cuda", "--method", "collapsed_gibbs"],
         r"--device (is 'cuda' but CUDA is not available here .*Pass --device cpu|cuda: --method collapsed_gibbs "
         r"runs on the CPU only)"),
        (["--no-header"], r"--header/--no-header/--index-column apply to CSV files only"),
        (["-k", "20"], r"-k 20 is more than the 8 features of .*c\.mtx: .*Choose -k 8 or fewer"),
    ],
)
def test_bad_options(files, capsys, args, pattern):
    args = [str(files / a) if a.endswith(".txt") else a for a in args]
    # the device case goes through the console script; the rest in process (same code after start-up)
    runner = run if "--device" in args and "cuda" in args else lambda *a: call(capsys, *a)
    rc, _, err = runner("fit", files / "c.mtx", "-k", "2", "--iterations", "5", "--quiet", *args)
    one_line_error(rc, err, pattern)


@pytest.mark.parametrize("method", ["mh", "partially_collapsed"])
def test_every_registered_sampler_takes_samples_and_chains(files, capsys, tmp_path, method):
    # the command line's list of samplers was written by hand and missed mh and partially_collapsed, which refused
    # --samples as "not a sampler"; which engine samples now comes from the registry
    out = tmp_path / f"{method}.npz"
    rc, _, err = call(capsys, "fit", files / "c.mtx", "-k", "2", "--iterations", "5", "--samples", "4", "--chains",
                      "2", "--quiet", "--method", method, "--output", out)
    assert rc == 0, err
    post = latentfs.Posterior.load(out)
    assert post.is_sampled and post.samples("topic_word").shape[:2] == (2, 4)


def test_argparse_errors_are_one_line_too(files, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["fit", str(files / "c.mtx"), "-k", "zero"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1
    assert re.search(r"latentfs fit: error: argument --components/-k: invalid int value: 'zero'; see 'latentfs fit "
                     r"--help'", err)


# --- in-process pieces ------------------------------------------------------------------------------------


def test_main_reads_every_format_in_process(files, tmp_path, capsys):
    for name in ("c.mtx", "c.npz", "plain.csv"):
        out = tmp_path / f"{name}.result"
        rc, stdout, _ = call(capsys, "fit", files / name, *FAST, "--output", out)
        assert rc == 0 and "Wrote" in stdout
        assert latentfs.load(out).mean("topic_word").shape == (2, N_WORDS)
    assert latentfs.load(tmp_path / "plain.csv.result").coords["feature"][0] == "word0"


def test_demo_output_that_is_a_file_is_one_line_before_anything_is_loaded(tmp_path, capsys):
    # before: FileExistsError with a traceback from Path.mkdir (found by scripts/hostile_campaign.py --only cli)
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    for output in (blocker, blocker / "inside"):
        rc, out, err = call(capsys, "demo", "--output", output, "--iterations", "2")
        one_line_error(rc, err, rf"--output {re.escape(str(output))}: {re.escape(str(blocker))} is a file, not a "
                                r"folder; choose another path")
        assert "Reuters" not in out


def test_demo_runs_end_to_end_and_writes_its_outputs(tmp_path, capsys):
    with pytest.warns(latentfs.ConvergenceWarning, match="did not converge in 30 iterations"):
        assert main(["demo", "--output", str(tmp_path), "--iterations", "30", "--components", "5"]) == 0
    out = capsys.readouterr().out
    assert "395 documents × 4258 words" in out
    # The demo prints the objective VB maximises, which rises every cycle (issue 31: it used to plot a falling one
    # while γ was learned by an update that did not ascend it); γ is the model's, not learned, by default.
    assert "VB objective: document bounds + Σ γ log θ, nats: " in out and "(it rose every cycle;" in out
    assert "learned γ" not in out
    # The demo names the units of its weights and the engine its bands come from (VB: variational, narrow).
    assert "saliency per word, probability units; 90% band of the vb variational posterior" in out
    for name in ("reuters_dca.nc", "reuters_dca.npz", "reuters_dca.png"):
        assert (tmp_path / name).stat().st_size > 0
    import arviz as az

    idata = az.from_netcdf(tmp_path / "reuters_dca.nc")
    # a VB result is exported as its variational parameters, not as draws (issue 30: the .nc was 75 MB)
    assert idata.variational["topic_word.concentration"].shape == (5, 4258) and "posterior" not in idata.groups()
    assert (tmp_path / "reuters_dca.nc").stat().st_size <= 2 * (tmp_path / "reuters_dca.npz").stat().st_size
    assert "pope" in set(idata.variational.coords["feature"].values)



def test_demo_with_gibbs_marks_unconverged_bands_in_its_text_and_its_figure(tmp_path, capsys, monkeypatch):
    # issue 31 item 2: the PNG said "90% credible band" beside a warning of R-hat 2.2; the bands of chains in
    # different modes are marked on every output, and the demo says why more warm-up would not help
    import matplotlib.axes

    labels: list[str] = []
    original = matplotlib.axes.Axes.set_xlabel
    monkeypatch.setattr(matplotlib.axes.Axes, "set_xlabel",
                        lambda self, text, *a, **k: (labels.append(str(text)), original(self, text, *a, **k))[1])
    with pytest.warns(latentfs.ConvergenceWarning, match="site 'topic_word' has not converged"):
        assert main(["demo", "--method", "gibbs", "--output", str(tmp_path), "--iterations", "20",
                     "--components", "5"]) == 0
    out = capsys.readouterr().out
    assert "The chains disagree" in out
    assert "90% credible band from gibbs draws; NOT CONVERGED: max R-hat" in out
    assert any(label.startswith("saliency (90% credible band; NOT CONVERGED (max R-hat") for label in labels)
