"""latentfs's :class:`ConvergenceWarning`, a subclass of scikit-learn's, in a module of its own.

Being a subclass, it is silenced by whatever silences scikit-learn's
(``warnings.simplefilter("ignore", sklearn.exceptions.ConvergenceWarning)``, scikit-learn's ``ignore_warnings``,
a pytest ``filterwarnings`` entry). Importing ``sklearn.exceptions`` imports scikit-learn itself (its
``__init__`` loads ``sklearn.base``, scipy.stats and pandas: 0.7 s in a fresh process here), which many fits never
need (a DirichletDCA fit does not import scikit-learn). So this module is imported only when the class is
needed: :mod:`latentfs.core.driver` and the ``latentfs`` package give it out on first read (PEP 562), and code
that warns imports it at the point where it warns, not where it starts.
"""

from __future__ import annotations

from sklearn.exceptions import ConvergenceWarning as _SklearnConvergenceWarning

__all__ = ["ConvergenceWarning"]


class ConvergenceWarning(_SklearnConvergenceWarning):
    """A fit that has not converged: an optimiser stopped at ``max_iter`` before its tolerance was met, or a
    sampler's draws fail the R̂ / ESS rule (or mix labels, or sit in poorer modes); the message gives the remedy.

    A subclass of :class:`sklearn.exceptions.ConvergenceWarning` (and so of ``UserWarning``).

    Examples
    --------
    >>> import warnings
    >>> import sklearn.exceptions
    >>> import latentfs
    >>> issubclass(latentfs.ConvergenceWarning, sklearn.exceptions.ConvergenceWarning)
    True
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("error")
    ...     warnings.simplefilter("ignore", sklearn.exceptions.ConvergenceWarning)
    ...     warnings.warn("stopped at max_iter", latentfs.ConvergenceWarning)  # silenced, not raised
    """
