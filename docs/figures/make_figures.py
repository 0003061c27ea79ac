"""The figures of the plots API on offline data, written next to this file.

Run from the repository root: ``python docs/figures/make_figures.py`` (about a minute on one core).
"""

import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
from sklearn.datasets import load_wine  # noqa: E402

import latentfs  # noqa: E402
from latentfs import plots  # noqa: E402
from latentfs.datasets import load_rdataset, load_reuters  # noqa: E402


def _save(fig, name: str) -> None:
    fig = fig if hasattr(fig, "savefig") else fig.figure
    fig.savefig(Path(__file__).parent / name, dpi=80)
    plt.close("all")


def main() -> None:
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    corpus = load_reuters()
    vocab = list(corpus.vocabulary)
    vb = latentfs.fit(latentfs.DirichletDCA(8), corpus.counts, method="vb", feature_names=vocab, seed=0)
    _save(plots.topic_summary(vb, n_words=8, ncols=4), "topic_summary.png")
    gibbs = latentfs.fit(latentfs.DirichletDCA(8), corpus.counts, method="collapsed_gibbs", feature_names=vocab,
                         seed=0, warn=False)
    _save(plots.trace(gibbs), "trace.png")
    faithful = load_rdataset("datasets", "faithful")
    mix = latentfs.fit(latentfs.GaussianMixture(2), faithful, method="vb", seed=0)
    _save(plots.mixture_ellipses(mix, faithful.to_numpy()), "mixture_ellipses.png")
    wine = load_wine(as_frame=True).data
    wine = (wine - wine.mean()) / wine.std()
    model = latentfs.FactorAnalysis(2, loading_scale=1.0, noise_shape=2.0, noise_scale=1.0)
    fa = latentfs.fit(model, wine, method="gibbs", seed=0, warn=False)
    _save(plots.loadings_heatmap(fa), "loadings_heatmap.png")


if __name__ == "__main__":
    main()
