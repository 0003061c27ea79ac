"""The built reference site (docs/_build/html), read as files and opened in headless Chromium.

These tests are marked ``docs`` and deselected by default (pyproject's addopts): ``python -m pytest`` runs on a
machine with no built site and no browser. ``.ci/run`` builds the site with warnings as errors, installs Chromium
and its driver where they are missing (Debian's ``chromium`` and ``chromium-driver``), then runs
``python -m pytest -m docs tests/docs``: there a missing site, browser or driver fails the test, never skips it.
Build the site by hand as docs/conf.py says, or point ``LATENTFS_DOCS_HTML`` at a built copy.
"""

from __future__ import annotations

import functools
import http.server
import importlib.util
import inspect
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import latentfs
from latentfs.core import registry

pytestmark = pytest.mark.docs

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(os.environ.get("LATENTFS_DOCS_HTML", ROOT / "docs" / "_build" / "html"))
SUBPACKAGES = ("models", "core", "select", "subspace", "evaluate", "datasets", "plots", "testing", "inference")
FAMILY_PAGE = "families/dca.html"
TUTORIAL = "01_discrete_component_analysis"


def _page(relative: str) -> str:
    path = SITE / relative
    assert path.is_file(), f"{path} is missing: build the site first (docs/conf.py says how)"
    return path.read_text(encoding="utf-8")


@functools.cache
def _soup(relative: str):
    from bs4 import BeautifulSoup

    return BeautifulSoup(_page(relative), "html.parser")


