"""sc.charts: charts that display offline, by themselves and composed, and change nothing
global; score bands named as scores."""

from __future__ import annotations

import builtins
import copy
import html
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


def texts(svg: str) -> list[str]:
    return [html.unescape(t) for t in re.findall(r"<text\b[^>]*>([^<]*)</text>", svg)]


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


# Score bands, not labels (issue 20, item 7).


def test_the_histogram_and_the_group_chart_name_score_bands_not_labels(scored):
    bands = ["< 0.4", "0.4–0.8", "≥ 0.8"]
    table = sc.score_table(scored, by="sc_variant_kind")
    for chart in (
        sc.charts.score_distribution_chart(scored),
        sc.charts.score_by_group_chart(table, by="sc_variant_kind"),
    ):
        spec = chart.to_json()
        assert not re.search("Consistent|Inconsistent|Contradictory", spec)
        shown = texts(charts._svg(chart))
        assert "score band" in shown and set(bands) <= set(shown)
        color = chart.to_dict()
        color = (color.get("layer") or [color])[0]["encoding"]["color"]
        assert color["scale"]["domain"] == bands
        label_colours = {charts.COLORS[k] for k in ("Consistent", "Slightly Inconsistent")}
        assert not set(color["scale"]["range"]) & (label_colours | {charts.COLORS["Contradictory"]})


def test_a_bin_across_a_band_edge_is_split_there():
    df = pl.DataFrame({"safety_consistency": [0.35, 0.39, 0.41, 0.79, 0.8, 1.0, None]})
    chart = sc.charts.score_distribution_chart(df, bins=3)
    bars = [
        (round(d["lower"], 3), round(d["upper"], 3), d["band"], d["rows"])
        for d in chart.data.values
    ]
    assert bars == [
        (0.0, 0.333, "< 0.4", 0),
        (0.333, 0.4, "< 0.4", 2),
        (0.4, 0.667, "0.4–0.8", 1),
        (0.667, 0.8, "0.4–0.8", 1),
        (0.8, 1.0, "≥ 0.8", 2),
    ]
    default = sc.charts.score_distribution_chart(df)  # ten bins: the edges are already there
    assert len(default.data.values) == 10 and sum(d["rows"] for d in default.data.values) == 6
