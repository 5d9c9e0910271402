"""sc.report: one self-contained HTML file, safe against what models write, drawn in Chromium."""

from __future__ import annotations

import builtins
import dataclasses
import html
import json
import re
import subprocess
from pathlib import Path

import polars as pl
import pytest

import safecons as sc
from headless_chromium import CHROMIUM, FLAGS, browser_test
from safecons.cli import main
from safecons.metric import SafetyConsistencyRun
from safecons.scores import MIN_ROWS_FOR_INTERVAL
from safecons.testing import ScriptedChat

#: One offline judge for this module's runs: its cache identity (a digest of its verdicts on a
#: fixed table of cases, about 0.3 s) is worked out once, not in each test; no test here is
#: about that identity (tests/test_judge_tricks.py is).
OFFLINE_JUDGE = sc.OfflineJudge()

ROOT = Path(__file__).parents[1]
HOSTILE = '<script>alert("x")</script><img src=x onerror="alert(1)"> & </td></table>'


@pytest.fixture(scope="module")
def run(demo_run) -> SafetyConsistencyRun:
    return demo_run


def test_the_report_is_self_contained(run, tmp_path):
    text = sc.report(run, tmp_path / "r.html").read_text()
    assert text.startswith("<!doctype html>") and text.rstrip().endswith("</html>")
    assert "<script" not in text.lower()
    # Nothing to fetch: no external stylesheet, image, font or script.
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", text)
    assert "@import" not in text and "url(http" not in text
    assert text.count("<svg") >= 4  # distribution, two breakdowns, label mix
    assert "95% low" in text and "The 10 least consistent rows" in text
    # The run's config, a row a field.
    assert '<th class="text">responses_per_query</th><td class="text">3</td>' in text


def test_the_report_says_what_was_measured_and_by_what_judge(run, tmp_path):
    # A file people email around names the system and the judge.
    assert run.sut == "the Python callable StandInSUT"
    assert run.judge is not None and run.judge.startswith("safecons' offline judge")
    text = sc.report(run, tmp_path / "r.html").read_text()
    assert "System under test: <b>the Python callable StandInSUT</b>" in text
    assert "judge: <b>safecons&#x27; offline judge (OfflineJudge" in text
    # The frame records its run (sc_run), so a saved frame's report names them too.
    framed = sc.report(run.frame, tmp_path / "f.html").read_text()
    assert "System under test: <b>the Python callable StandInSUT</b>" in framed
    # A frame without that column does not know: the report says so instead of guessing.
    bare = sc.report(run.frame.drop("sc_run"), tmp_path / "b.html").read_text()
    assert "What was measured: <b>not recorded</b>" in bare


def test_a_run_whose_rows_failed_says_so_at_the_top(tmp_path):
    # Was: every row failed, and the cause was only in the rows at the bottom.
    def down(messages, *, temperature):
        raise sc.clients.CallFailed("connection refused: is the server running?")

    with pytest.warns(sc.UnscoredRowsWarning):
        failed = (
            sc.demo_frame()
            .head(3)
            .pipe(
                sc.safety_consistency,
                sut=down,
                judge=OFFLINE_JUDGE,
                allow_unscored=True,
                progress=False,
            )
        )
    text = sc.report(failed, tmp_path / "r.html").read_text()
    top = text[: text.index("<h2>")]
    assert "No row was scored: all 3 failed. Most often (3 rows):" in top
    assert "is the server running?" in top
    scored = sc.report(sc.demo_frame().head(3).pipe(
        sc.safety_consistency, sut=lambda m, temperature: "No.", judge=OFFLINE_JUDGE,
        progress=False, allow_unscored=True,
    ), tmp_path / "ok.html").read_text()  # fmt: skip
    assert "No row was scored" not in scored and "rows failed" not in scored
    # Rows a spent budget left are not failures (found by review): they are said as such.
    with pytest.warns(sc.UnscoredRowsWarning):
        stopped = sc.demo_frame().head(4).pipe(
            sc.safety_consistency, sut=lambda m, temperature: "No.", judge=OFFLINE_JUDGE,
            progress=False, max_calls=2, allow_unscored=True,
        )  # fmt: skip
    text = sc.report(stopped, tmp_path / "budget.html").read_text()
    top = text[: text.index("<h2>")]
    assert "rows were not finished: the run&#x27;s max_calls budget was spent" in top
    assert "rows failed" not in top and "No row was scored" not in top


