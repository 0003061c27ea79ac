"""Converters to and from other libraries' model objects; each imports its library on first use.

* :mod:`latentfs.interop.gensim`: a fitted DirichletDCA (a :class:`~latentfs.core.results.Posterior` or a
  :class:`~latentfs.DCA` estimator) to gensim's ``LdaModel`` and back.
"""