def _run_module():
    spec = importlib.util.spec_from_file_location("tutorials_run", ROOT / "tutorials" / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ----------------------------------------------------------------------------- the pages, as files


def test_every_public_name_has_a_page():
    documented = {p.stem for p in (SITE / "api" / "generated").glob("*.html")}
    expected = {f"latentfs.{n}" for n in latentfs.__all__ if n != "__version__"}
    seen = {id(getattr(latentfs, n)) for n in latentfs.__all__}
    for sub in SUBPACKAGES:
        module = getattr(latentfs, sub)
        for name in module.__all__:
            obj = getattr(module, name)
            if id(obj) not in seen:  # a re-export links to the page of the name it is
                expected.add(f"latentfs.{sub}.{name}")
                seen.add(id(obj))
    missing = sorted(expected - documented)
    assert not missing, f"public names without a page: {missing}"


def test_every_registered_engine_option_is_in_its_family_table():
    from docutils.nodes import make_id

    checked = 0
    for (cls, method), engine in registry.engines().items():
        family = cls.__module__.split(".")[2]
        soup = _soup(f"families/{family}.html")
        anchor = soup.find(id=make_id(f"engine-{cls.__name__}-{method}"))  # the label docutils writes
        assert anchor is not None, f"no option table for ({cls.__name__}, {method!r}) on families/{family}.html"
        table = anchor.find_next("table")
        names = {row.find("td").get_text(strip=True) for row in table.find_all("tr") if row.find("td")}
        if registry.is_spec(engine):
            options = set(engine.options)
        else:
            params = list(inspect.signature(engine).parameters.values())[2:]
            options = {p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
        assert options and options <= names, (cls.__name__, method, sorted(options - names))
        checked += 1
    assert checked == len(registry.engines())


def _text(relative: str) -> str:
    return " ".join(_soup(relative).select_one("article").get_text(" ").split())


def test_the_readme_sections_are_included():
    quick = _text("quickstart.html")
    assert 'pip install -c constraints.txt -e ".[test]" && latentfs demo' in quick
    assert "One vocabulary" in quick and "Coming from another library" in quick
    assert "Imports point downward only" in _text("architecture.html")


def test_every_tutorial_is_rendered_with_its_figures():
    promised = _run_module().MIN_FIGURES
    sources = sorted((ROOT / "tutorials").glob("[0-9][0-9]*.py"))
    assert sources
    for source in sources:
        soup = _soup(f"tutorials/{source.stem}.html")
        images = [img for img in soup.select("article img") if "_images/" in img.get("src", "")]
        assert len(images) >= promised[source.stem], (source.stem, len(images))
        for img in images:
            assert (SITE / "tutorials" / img["src"]).resolve().is_file(), (source.stem, img["src"])


def test_a_tutorial_shows_its_fits_progress_bars_as_they_ended():
    # drawn from the saved widget state (docs/_ext/latentfs_widgets.py): a fit that converged before max_iter
    # ends full and green, at the iterations it took; no widget view is left for JavaScript that never loads
    soup = _soup(f"tutorials/{TUTORIAL}.html")
    bars = soup.select("article progress.lfs-progress")
    assert bars, "the tutorial's fits show no progress bar"
    for bar in bars:
        assert "lfs-progress-success" in bar["class"], bar
        assert float(bar["value"]) == float(bar["max"]) > 0, bar
    texts = [b.parent.get_text(" ", strip=True) for b in bars]
    assert all("100%" in t for t in texts), texts
    assert not soup.select('script[type="application/vnd.jupyter.widget-view+json"]')


def test_no_page_loads_anything_from_another_host():
    # a reader offline (or this CI) gets every script, style sheet and image from the site itself
    for page in ("index.html", FAMILY_PAGE, f"tutorials/{TUTORIAL}.html", "search.html"):
        soup = _soup(page)
        for tag, attr in (("script", "src"), ("link", "href"), ("img", "src")):
            for node in soup.find_all(tag):
                url = node.get(attr, "")
                if tag == "link" and "stylesheet" not in node.get("rel", []) and node.get("rel") != ["preload"]:
                    continue
                assert not url.startswith(("http:", "https:", "//")), (page, tag, url)


# ----------------------------------------------------------------------------- the pages, in a browser


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    assert (SITE / "index.html").is_file(), f"no site in {SITE}: build it first (docs/conf.py says how)"
    handler = functools.partial(_QuietHandler, directory=str(SITE))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    assert chromium and driver_path, (
        "headless Chromium and its driver are needed: apt-get install chromium chromium-driver (.ci/run does)"
    )
    os.environ.setdefault("SE_OFFLINE", "true")  # never let selenium look for a driver on the network
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def _console_errors(driver) -> list[str]:
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


@pytest.mark.parametrize("page", ["index.html", FAMILY_PAGE, f"tutorials/{TUTORIAL}.html"])
def test_pages_open_without_console_errors(server, browser, page):
    browser.get_log("browser")  # drop what earlier pages logged
    browser.get(f"{server}/{page}")
    assert browser.execute_script("return document.readyState") == "complete"
    assert browser.find_elements("css selector", "article h1"), f"{page} has no title"
    errors = _console_errors(browser)
    assert not errors, f"{page}: {errors}"


@pytest.mark.parametrize("query, page", [("check_engine", "latentfs.testing.check_engine"),
                                         ("DirichletDCA", "latentfs.DirichletDCA")])
def test_search_finds_a_known_name(server, browser, query, page):
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get_log("browser")
    browser.get(f"{server}/search.html?q={query}")

    def found(driver):
        links = driver.find_elements("css selector", "#search-results a")
        return [a.get_attribute("href") for a in links] or False

    hrefs = WebDriverWait(browser, 30).until(found)
    assert any(f"/{page}.html" in href for href in hrefs), hrefs
    assert not _console_errors(browser)


def test_every_figure_of_a_tutorial_loads(server, browser):
    browser.get(f"{server}/tutorials/{TUTORIAL}.html")
    sizes = browser.execute_script(
        "return Array.from(document.images).map(i => [i.currentSrc || i.src, i.complete, i.naturalWidth]);"
    )
    figures = [s for s in sizes if "_images/" in s[0]]
    assert len(figures) >= _run_module().MIN_FIGURES[TUTORIAL], sizes
    broken = [src for src, complete, width in sizes if not (complete and width > 0)]
    assert not broken, f"images that did not load: {broken}"


def test_a_tutorials_progress_bar_is_drawn(server, browser):
    # the static bar must be visible, not squeezed to nothing by its text in the output's flex row
    browser.get(f"{server}/tutorials/{TUTORIAL}.html")
    sizes = browser.execute_script(
        "return Array.from(document.querySelectorAll('progress.lfs-progress'))"
        ".map(p => [p.getBoundingClientRect().width, p.getBoundingClientRect().height]);"
    )
    assert sizes and all(w > 50 and h > 5 for w, h in sizes), sizes
    assert not _console_errors(browser)