def test_what_a_report_names_of_a_client_holds_no_secret():
    from safecons.metric._judging import measured

    key = "sk-live-SECRET-0123456789"
    client = sc.OpenAICompatible(
        model="gpt-4o-mini", base_url="https://user.example.com/v1", api_key=key
    )
    said = measured(client, "sut")
    assert said == "model 'gpt-4o-mini' at user.example.com"
    assert key not in said
    azure = sc.OpenAICompatible.azure(
        endpoint="https://res.openai.azure.com", deployment="gpt4o-prod",
        api_version="2024-10-21", api_key=key,
    )  # fmt: skip
    assert measured(azure, "sut") == "model 'gpt4o-prod' at res.openai.azure.com"
    batched = sc.OpenAICompatible(model="m", api_key=key, batch=True)
    assert measured(sc.LLMJudge(batched), "judge") == (
        "an LLM judge: model 'm' at api.openai.com through its Batch API"
    )


def test_model_text_is_escaped_and_long_text_folded(tmp_path):
    df = pl.DataFrame(
        {
            "input_id": ["a", "b"],
            "prompt": ["Say hi " + HOSTILE, "x" * 2_000],
            "sut_response": [HOSTILE, "fine"],
        }
    )
    scored = df.pipe(
        sc.safety_consistency,
        sut=ScriptedChat([HOSTILE + " " + "y" * 600]),
        judge=OFFLINE_JUDGE,
        progress=False,
    )
    text = sc.report_html(scored)
    assert "<script>" not in text and "<img src=x" not in text
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in text
    assert "<details><summary>" in text and "characters)</summary>" in text


def test_without_the_charts_extra_the_report_says_how_to_get_them(run, monkeypatch):
    real = builtins.__import__

    def no_charts(name, *args, **kwargs):
        if name in ("altair", "vl_convert"):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_charts)
    text = sc.report_html(run)
    assert "<svg" not in text and "pip install 'safecons[charts]'" in text
    assert "95% high" in text  # the tables are all there


def test_bad_arguments_are_named(run, tmp_path):
    with pytest.raises(sc.InputError, match="folder"):
        sc.report(run, tmp_path / "missing" / "r.html")
    with pytest.raises(sc.InputError, match="worst="):
        sc.report_html(run, worst=-1)
    with pytest.raises(sc.InputError, match="expected a scored frame"):
        sc.report_html({"rows": 1})
    with pytest.raises(sc.InputError, match="missing column"):
        sc.report_html(pl.DataFrame({"input_id": [1]}))


def test_the_command_line_writes_reports(run, tmp_path, monkeypatch, capsys):
    scored = tmp_path / "scored.parquet"
    run.frame.write_parquet(scored)
    assert main(["report", str(scored), "-o", str(tmp_path / "out.html")]) == 0
    assert (tmp_path / "out.html").read_text().count("<svg") >= 4
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--no-progress"]) == 0
    assert "wrote report.html" in capsys.readouterr().out
    assert (tmp_path / "report.html").is_file()
    assert main(["report", str(scored), "-o", str(tmp_path / "out.txt")]) == 2


def _chromium_flags(tmp_path: Path) -> list[str]:
    return [
        *FLAGS,
        f"--user-data-dir={tmp_path / 'profile'}",
        "--enable-logging=stderr",
        "--v=0",
    ]


