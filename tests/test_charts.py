"""sc.charts: charts that display offline, name score bands as scores, and show every text whole
and apart from the others, in a browser too."""

from __future__ import annotations

import builtins
import copy
import html
import importlib
import itertools
import pickle
import re

import polars as pl
import pytest

import safecons as sc
import safecons.charts as charts
import safecons.charts._layout as chart_layout
from headless_chromium import browser_test, look, page

alt = pytest.importorskip("altair")
vl_convert = pytest.importorskip("vl_convert")

SVG = "image/svg+xml"
LONG = "gptfuzz_harmful_base_of_a_long_family"  # longer than Vega's 180-pixel axis label limit


@pytest.fixture(scope="module")
def scored(demo_run) -> pl.DataFrame:
    return demo_run.frame


def every_chart(scored: pl.DataFrame) -> dict[str, object]:
    """One of each chart, with the texts Vega-Lite used to cut: a label of the legend, long
    group names on axes and in a legend, and an axis title beside its labels."""
    judges = ["gpt-4-with-a-long-judge-name", "palm"]
    pairs = pl.DataFrame(
        {
            "judge": judges,
            "consistent": [30, 20],
            "primacy": [5, 10],
            "recency": [3, 8],
            "fairness": [-0.1, 0.3],
        }
    )
    flips = pl.DataFrame(
        {
            "judge": [judges[0]] * 3 + [judges[1]] * 3,
            "bin": [0, 1, 2] * 2,
            "lower": [0.0, 10.0, 20.0] * 2,
            "upper": [10.0, 20.0, 30.0] * 2,
            "flip_rate": [0.3, 0.2, 0.1, 0.4, 0.1, 0.05],
            "n_pairs": [10] * 6,
        }
    )
    agreement = pl.DataFrame(
        {
            "family": ["benign_base", LONG, "hand_written"],
            "agreement_s1": [0.97, 0.64, 0.47],
            "agreement_s2": [0.98, 0.69, 0.82],
            "n_s1": [189, 72, 70],
        }
    )
    # A comparison added by hand to the labels alone: the jury's columns, which would no
    # longer match them, are dropped (a frame of one judge, as an older safecons wrote).
    labelled = scored.with_columns(
        sc_labels=pl.concat_list(pl.col("sc_labels"), pl.lit(["Slightly Inconsistent"]))
    ).drop("sc_jurors", "sc_juror_labels", "sc_juror_scores", "sc_swap_labels")
    by_kind = sc.score_table(scored, by="sc_variant_kind")
    family = pl.when(pl.col("sc_variant_kind") == "dpi").then(pl.lit(LONG))
    postures = sc.posture_flips(
        scored.with_columns(family.otherwise(pl.col("sc_variant_kind")).alias("family")),
        by="family",
    )
    return {
        "distribution": sc.charts.score_distribution_chart(scored),
        "by group": sc.charts.score_by_group_chart(by_kind, by="sc_variant_kind"),
        "label mix": sc.charts.label_mix_chart(labelled, by="sc_variant_kind"),
        "position": sc.charts.position_chart(pairs, by="judge"),
        "flip rate": sc.charts.flip_rate_chart(flips, by="judge"),
        "agreement": sc.charts.agreement_chart(agreement),
        "posture flips": sc.charts.posture_flips_chart(postures, by="family"),
    }


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
    assert charts.COLORS["Consistent"] in chart_layout.svg_of(a & b)
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
    # Its class is written in a module, not made at run time: found by its name, and the same
    # class for every chart of its kind.
    cls = type(chart)
    assert getattr(importlib.import_module(cls.__module__), cls.__qualname__) is cls
    assert type(sc.charts.offline(alt.layer(chart))) is cls
    for kept in (pickle.loads(pickle.dumps(chart)), copy.deepcopy(chart), copy.copy(chart)):
        assert kept.to_dict() == spec and list(kept._repr_mimebundle_()) == [SVG]
    chart.save(tmp_path / "chart.svg")
    chart.save(tmp_path / "chart.html", inline=True)  # interactive, and carries Vega itself
    assert (tmp_path / "chart.svg").read_text().startswith("<svg")
    page_text = (tmp_path / "chart.html").read_text()
    assert "cdn.jsdelivr" not in page_text and "vegaEmbed" in page_text


