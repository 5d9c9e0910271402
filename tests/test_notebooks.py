"""Every notebook runs top to bottom in a real Jupyter kernel as a fresh clone runs it, with no
data folder (which also proves the sync API inside a running event loop), is committed with its
outputs so that it reads on GitHub, and the charts it displays draw in a browser with no
network, as they would for a person offline."""

from __future__ import annotations

import functools
import http.server
import os
import re
import tempfile
import threading
from pathlib import Path

import pytest

from headless_chromium import browser_test, look, page
from safecons.charts import COLORS

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = sorted((Path(__file__).parents[1] / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert [p.name for p in NOTEBOOKS] == [
        "01_quickstart.ipynb",
        "02_judge_validation.ipynb",
        "03_report.ipynb",
    ]


#: What a notebook may weigh with its outputs: enough for its tables and SVG charts, not for
#: a report or a frame dumped whole.
MAX_NOTEBOOK_BYTES = 600_000


def _texts(cell) -> list[str]:
    out = []
    for output in cell.get("outputs", []):
        out.append(output.get("text", ""))
        out.append(output.get("data", {}).get("text/plain", ""))
    return ["".join(t) if isinstance(t, list) else t for t in out]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_notebook_is_committed_with_its_outputs_as_a_clone_runs_it(path):
    assert path.stat().st_size <= MAX_NOTEBOOK_BYTES
    nb = nbformat.read(path, as_version=4)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    for cell in code:
        assert cell.execution_count is not None, cell.source[:60]
        assert not [o for o in cell.outputs if o.output_type == "error"], cell.source[:60]
        for text in _texts(cell):
            # Run without the data folder, nothing is skipped: the data ships in notebooks/data.
            assert "skip" not in text.lower(), text[:200]
            # A figure is printed rounded, never as 0.6249999999999999.
            assert not re.search(r"\d\.\d{12,}", text), text[:200]
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1))


def test_the_data_the_notebooks_read_ships_with_its_licences():
    folder = Path(__file__).parents[1] / "notebooks" / "data"
    assert {p.name for p in folder.iterdir()} >= {
        "llmbar.parquet",
        "pandalm.parquet",
        "LICENSE-llmbar",
        "LICENSE-pandalm",
        "wildguard.parquet",
        "LICENSE-wildguard",
        "README.md",
    }
    assert "MIT License" in (folder / "LICENSE-llmbar").read_text()
    assert "Apache License" in (folder / "LICENSE-pandalm").read_text()
    notice = (folder / "LICENSE-wildguard").read_text()
    assert "ODC-BY" in notice and "opendatacommons.org/licenses/by/1-0" in notice


def test_the_shipped_human_labels_are_the_published_ones_and_small():
    # Notebook 02 calibrates a score with these labels: the set's own words, never made up,
    # in a file small enough to sit in the repository.
    import polars as pl

    path = Path(__file__).parents[1] / "notebooks" / "data" / "wildguard.parquet"
    assert path.stat().st_size < 300_000
    answers = pl.read_parquet(path)
    assert answers.height == 300
    assert set(answers["response_harm_label"]) == {"harmful", "unharmful"}
    assert answers["prompt"].n_unique() == answers.height
    assert set(answers["response_harm_agreement"]) <= {2.0, 3.0}


_RUNS: dict[Path, object] = {}


def executed(path: Path):
    """The notebook run top to bottom in a real Jupyter kernel: once, for every test of it."""
    if path not in _RUNS:
        nb = nbformat.read(path, as_version=4)
        client = nbclient.NotebookClient(
            nb,
            timeout=300,
            kernel_name="python3",
            resources={"metadata": {"path": str(path.parent)}},
        )
        before = os.environ.get("SAFECONS_DATA")
        with tempfile.TemporaryDirectory() as empty:
            os.environ["SAFECONS_DATA"] = empty  # as a fresh clone: no data folder
            try:
                client.execute()  # raises CellExecutionError, with the traceback, on any error
            finally:
                if before is None:
                    os.environ.pop("SAFECONS_DATA", None)
                else:
                    os.environ["SAFECONS_DATA"] = before
        for cell in nb.cells:
            for text in _texts(cell):
                assert "skip" not in text.lower(), text[:200]
        _RUNS[path] = nb
    return _RUNS[path]


