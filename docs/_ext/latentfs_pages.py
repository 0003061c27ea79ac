"""Pages of the reference generated at build time from the package itself, so that nothing is written twice.

* ``api/index.rst``: every public name (``latentfs.__all__`` and each subpackage's ``__all__``) in autosummary
  tables; autosummary then writes one page per name. A name a subpackage re-exports from elsewhere links to the
  page of the name it is, instead of a second page.
* ``families/<family>.md``: a page per model family (``latentfs.models.<family>``): its models, the estimators
  and feature weights of ``latentfs.inference.<family>``, and one section per engine with the option table of
  every registered ``(model, method)``.

An option table comes from the engine itself (:func:`engine_table`): a declarative spec's schema through
:func:`latentfs.core.pipeline.option_table`, or an entry function's keyword parameters (their annotation,
default and the first sentence of their description in the numpydoc ``Parameters`` section). An entry function
that becomes a spec changes its table's source here with no edit to the docs.

The generated folders are rewritten on every build and are not kept in version control (``docs/.gitignore``).
"""

from __future__ import annotations

import importlib
import inspect
import re
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

#: Subpackages whose ``__all__`` is public, in the order the reference shows them.
SUBPACKAGES = ("models", "core", "select", "subspace", "evaluate", "datasets", "plots", "testing", "inference")


def _first_sentence(text: str) -> str:
    """Text up to the first full stop or semicolon outside brackets (a table cell holds one line)."""
    text = " ".join(text.split())
    depth = 0
    for i, char in enumerate(text):
        depth += char in "([{"
        depth -= char in ")]}"
        if depth <= 0 and char in ".;" and text[i + 1 : i + 2] in (" ", ""):
            return text[: i + (char == ".")]
    return text


def _cell(text: str) -> str:
    """Text fit for one cell of a Markdown pipe table (reST roles such as :func:`x` become code)."""
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"`\1`", " ".join(str(text).split()))
    return text.replace("|", "\\|")


_TYPE_WORDS = re.compile(
    r"^(?:\s*(?:int|float|bool|str|None|or|tuple|list|dict|callable|sequence|array(?:-like)?|optional|of|"
    r"torch\.Generator|torch\.device|torch\.dtype|Generator|Posterior|matrix|ndarray|site|name|->|\{[^}]*\}|\([^)]*\)|[,|]))+\s*$"
)


def _parameter_meanings(func: Any) -> dict[str, str]:
    """``name -> first sentence of its description`` from a numpydoc ``Parameters`` section (names listed together,
    ``a, b : ...``, share a description; a header whose text after the colon is not a type is a description)."""
    from numpydoc.docscrape import NumpyDocString

    meanings: dict[str, str] = {}
    for param in NumpyDocString(inspect.getdoc(func) or "")["Parameters"]:
        header, body = param.type.strip(), " ".join(param.desc).strip()
        kind, _, rest = header.partition(";")  # "int or torch.Generator; each chain gets ..."
        if _TYPE_WORDS.match(kind):
            header = rest.strip()
        text = f"{header} {body}".strip()
        for name in param.name.split(","):
            meanings[name.strip().lstrip("*")] = _first_sentence(text)
    return meanings


def _annotation(param: inspect.Parameter) -> str:
    if param.annotation is inspect.Parameter.empty:
        return "any"
    ann = param.annotation
    return ann if isinstance(ann, str) else inspect.formatannotation(ann)


def engine_table(engine: Any) -> str:
    """The engine's options as a Markdown table (option, type, default, meaning)."""
    from latentfs.core import registry
    from latentfs.core.pipeline import option_table

    if registry.is_spec(engine):
        return option_table(engine)
    from latentfs.core.pipeline import SHARED

    # what the docstring says, else the shared option's one meaning (seed, progress, warn, ...)
    meanings = {name: opt.meaning for name, opt in SHARED.items()}
    for name, meaning in _parameter_meanings(engine).items():
        if not (name in meanings and meaning.lower().startswith("see ")):  # "see latentfs.fit": the shared meaning
            meanings[name] = meaning
    rows = ["| option | type | default | meaning |", "|---|---|---|---|"]
    for param in list(inspect.signature(engine).parameters.values())[2:]:  # after (model, data)
        if param.kind not in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            continue
        value = param.default
        if param.name == "seed":  # latentfs.fit applies the one seed rule before calling an entry function
            value = SHARED["seed"].default
        default = "(required)" if value is inspect.Parameter.empty else f"`{value!r}`"
        meaning = meanings.get(param.name, "")
        rows.append(f"| `{param.name}` | {_cell(_annotation(param))} | {_cell(default)} | {_cell(meaning)} |")
    return "\n".join(rows)


def engine_target(model: type, method: str) -> str:
    """The label of a ``(model, method)`` pair's option table (``engine-DirichletDCA-vb``)."""
    return f"engine-{model.__name__}-{method}"


def _family_title(family: str) -> str:
    doc = inspect.getdoc(importlib.import_module(f"latentfs.models.{family}")) or family
    first = doc.strip().splitlines()[0]
    first = re.split(r" declared as|: ", first)[0]
    return first.rstrip(". ")


def _public(module: Any) -> list[str]:
    return [n for n in getattr(module, "__all__", []) if not n.startswith("_")]