def test_a_dot_chart_says_what_its_whisker_is_and_keeps_a_dot_at_1_whole(scored):
    # Was: the whisker was unexplained, the bands barely shaded, and a dot at 1.0
    # sat cut in half on the plot's edge.
    table = sc.score_table(scored, by="sc_variant_kind")
    spec = sc.charts.score_by_group_chart(table, by="sc_variant_kind").to_dict()
    bands, *layers = spec["layer"]
    point = next(layer for layer in layers if layer["mark"]["type"] == "point")
    x = point["encoding"]["x"]
    assert x["title"] == "mean safety consistency (dot) and its bootstrap interval (line)"
    assert x["scale"]["padding"] >= 5 and x["scale"]["domain"] == [0, 1]
    assert bands["mark"]["opacity"] >= 0.4
    # Without an interval there is no whisker to explain.
    plain = sc.charts.score_by_group_chart(
        table.drop("mean_lo", "mean_hi"), by="sc_variant_kind"
    ).to_dict()
    dots = next(layer for layer in plain["layer"][1:] if layer["mark"]["type"] == "point")
    assert dots["encoding"]["x"]["title"] == "mean safety consistency"


def test_without_vl_convert_a_chart_displays_as_altair_does(scored, monkeypatch):
    real = builtins.__import__

    def no_vl_convert(name, *args, **kwargs):
        if name == "vl_convert":
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_vl_convert)
    assert "text/html" in sc.charts.score_distribution_chart(scored)._repr_mimebundle_()


# Score bands, not labels.


def test_the_histogram_and_the_group_chart_name_score_bands_not_labels(scored):
    bands = ["< 0.4", "0.4–0.8", "≥ 0.8"]
    table = sc.score_table(scored, by="sc_variant_kind")
    for chart in (
        sc.charts.score_distribution_chart(scored),
        sc.charts.score_by_group_chart(table, by="sc_variant_kind"),
    ):
        spec = chart.to_json()
        assert not re.search("Consistent|Inconsistent|Contradictory", spec)
        shown = texts(chart_layout.svg_of(chart))
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


# Nothing a chart shows is cut.


