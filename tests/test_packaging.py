"""What the distribution declares: the license (SPDX), type information (PEP 561), the console script and
``python -m latentfs``, and ``fit``'s return type. The wheel itself is built, installed non-editable and run by
.ci/run (step 4)."""

import importlib.metadata
import tomllib
import typing
from pathlib import Path

import latentfs
from latentfs.cli import main
from latentfs.core import registry
from latentfs.core.results import Posterior

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_license_is_an_spdx_expression_with_its_file():
    project = PYPROJECT["project"]
    assert project["license"] == "BSD-3-Clause"
    assert project["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("BSD 3-Clause License")
    assert "Copyright (c) 2026, the latentfs developers" in text
    assert "Neither the name of the copyright holder nor the names of its" in text  # the third clause
    # the SPDX form needs a setuptools that reads it (PEP 639: 77.0)
    assert PYPROJECT["build-system"]["requires"] == ["setuptools>=77"]


def test_classifiers_are_consistent_with_the_rest_of_the_metadata():
    classifiers = PYPROJECT["project"]["classifiers"]
    assert "Typing :: Typed" in classifiers
    # PEP 639: the license is said once, by the SPDX expression (License :: classifiers beside it are deprecated)
    assert not [c for c in classifiers if c.startswith("License ::")]
    minimum = PYPROJECT["project"]["requires-python"].removeprefix(">=")
    versions = [c.rsplit(" :: ", 1)[1] for c in classifiers if c.startswith("Programming Language :: Python :: 3.")]
    assert versions and min(versions, key=lambda v: tuple(map(int, v.split(".")))) == minimum


def test_type_information_ships_with_the_package():
    assert (Path(latentfs.__file__).parent / "py.typed").is_file()
    assert "py.typed" in PYPROJECT["tool"]["setuptools"]["package-data"]["latentfs"]


def test_fit_is_annotated_to_return_a_posterior():
    # the annotation names a class imported for type checkers only; resolve it as they do
    hints = typing.get_type_hints(registry.fit, localns={"Posterior": Posterior})
    assert hints["return"] is Posterior
    assert latentfs.fit is registry.fit


def test_console_script_runs_the_cli_main():
    scripts = importlib.metadata.entry_points(group="console_scripts", name="latentfs")
    assert [ep.value for ep in scripts] == ["latentfs.cli:main"]
    assert next(iter(scripts)).load() is main  # python -m latentfs: tests/test_cli.py runs every command so