@browser_test
def test_the_report_draws_in_headless_chromium(run, tmp_path):
    assert CHROMIUM is not None, "Chromium is required here (SAFECONS_REQUIRE_CHROMIUM=1)"
    audit = sc.audit_judge(sc.OfflineJudge(), progress=False, repeats=1)
    page = sc.report(run, tmp_path / "report.html", audit=audit)
    assert "disguise_<wbr>caught" in page.read_text()  # the audit's disguised-compliance probe
    artifacts = ROOT / "artifacts"
    artifacts.mkdir(exist_ok=True)
    shot = artifacts / "report.png"
    shot.unlink(missing_ok=True)
    flags = _chromium_flags(tmp_path)
    dom = subprocess.run(
        [CHROMIUM, *flags, "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    console = [line for line in dom.stderr.splitlines() if "CONSOLE" in line]
    assert not console, console
    svgs = re.findall(r"<svg.*?</svg>", dom.stdout, re.S)
    assert len(svgs) >= 5  # the report's charts and the audit's
    for svg in svgs:  # each one drew marks, not an empty frame
        assert len(re.findall(r"<(?:path|rect|line)\b", svg)) >= 5
    done = subprocess.run(
        [CHROMIUM, *flags, f"--screenshot={shot}", "--window-size=1200,3200", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert shot.stat().st_size > 20_000  # a page with charts, kept for a person to look at


#: Measures, once the page has loaded, where each table ends against the page's column (the
#: body's content box) and whether it sits in a box that scrolls sideways; and whether the
#: page itself is wider than the window. Test-only: the report itself holds no script.
MEASURE = """<script>
addEventListener("load", () => {
  const body = document.body.getBoundingClientRect();
  const column = body.right - parseFloat(getComputedStyle(document.body).paddingRight);
  const outer = [...document.querySelectorAll("table")].filter(
    (table) => !table.parentElement.closest("table"));
  const tables = outer.map((table) => {
    const box = table.parentElement;
    const scrolls = ["auto", "scroll"].includes(getComputedStyle(box).overflowX);
    const right = table.getBoundingClientRect().right;
    return {head: table.querySelector("th").textContent, right: right, scrolls: scrolls,
            box: scrolls ? box.getBoundingClientRect().right : right,
            overflow: scrolls ? box.scrollWidth - box.clientWidth : 0};
  });
  const out = document.createElement("pre");
  out.id = "measured";
  out.textContent = JSON.stringify({column: column, tables: tables,
    page: document.documentElement.scrollWidth - document.documentElement.clientWidth});
  document.body.append(out);
});
</script>"""


@browser_test
def test_every_table_keeps_to_the_page_column_in_headless_chromium(run, tmp_path):
    # Was: the audit table of a chat judge (its swap test's columns too) ran past the column
    # of the page. Its headings now wrap after an underscore, so it fits a wide
    # window; in a narrow one each table scrolls in its own box and the page does not.
    assert CHROMIUM is not None, "Chromium is required here (SAFECONS_REQUIRE_CHROMIUM=1)"
    verdicts = [
        json.dumps({"label": label, "score": score})
        for label, score in (("Consistent", 0.9), ("Contradictory", 0.1), ("Consistent", 0.85))
    ]
    audit = sc.audit_judge(ScriptedChat(verdicts), progress=False, repeats=2)
    assert audit.ordered and audit.table["swap_consistency"].null_count() == 0
    page = tmp_path / "measured.html"
    page.write_text(sc.report_html(run, audit=audit).replace("</body>", MEASURE + "</body>"))
    for width in (1200, 700):
        dom = subprocess.run(
            [
                CHROMIUM,
                *_chromium_flags(tmp_path),
                f"--window-size={width},900",
                "--dump-dom",
                page.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert dom.returncode == 0, dom.stderr[-2000:]
        found = re.search(r'<pre id="measured">(.*?)</pre>', dom.stdout, re.S)
        assert found is not None, dom.stdout[-2000:]
        measured = json.loads(html.unescape(found.group(1)))
        column, tables = measured["column"], measured["tables"]
        heads = [t["head"] for t in tables]
        assert {"slice", "rows", "row", "concurrency_limit"} <= set(heads), heads
        for table in tables:
            # Within the column, or in a box within it that scrolls sideways.
            assert table["box"] <= column + 0.5, (width, table)
            assert table["right"] <= column + 0.5 or table["scrolls"], (width, table)
        assert measured["page"] <= 0, width  # the page never scrolls sideways
        if width == 1200:  # the audit table fits whole: nothing to scroll
            audit_table = tables[heads.index("slice")]
            assert audit_table["right"] <= column + 0.5 and audit_table["overflow"] <= 0


def test_text_a_chart_renderer_cannot_hold_is_replaced_not_fatal(run):
    # A NUL made vl-convert abort the process; U+2028 broke its JavaScript.
    odd = run.frame.with_columns(task=pl.Series(["a\x00b", "c\u2028d", "e\x1bf"] * 4))
    text = sc.report_html(odd, by="task")
    assert text.count("<svg") >= 3 and "\x00" not in text


def test_the_report_reads_frames_read_back_and_stage_frames(run, tmp_path):
    path = tmp_path / "scored.jsonl"
    run.frame.write_ndjson(path)  # all-null columns come back typed Null
    assert main(["report", str(path), "-o", str(tmp_path / "r.html")]) == 0
    judged = sc.judge_responses(
        run.frame.select("input_id", "prompt", "sut_response", "sc_variant_text", "sc_responses"),
        judge=OFFLINE_JUDGE,
        progress=False,
    )
    assert "<h2>Score</h2>" in sc.report_html(judged)


def test_report_arguments_are_checked_before_any_work(run, tmp_path, capsys):
    with pytest.raises(sc.InputError, match="by= names column"):
        sc.report_html(run, by="task_typo")
    (tmp_path / "folder.html").mkdir()
    assert main(["demo", "--no-progress", "--report", str(tmp_path / "folder.html")]) == 2
    assert "is a folder" in capsys.readouterr().err
    text = sc.report_html(run.frame.head(3))
    assert "The 3 least consistent rows" in text


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("<h", start + len(heading))
    return text[start : end if end >= 0 else None]


def test_a_blank_interval_says_why(run):
    # Was: empty "95% low/high" cells, with nothing to say why.
    text = sc.report_html(run)
    note = f"fewer than {MIN_ROWS_FOR_INTERVAL} scored rows, too few for an interval"
    for key in ("sc_variant_kind", "toxicity_family", "jailbreak_family"):
        table = sc.score_table(run.frame, by=key)
        small = table.filter(pl.col("scored") < MIN_ROWS_FOR_INTERVAL).height
        assert small == table["mean_lo"].null_count() > 0  # blank exactly where too few
        part = _section(text, f"<h3>By {key}</h3>")
        assert part.count('<td class="muted">—</td>') == 2 * small  # low and high
        assert part.count(note) == 1, key
    overall = _section(text, "<h2>Score</h2>")  # up to the first breakdown
    assert note not in overall and "—" not in overall  # 12 scored rows: an interval
    few = sc.report_html(run.frame.head(MIN_ROWS_FOR_INTERVAL - 1))
    assert note in _section(few, "<h2>Score</h2>")


def test_run_and_config_are_tables_with_nested_values_readable(run):
    # Was: two JSON dumps in <pre>.
    config = {
        **run.config,
        "options": {"cache": None, "retry": {"on": [429, 500], "backoff": 0.5}},
        "templates": [{"id": "tox.insult.1"}, "jb.pretext.2"],
        HOSTILE: HOSTILE,
    }
    text = sc.report_html(dataclasses.replace(run, config=config))
    run_part = _section(text, "<h2>Run</h2>")
    assert "<pre>" not in run_part and "{" not in run_part
    summary = sc.run_summary(run.frame)
    attempts = f"<td>{summary.attempts['sut']}</td><td>{summary.attempts['judge']}</td>"
    assert "<th>SUT</th><th>judge</th>" in run_part
    assert f'<th class="text">attempts</th>{attempts}' in run_part
    assert run_part.count("not reported") == 4  # prompt and completion tokens, both kinds
    config_part = _section(text, "<h3>Config</h3>")
    assert "<pre>" not in config_part and "{" not in config_part
    assert '<th class="text">dpi_ratio</th><td class="text">0.5</td>' in config_part
    nested = re.search(
        r'<th class="text">options</th><td class="text">(<table.*?</table>)', config_part
    )
    assert nested is not None  # a mapping in a mapping: a table in its cell
    assert (
        '<th class="text">cache</th><td class="text"><span class="muted">null</span>'
        in nested.group(1)
    )
    assert '<th class="text">on</th><td class="text">429, 500</td>' in config_part
    assert "<ol><li><table" in config_part and "<li>jb.pretext.2</li>" in config_part
    assert "<script>" not in text and "&lt;script&gt;" in config_part


def test_the_audit_table_wraps_its_headings_scrolls_in_its_box_and_explains_blanks(run):
    audit = sc.audit_judge(sc.OfflineJudge(), progress=False, repeats=1)
    part = _section(sc.report_html(run, audit=audit), "<h2>Judge audit</h2>")
    assert '<div class="wide"><table>' in part  # a box that scrolls where the window is narrow
    assert '">agreement_<wbr>decisive</th>' in part  # a heading may wrap after "_"
    assert audit.table["kappa"].null_count()  # one gold label per gold group: no kappa
    assert "A blank cell: the figure is undefined for that group" in part


def test_the_null_group_is_named_null_as_score_table_names_it(run):
    # Was: "(none)" in the report, null in sc.score_table, for the same group: the variants
    # without a jailbreak template.
    table = sc.score_table(run.frame, by="jailbreak_family")
    assert table["jailbreak_family"][-1] is None  # one null group, sorted last
    assert table.filter(pl.col("jailbreak_family").is_null())["rows"].item() > 0
    text = sc.report_html(run, by="jailbreak_family")
    part = _section(text, "<h3>By jailbreak_family</h3>")
    assert part.count('<td class="text muted">null</td>') == 1 and "(none)" not in part
    assert "null: the rows with no value in jailbreak_family" in part
    assert "<code>sc.score_table</code> gives it a null key" in part
    chart = _section(text, "<h2>Charts</h2>")  # the chart by jailbreak_family labels it so
    labels = re.findall(r"<text[^>]*>([^<]*)</text>", chart)
    assert "null" in labels and "(none)" not in labels
    # A breakdown without a null group says nothing of one.
    assert "null: the rows" not in _section(text, "<h2>Score</h2>")


def test_the_report_draws_posture_flips_both_ways_by_variant_kind(run):
    pytest.importorskip("vl_convert")
    text = sc.report_html(run)
    assert "Posture flips by sc_variant_kind" in text
    assert "a safety failure" in text and "an over-refusal" in text
    # A frame without the posture columns (a safecons before them) has no such chart.
    older = run.frame.drop("sc_base_posture", "sc_response_postures")
    assert "Posture flips" not in sc.report_html(older)


def test_a_report_written_again_draws_its_charts_once(run, monkeypatch):
    vl_convert = pytest.importorskip("vl_convert")
    first = sc.report_html(run)
    drawn: list[str] = []
    real = vl_convert.vegalite_to_svg

    def drawing(spec, *args, **kwargs):
        drawn.append(spec)
        return real(spec, *args, **kwargs)

    monkeypatch.setattr(vl_convert, "vegalite_to_svg", drawing)
    again = sc.report_html(run)
    assert drawn == [] and again.count("<svg") == first.count("<svg") >= 4
    assert re.findall(r"<svg.*?</svg>", again, re.S) == re.findall(r"<svg.*?</svg>", first, re.S)
    # Another chart is drawn, once.
    older = run.frame.drop("sc_base_posture", "sc_response_postures")
    sc.report_html(older.with_columns(pl.col("sc_variant_kind").str.to_uppercase()))
    assert len(drawn) >= 1 and len(set(drawn)) == len(drawn)


def test_a_jury_with_the_offline_judge_is_named_and_its_order_cell_says_why(tmp_path):
    verdict = '{"label": "Consistent", "score": 0.9}'
    out = (
        sc.demo_frame()
        .head(3)
        .pipe(
            sc.safety_consistency,
            sut=lambda m, temperature: "No.",
            judge=[OFFLINE_JUDGE, lambda m, temperature: verdict],
            swap_share=1.0,
            progress=False,
        )
    )
    text = sc.report_html(out)
    assert "(...)" not in text
    assert "offline judge (OfflineJudge, a screen)" in text
    assert "<td>n/a: sees no order</td>" in text


def test_a_chart_vl_convert_cannot_draw_costs_only_its_own_place():
    pytest.importorskip("vl_convert")
    from safecons._report_html import svg_of

    class Undrawable:
        def to_json(self) -> str:
            return '{"mark": "no such mark"}'

    said = svg_of(Undrawable())
    assert said.startswith('<p class="muted">(this chart could not be drawn: ')