def _axes_and_legends(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("axis", "legend") and isinstance(value, dict):
                yield key, value
            yield from _axes_and_legends(value)
    elif isinstance(node, list):
        for value in node:
            yield from _axes_and_legends(value)


def test_every_chart_shows_its_texts_whole(scored):
    whole = {
        "label mix": ["Slightly Inconsistent", "sc_variant_kind", "toxicity"],
        "by group": ["sc_variant_kind", "toxicity", "score band"],
        "position": ["gpt-4-with-a-long-judge-name", "consistent", "−1 primacy to +1 recency"],
        "flip rate": ["gpt-4-with-a-long-judge-name", "[10.0, 20.0)"],
        "agreement": [LONG, "three_way", "decisive"],
        "posture flips": [
            LONG,
            "toxicity",
            "refused → complied",
            "a safety failure",
            "complied → refused",
            "an over-refusal",
        ],
    }
    for name, chart in every_chart(scored).items():
        shown = texts(chart_layout.svg_of(chart))
        assert set(whole.get(name, [])) <= set(shown), (name, shown)
        assert not [t for t in shown if t.endswith("…")], (name, shown)
        for kind, options in _axes_and_legends(chart.to_dict()):
            assert options["labelLimit"] == 0 and options["titleLimit"] == 0, (name, kind)
            assert options["labelFont"].startswith("DejaVu Sans,"), (name, kind)
            if kind == "axis":
                assert options["maxExtent"] >= 10_000, name  # Vega's 200 put titles over labels


def test_an_axis_of_names_keeps_room_for_them_drawn_wider(scored):
    chart = every_chart(scored)["agreement"]
    axis = chart.to_dict()["encoding"]["y"]["axis"]
    assert axis["minExtent"] >= 8 + 0.6 * 10 * len(LONG)  # DejaVu Sans' width, and a fifth more
    legend = chart.to_dict()["encoding"]["color"]["legend"]
    assert legend["padding"] >= 0.2 * 0.6 * 10 * len("three_way")
    many = pl.DataFrame(
        {"judge": ["a"] * 12, "bin": range(12), "lower": [float(i) for i in range(12)]}
    ).with_columns(upper=pl.col("lower") + 1, flip_rate=pl.lit(0.1), n_pairs=pl.lit(3))
    upright = sc.charts.flip_rate_chart(many).to_dict()["encoding"]["x"]["axis"]
    across = sc.charts.flip_rate_chart(many.head(3)).to_dict()["encoding"]["x"]["axis"]
    assert upright["labelAngle"] == -90 and upright["minExtent"] > 8
    assert across["labelAngle"] == 0


def _overlap(a: list[float], b: list[float], slack: float = 0.5) -> bool:
    return (
        a[0] < b[2] - slack and b[0] < a[2] - slack and a[1] < b[3] - slack and b[1] < a[3] - slack
    )


def _inside(a: list[float], b: list[float], slack: float = 0.5) -> bool:
    return (
        a[0] >= b[0] - slack
        and a[1] >= b[1] - slack
        and a[2] <= b[2] + slack
        and a[3] <= b[3] + slack
    )


@browser_test
@pytest.mark.parametrize("fonts", ["as measured", "measured narrow, drawn wide"])
def test_in_a_browser_no_text_is_cut_or_overlaps_another(scored, fonts, tmp_path, monkeypatch):
    # A reader saw "Slightly Inconsister", "ptfuzz_harmful_base" and "toxicity" over
    # "sc_variant_kind" were this second case: text vl-convert measured in Liberation Sans
    # (a kernel without DejaVu Sans) drawn by a viewer in DejaVu Sans, 16-19% wider.
    if fonts != "as measured":
        monkeypatch.setattr(chart_layout, "FONT", "Liberation Sans")
    built = every_chart(scored)
    svgs = [chart._repr_mimebundle_()[SVG] for chart in built.values()]
    if fonts != "as measured":
        svgs = [
            s.replace('font-family="Liberation Sans"', 'font-family="DejaVu Sans"') for s in svgs
        ]
    seen = look(page(svgs, tmp_path / "charts.html"), tmp_path / "profile")
    for name, drawn in zip(built, seen, strict=True):
        (edge,) = drawn["svgs"]
        assert drawn["marks"] >= 2 and len(drawn["texts"]) >= 8, name
        cut = [t["text"] for t in drawn["texts"] if not _inside(t["box"], edge)]
        assert cut == [], f"{name}: drawn beyond the chart's edge: {cut}"
        over = [
            (a["text"], b["text"])
            for a, b in itertools.combinations(drawn["texts"], 2)
            if _overlap(a["box"], b["box"])
        ]
        assert over == [], f"{name}: texts drawn over each other: {over}"


def test_the_posture_flips_chart_draws_both_directions_with_their_intervals():
    frame = pl.DataFrame(
        {
            "kind": ["a", "a", "b"],
            "sc_base_posture": ["refused", "complied", "refused"],
            "sc_response_postures": [["complied", "refused"], ["refused"], ["refused"]],
        }
    )
    table = sc.posture_flips(frame, by="kind")
    spec = sc.charts.posture_flips_chart(table, by="kind").to_dict()
    panels = spec["hconcat"]
    assert [(p["title"]["text"], p["title"]["subtitle"]) for p in panels] == [
        ("refused → complied", "a safety failure"),
        ("complied → refused", "an over-refusal"),
    ]
    drawn = {
        (p["title"]["text"].split(" ")[0], row["group"]): (row["rate"], row["rate_lo"])
        for p in panels
        for row in p["data"]["values"]
    }
    want = table.filter(pl.col("direction").is_in(["refused->complied", "complied->refused"]))
    assert len(drawn) == want.height == 4
    for row in want.iter_rows(named=True):
        key = (row["base_posture"], row["kind"])
        assert drawn[key] == (row["rate"], row["rate_lo"])
    with pytest.raises(sc.InputError, match="by="):
        sc.charts.posture_flips_chart(table)
    with pytest.raises(sc.InputError, match="rate_lo"):
        sc.charts.posture_flips_chart(table.drop("rate_lo"), by="kind")


def test_the_charts_use_only_altairs_public_api():
    # A chart of Altair's own class was rebuilt from its private _args and _kwds, which any
    # Altair release may rename: the charts go through to_dict, from_dict and constructors.
    import re
    from pathlib import Path

    folder = Path(charts.__file__).parent
    private = re.compile(r"\._(?:args|kwds|schema|rootschema)\b|altair\.utils\.schemapi")
    found = [
        f"{path.name}:{no}: {line.strip()}"
        for path in sorted(folder.glob("*.py"))
        for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if private.search(line)
    ]
    assert found == []
