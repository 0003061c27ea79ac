"""The latentfs command: fit on a user's file, clear errors, and the demo's pieces."""

import numpy as np
import pandas as pd
import pytest
import scipy.io
import scipy.sparse as sp

import latentfs
from latentfs.cli import main


def _corpus():
    return latentfs.DirichletDCA(2, alpha=0.5).simulate(20, 8, doc_length=30, seed=0)["counts"]


def test_fit_reads_mtx_npz_and_csv_and_writes_a_loadable_result(tmp_path, capsys):
    X = _corpus()
    scipy.io.mmwrite(str(tmp_path / "c.mtx"), sp.csr_matrix(X))
    sp.save_npz(tmp_path / "c.npz", sp.csr_matrix(X))
    pd.DataFrame(X, columns=[f"word{j}" for j in range(8)]).to_csv(tmp_path / "c.csv", index=False)
    for name in ("c.mtx", "c.npz", "c.csv"):
        out = tmp_path / f"{name}.result.npz"
        assert main(["fit", str(tmp_path / name), "-k", "2", "--seed", "0", "--output", str(out), "--quiet"]) == 0
        result = latentfs.load(out)
        assert result.mean("topic_word").shape == (2, 8)
    assert latentfs.load(tmp_path / "c.csv.result.npz").coords["feature"][0] == "word0"
    assert "Wrote" in capsys.readouterr().out


def test_fit_with_gibbs_prints_weights(tmp_path, capsys):
    np.save(tmp_path / "c.npy", _corpus())
    sp.save_npz(tmp_path / "c.npz", sp.csr_matrix(_corpus()))
    code = main(["fit", str(tmp_path / "c.npz"), "-k", "2", "--method", "gibbs", "--iterations", "20", "--samples", "10",
                 "--output", str(tmp_path / "g.npz")])
    assert code == 0
    out = capsys.readouterr().out
    assert "Most important words overall" in out and "Top words per component" in out


def test_fit_reports_bad_input_as_an_error_message(tmp_path, capsys):
    pd.DataFrame([[1.5, 2.0], [0.0, 1.0]], columns=["a", "b"]).to_csv(tmp_path / "bad.csv", index=False)
    assert main(["fit", str(tmp_path / "bad.csv"), "-k", "1", "--quiet"]) == 2
    assert "non-negative integer counts; row 0 column 0 holds 1.5" in capsys.readouterr().err
    assert main(["fit", str(tmp_path / "missing.mtx"), "-k", "1"]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "x.txt").write_text("1 2")
    assert main(["fit", str(tmp_path / "x.txt"), "-k", "1"]) == 2
    assert "FILE must end in .mtx, .npz or .csv; got 'x.txt'" in capsys.readouterr().err


def test_demo_runs_end_to_end_and_writes_its_outputs(tmp_path, capsys):
    with pytest.warns(latentfs.ConvergenceWarning, match="did not converge in 30 iterations"):
        assert main(["demo", "--output", str(tmp_path), "--iterations", "30", "--components", "5"]) == 0
    out = capsys.readouterr().out
    assert "395 documents × 4258 words" in out
    for name in ("reuters_dca.nc", "reuters_dca.npz", "reuters_dca.png"):
        assert (tmp_path / name).stat().st_size > 0
    import arviz as az

    idata = az.from_netcdf(tmp_path / "reuters_dca.nc")
    assert idata.posterior["topic_word"].shape[2:] == (5, 4258)
    assert "pope" in set(idata.posterior.coords["feature"].values)
