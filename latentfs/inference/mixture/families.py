"""The mixture family's name for the emission families, which live in :mod:`latentfs.inference.emissions`
(shared with the hidden Markov models): every name importable from here before the move still is."""

from latentfs.inference import emissions as _emissions
from latentfs.inference.emissions import (  # noqa: F401  (re-exported: __all__ below is the emissions' own)
    COUNT_STATISTICS,
    COVARIANCE_M_STEPS,
    FULL_E_STEPS,
    CategoricalFamily,
    GaussianFamily,
    add_eps,
    e_step_variant,
    family_for,
    gram_rows,
    log_joint_components,
    responsibilities,
    scaled_reg,
)
from latentfs.inference.emissions.gaussian import (  # noqa: F401  (private names engines and tests import from here)
    _gaussian_log_diagonal,
    _gram_coefficients,
    _gram_e_step_numpy,
    _gram_e_step_torch,
)

__all__ = list(_emissions.__all__)
