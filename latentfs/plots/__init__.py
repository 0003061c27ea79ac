"""The plots people expect from a fitted latent model, as static matplotlib figures.

* :func:`topic_summary` — the top words of every component of a topic model, with credible bands;
* :func:`to_pyldavis` — the arrays ``pyLDAvis.prepare`` takes (Sievert & Shirley 2014), from a result;
* :func:`trace` — the objective or a site's draws per chain, with a legend and the warm-up marked;
* :func:`mixture_ellipses` — a Gaussian mixture's components as ellipses over the data;
* :func:`loadings_heatmap` — factor loadings, with their bands when the result holds draws.

Every function returns the :class:`matplotlib.figure.Figure` it drew (nothing is shown or saved).
matplotlib is imported only inside the functions: install it with ``pip install 'latentfs[plot]'``.
"""

from latentfs.plots.factors import loadings_heatmap
from latentfs.plots.mixtures import mixture_ellipses
from latentfs.plots.topics import to_pyldavis, topic_summary
from latentfs.plots.traces import trace

__all__ = ["loadings_heatmap", "mixture_ellipses", "to_pyldavis", "topic_summary", "trace"]