def _api_index(docs: Path) -> list[str]:
    """Write ``api/index.rst``; return the canonical names documented."""
    import latentfs

    canonical: dict[int, str] = {}
    lines = [
        "API reference",
        "=============",
        "",
        "Every public name of latentfs, by the module that exports it. The engines' options are on the pages of",
        "the :doc:`model families <../families/index>`.",
        "",
        ".. currentmodule:: latentfs",
        "",
        "``latentfs``",
        "------------",
        "",
        ".. autosummary::",
        "   :toctree: generated",
        "   :nosignatures:",
        "",
    ]
    for name in sorted(_public(latentfs), key=str.lower):
        if name == "__version__":
            continue
        canonical[id(getattr(latentfs, name))] = f"latentfs.{name}"
        lines.append(f"   {name}")
    lines += ["", ".. py:data:: __version__", "   :type: str", "",
              f"   The installed version of latentfs (``{latentfs.__version__}`` for this reference).", ""]
    for sub in SUBPACKAGES:
        module = importlib.import_module(f"latentfs.{sub}")
        names = _public(module)
        if not names:
            continue
        title = f"``latentfs.{sub}``"
        doc = (inspect.getdoc(module) or "").strip().split("\n\n")[0]
        lines += ["", title, "-" * len(title), "", doc, "", f".. currentmodule:: latentfs.{sub}", ""]
        own = [n for n in names if id(getattr(module, n)) not in canonical]
        again = [n for n in names if id(getattr(module, n)) in canonical]
        if own:
            lines += [".. autosummary::", "   :toctree: generated", "   :nosignatures:", ""]
            for name in sorted(own, key=str.lower):
                canonical[id(getattr(module, name))] = f"latentfs.{sub}.{name}"
                lines.append(f"   {name}")
            lines.append("")
        if again:
            refs = ", ".join(f"``{n}`` (:obj:`{canonical[id(getattr(module, n))]}`)" for n in sorted(again))
            lines += [f"Also exported here: {refs}.", ""]
    (docs / "api").mkdir(exist_ok=True)
    (docs / "api" / "index.rst").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return sorted(canonical.values())


def _family_page(family: str, pairs: list[tuple[type, str, Any]], seen: set[str]) -> str:
    import latentfs

    models = sorted({cls for cls, _, _ in pairs}, key=lambda c: c.__name__)
    tools = sorted(
        n
        for n in _public(latentfs)
        if getattr(getattr(latentfs, n), "__module__", "").startswith(f"latentfs.inference.{family}")
    )
    out = [f"# {_family_title(family)}", ""]
    out += ["```{eval-rst}", f".. automodule:: latentfs.models.{family}", "   :no-members:", "```", ""]
    out += ["## Models", "", "```{eval-rst}", ".. currentmodule:: latentfs", "", ".. autosummary::",
            "   :nosignatures:", ""]
    out += [f"   {cls.__name__}" for cls in models if getattr(latentfs, cls.__name__, None) is cls]
    out += ["```", ""]
    if tools:
        out += ["## Estimators and feature weights", "", "```{eval-rst}", ".. currentmodule:: latentfs", "",
                ".. autosummary::", "   :nosignatures:", ""]
        out += [f"   {n}" for n in tools]
        out += ["```", ""]
    out += ["## Engines", "",
            "Call an engine with `latentfs.fit(model, data, method=..., **options)`; the table under each engine lists "
            "its options (an unknown option is refused with the list of valid ones).", ""]
    by_engine: dict[int, list[tuple[type, str, Any]]] = defaultdict(list)
    for cls, method, engine in pairs:
        by_engine[id(engine)].append((cls, method, engine))
    groups = sorted(by_engine.values(), key=lambda g: (g[0][1], g[0][0].__name__))
    for group in groups:
        method, engine = group[0][1], group[0][2]
        names = ", ".join(f"`{cls.__name__}`" for cls, _, _ in group)
        out += [f"({engine_target(cls, m)})=" for cls, m, _ in group]
        out += [f"### `method=\"{method}\"`: {names}", ""]
        out += [engine_table(engine), ""]
        obj = type(engine) if hasattr(engine, "check_options") else engine
        qualname = f"{obj.__module__}.{obj.__qualname__}"
        directive = "autoclass" if inspect.isclass(obj) else "autofunction"
        out += ["```{eval-rst}", f".. {directive}:: {qualname}"]
        if qualname in seen:
            out.append("   :no-index:")
        seen.add(qualname)
        out += ["```", ""]
    return "\n".join(out)


def _families(docs: Path) -> dict[str, list[tuple[str, str]]]:
    """Write ``families/*.md``; return ``family -> [(model name, method)]``."""
    from latentfs.core import registry

    by_family: dict[str, list[tuple[type, str, Any]]] = defaultdict(list)
    for (cls, method), engine in registry.engines().items():
        parts = cls.__module__.split(".")
        family = parts[2] if parts[:2] == ["latentfs", "models"] and len(parts) > 2 else "other"
        by_family[family].append((cls, method, engine))
    folder = docs / "families"
    folder.mkdir(exist_ok=True)
    seen: set[str] = set()
    index = ["# Model families", "",
             "One page per family: its models, its estimators and feature weights, and every engine with its options.",
             "", "```{toctree}", ":maxdepth: 1", ""]
    for family in sorted(by_family):
        (folder / f"{family}.md").write_text(_family_page(family, by_family[family], seen), encoding="utf-8")
        index.append(family)
    index += ["```", ""]
    (folder / "index.md").write_text("\n".join(index), encoding="utf-8")
    return {f: sorted((c.__name__, m) for c, m, _ in pairs) for f, pairs in by_family.items()}


def write_pages(docs: Path) -> None:
    """(Re)write the generated pages under ``docs``."""
    for generated in ("api", "families"):
        shutil.rmtree(docs / generated, ignore_errors=True)
    _api_index(docs)
    _families(docs)


def _on_config_inited(app: Any, config: Any) -> None:
    write_pages(Path(app.srcdir))


def setup(app: Any) -> dict[str, Any]:
    # before Sphinx lists the source files, so that the pages are read, and autosummary writes their stubs
    app.connect("config-inited", _on_config_inited)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