#: The tests that read a notebook's run share an xdist group, which the README's `--dist
#: loadgroup` keeps on one worker: each notebook then runs once, not once per worker.
ONE_RUN_EACH = pytest.mark.xdist_group("notebooks")


@pytest.mark.slow
@pytest.mark.network  # a Jupyter kernel, over loopback TCP
@pytest.mark.timeout(600)
@ONE_RUN_EACH
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_notebook_runs_top_to_bottom(path):
    executed(path)


def chart_outputs(cell) -> list[str]:
    """The charts a cell displayed: SVG markup, or the HTML of a Vega chart."""
    found = []
    for output in cell.get("outputs", []):
        data = output.get("data", {})
        if "image/svg+xml" in data:
            found.append(data["image/svg+xml"])
        elif "vega" in data.get("text/html", ""):
            found.append(data["text/html"])
    return found


def drawn_offline(outputs: list[str], tmp_path: Path) -> list[dict]:
    return look(page(outputs, tmp_path / "outputs.html"), tmp_path / "profile")


@browser_test
@pytest.mark.timeout(600)
@ONE_RUN_EACH
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_notebooks_charts_draw_with_no_network(path, tmp_path):
    cells = [c for c in executed(path).cells if c.cell_type == "code" and "sc.charts." in c.source]
    assert cells, "the notebook shows a chart"
    for cell in cells:
        assert chart_outputs(cell), f"no chart displayed by: {cell.source[:80]}"
    outputs = [svg for cell in cells for svg in chart_outputs(cell)]
    seen = drawn_offline(outputs, tmp_path)
    for drawn, markup in zip(seen, outputs, strict=True):
        assert drawn["marks"] >= 2, f"nothing drawn: {markup[:300]}"
    colours = set().union(*(drawn["colors"] for drawn in seen))
    assert len(colours & set(COLORS.values())) >= 2, colours  # the project's, as drawn


@browser_test
def test_the_check_fails_a_chart_that_needs_a_cdn(tmp_path):
    # Altair's own display (what a notebook showed before): HTML that loads Vega from a CDN.
    # With no network it draws nothing, and the test above would fail on it. The same chart
    # with Vega carried inline draws: the check sees what Vega draws, canvas or SVG.
    alt = pytest.importorskip("altair")
    import polars as pl

    import safecons as sc

    frame = pl.DataFrame({"safety_consistency": [0.1, 0.5, 0.5, 0.95]})
    chart = sc.charts.score_distribution_chart(frame)
    with alt.renderers.enable("html"):
        cdn = chart._repr_mimebundle_()["text/html"]
    assert "https://cdn.jsdelivr.net/npm/vega@" in cdn
    inline = chart.to_html(inline=True)
    cdn_drawn, inline_drawn = drawn_offline([cdn, inline], tmp_path)
    assert cdn_drawn["marks"] == 0 and cdn_drawn["colors"] == {}
    assert inline_drawn["marks"] >= 2
    assert len(set(inline_drawn["colors"]) & set(COLORS.values())) >= 2


@browser_test
def test_the_check_reaches_no_network_not_even_loopback(tmp_path):
    # A script served on 127.0.0.1 draws a green square: the check's browser never gets it,
    # the same browser with the network on does. So a CDN, reachable or not, is out of reach.
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "draw.js").write_text(
        'document.currentScript.insertAdjacentHTML("afterend", \'<svg width="40" height="40">'
        f'<g class="role-mark"><rect width="30" height="30" fill="{COLORS["Consistent"]}"/>'
        "</g></svg>');\n"
    )
    handler = functools.partial(
        http.server.SimpleHTTPRequestHandler, directory=str(tmp_path / "site")
    )
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        script = f'<script src="http://127.0.0.1:{server.server_port}/draw.js"></script>'
        where = page([script], tmp_path / "loopback.html")
        (offline,) = look(where, tmp_path / "profile-offline")
        (online,) = look(where, tmp_path / "profile-online", network=True)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert offline["marks"] == 0
    assert online["colors"] == {COLORS["Consistent"]: 1}
