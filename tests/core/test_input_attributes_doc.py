"""The one description of ``n_features_in_`` / ``feature_names_in_`` (latentfs.core.base.document_input_attributes).

Exact tests: where the decorator puts the entries, its refusal, and that every selector and projection of
latentfs.select and latentfs.subspace documents both attributes in its rendered docstring.
"""

from __future__ import annotations

import inspect

import pytest
from sklearn.base import BaseEstimator

import latentfs.select
import latentfs.subspace
from latentfs.core.base import INPUT_ATTRIBUTES_DOC, document_input_attributes


def test_entries_end_the_attributes_section_at_its_indentation() -> None:
    @document_input_attributes
    class Toy:
        """A toy.

        Attributes
        ----------
        coef_ : ndarray
            The coefficients.

        Examples
        --------
        >>> 1
        1
        """

    lines = Toy.__doc__.split("\n")
    at = lines.index("        n_features_in_ : int")
    assert lines[at - 1] == "            The coefficients."
    assert lines[at + 1] == "        feature_names_in_ : ndarray of str"
    assert lines[at + 2] == "            Only when ``X`` in ``fit`` had string column names."
    assert lines[at + 3] == ""
    assert lines[at + 4] == "        Examples"


def test_a_last_attributes_section_gets_the_entries_at_its_end() -> None:
    @document_input_attributes
    class Toy:
        """A toy.

        Attributes
        ----------
        coef_ : ndarray
        """

    body = inspect.cleandoc(Toy.__doc__)
    assert body.endswith("coef_ : ndarray\n" + INPUT_ATTRIBUTES_DOC)


def test_a_docstring_without_attributes_is_refused() -> None:
    class Toy:
        """A toy with no sections."""

    with pytest.raises(TypeError, match="needs an 'Attributes' section in the docstring of Toy"):
        document_input_attributes(Toy)


def test_a_stripped_docstring_is_left_alone() -> None:
    class Toy:
        pass

    assert document_input_attributes(Toy) is Toy
    assert Toy.__doc__ is None


@pytest.mark.parametrize("module", [latentfs.select, latentfs.subspace], ids=lambda m: m.__name__)
def test_every_estimator_documents_its_input_attributes(module) -> None:
    estimators = [
        obj
        for obj in (getattr(module, name) for name in module.__all__)
        if inspect.isclass(obj) and issubclass(obj, BaseEstimator)
    ]
    assert len(estimators) >= 5
    for cls in estimators:
        assert INPUT_ATTRIBUTES_DOC.replace("\n", "\n    ") in cls.__doc__, cls.__name__
