"""sc.charts: charts that display offline, by themselves and composed, and change nothing
global."""

from __future__ import annotations

import builtins
import copy
import pickle
import re

import polars as pl
import pytest

import safecons as sc
import safecons.charts as charts

alt = pytest.importorskip("altair")
vl_convert = pytest.importorskip("vl_convert")

SVG = "image/svg+xml"


@pytest.fixture(scope="module")
def scored(demo_run) -> pl.DataFrame:
    return demo_run.frame


# Display.


def test_a_chart_displays_as_an_svg_image_and_changes_nothing_global(scored):
    state = (alt.renderers.active, dict(alt.renderers.options), alt.theme.active)
    chart = sc.charts.score_distribution_chart(scored)
    bundle = chart._repr_mimebundle_()
    assert list(bundle) == [SVG] and bundle[SVG].startswith("<svg")
    assert "<script" not in bundle[SVG] and "http" not in re.sub(
        r'xmlns(:\w+)?="[^"]*"', "", bundle[SVG]
    )
    assert (alt.renderers.active, dict(alt.renderers.options), alt.theme.active) == state
    plain = alt.Chart(alt.Data(values=[{"x": 1}])).mark_point().encode(x="x:Q")
    assert "text/html" in plain._repr_mimebundle_()  # other Altair charts display as before
    assert isinstance(chart, alt.Chart) and repr(chart) == "alt.Chart(...)"


def test_a_renderer_the_user_picks_is_theirs(scored):
    chart = sc.charts.label_mix_chart(scored)
    with alt.renderers.enable("html"):  # the interactive chart, where a CDN can be reached
        bundle = chart._repr_mimebundle_()
    assert "cdn.jsdelivr.net" in bundle["text/html"] and SVG not in bundle
    with alt.renderers.enable("png"):
        bundle, _ = chart._repr_mimebundle_()  # Altair's image renderers add metadata
    assert list(bundle) == ["image/png"]
    assert list(chart._repr_mimebundle_()) == [SVG]  # and back, once the block is left


def test_composed_charts_keep_displaying_offline(scored):
    a = sc.charts.score_distribution_chart(scored)
    b = sc.charts.label_mix_chart(scored)
    plain = alt.Chart(alt.Data(values=[{"x": 1}])).mark_point().encode(x="x:Q")
    composed = {
        "a | b": (a | b, alt.HConcatChart),
        "a & b": (a & b, alt.VConcatChart),
        "a + a": (a + a, alt.LayerChart),
        "(a | b) | a": ((a | b) | a, alt.HConcatChart),
        "a | plain": (a | plain, alt.HConcatChart),
        "plain | a": (plain | a, alt.HConcatChart),  # a's class derives from plain's
        "plain & a": (plain & a, alt.VConcatChart),
        "offline(alt.hconcat(a, b))": (sc.charts.offline(alt.hconcat(a, b)), alt.HConcatChart),
        "offline(plain)": (sc.charts.offline(plain), alt.Chart),
        "a.properties(...)": (a.properties(width=200), alt.Chart),
        "a.interactive()": (a.interactive(), alt.Chart),
        "a.configure_axis(...)": (a.configure_axis(grid=False), alt.Chart),
        "a.facet(...)": (
            sc.charts.score_distribution_chart(scored).facet(row="band:N"),
            alt.FacetChart,
        ),
    }
    for name, (chart, cls) in composed.items():
        assert isinstance(chart, cls), name
        assert list(chart._repr_mimebundle_()) == [SVG], name
    # Side by side, each chart keeps its colours (Vega-Lite would merge the two scales).
    for chart in (a & b, a | b, plain | a):
        assert chart.to_dict()["resolve"] == {"scale": {"color": "independent"}}
    assert charts.COLORS["Consistent"] in charts._svg(a & b)
    # What Altair's own functions compose is a plain Altair chart, as documented.
    assert "text/html" in alt.hconcat(a, b)._repr_mimebundle_()
    assert "text/html" in plain._repr_mimebundle_()  # offline(plain) left plain as it was
    with pytest.raises(sc.InputError, match="expected an Altair chart"):
        sc.charts.offline({"mark": "bar"})


def test_the_chart_is_still_the_altair_chart(scored, tmp_path):
    chart = sc.charts.score_by_group_chart(
        sc.score_table(scored, by="sc_variant_kind"), by="sc_variant_kind"
    )
    spec = chart.to_dict()
    assert alt.LayerChart.from_dict(spec).to_dict() == spec
    for kept in (pickle.loads(pickle.dumps(chart)), copy.deepcopy(chart), copy.copy(chart)):
        assert kept.to_dict() == spec and list(kept._repr_mimebundle_()) == [SVG]
    chart.save(tmp_path / "chart.svg")
    chart.save(tmp_path / "chart.html", inline=True)  # interactive, and carries Vega itself
    assert (tmp_path / "chart.svg").read_text().startswith("<svg")
    page_text = (tmp_path / "chart.html").read_text()
    assert "cdn.jsdelivr" not in page_text and "vegaEmbed" in page_text


def test_without_vl_convert_a_chart_displays_as_altair_does(scored, monkeypatch):
    real = builtins.__import__

    def no_vl_convert(name, *args, **kwargs):
        if name == "vl_convert":
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_vl_convert)
    assert "text/html" in sc.charts.score_distribution_chart(scored)._repr_mimebundle_()
