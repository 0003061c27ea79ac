"""The two exception types of latentfs's input checks."""

from __future__ import annotations

__all__ = ["DataError", "DataWarning"]


class DataError(ValueError):
    """Input that latentfs cannot use; the message says which argument, why, and what to do."""


class DataWarning(UserWarning):
    """Input that latentfs changed on the way in (for example, empty documents dropped)."""


# Their documented home is latentfs.core.data (re-exported there and as latentfs.DataError): tracebacks and
# doctests name them there, as they did before the option checks moved out of that module.
DataError.__module__ = "latentfs.core.data"
DataWarning.__module__ = "latentfs.core.data"
