"""posture_flips: posture moves from the base answer to the fresh ones, by direction."""

from __future__ import annotations

import math
from collections import Counter
from statistics import NormalDist

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import safecons as sc
from safecons.flips import DIRECTIONS, wilson_interval
from safecons.testing import StandInSUT

POSTURES = ("refused", "partial", "complied")
posture = st.one_of(st.none(), st.sampled_from(POSTURES))


def wilson_reference(k: int, n: int, ci: float) -> tuple[float, float]:
    """The Wilson interval from its textbook form: the roots in p of
    (phat - p)^2 = z^2 p (1 - p) / n."""
    z = NormalDist().inv_cdf(1 - (1 - ci) / 2)
    phat = k / n
    # (1 + z²/n) p² - (2 phat + z²/n) p + phat² = 0
    a = 1 + z * z / n
    b = -(2 * phat + z * z / n)
    c = phat * phat
    root = math.sqrt(max(b * b - 4 * a * c, 0.0))
    return (-b - root) / (2 * a), (-b + root) / (2 * a)


def reference(rows, by_kind: bool):
    """The table by plain counting: per group and direction, flips and answers."""
    flips: Counter = Counter()
    answers: Counter = Counter()
    groups = set()
    for kind, base, fresh in rows:
        group = kind if by_kind else None
        groups.add(group)
        if base is None or fresh is None:
            continue
        for f in fresh:
            if f is None:
                continue
            answers[group, base] += 1
            if f != base:
                flips[group, base, f] += 1
    return {
        (g, f"{x}->{y}"): (flips[g, x, y], answers[g, x]) for g in groups for x, y in DIRECTIONS
    }


rows_strategy = st.lists(
    st.tuples(
        st.one_of(st.none(), st.sampled_from(["toxicity", "dpi"])),
        posture,
        st.one_of(st.none(), st.lists(posture, max_size=4)),
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=60, deadline=None)
@given(rows=rows_strategy, by_kind=st.booleans(), ci=st.sampled_from([0.8, 0.95, 0.99]))
def test_the_table_counts_as_plain_python_does(rows, by_kind, ci):
    frame = pl.DataFrame(
        {
            "sc_variant_kind": [r[0] for r in rows],
            "sc_base_posture": [r[1] for r in rows],
            "sc_response_postures": [r[2] for r in rows],
        },
        schema={
            "sc_variant_kind": pl.String,
            "sc_base_posture": pl.String,
            "sc_response_postures": pl.List(pl.String),
        },
    )
    table = sc.posture_flips(frame, by="sc_variant_kind" if by_kind else None, ci=ci)
    want = reference(rows, by_kind)
    assert table.height == len(want)
    for row in table.iter_rows(named=True):
        group = row["sc_variant_kind"] if by_kind else None
        k, n = want[group, row["direction"]]
        assert (row["flips"], row["answers"]) == (k, n)
        if n == 0:
            assert row["rate"] is None and row["rate_lo"] is None and row["rate_hi"] is None
            continue
        assert row["rate"] == pytest.approx(k / n)
        lo, hi = wilson_reference(k, n, ci)
        assert row["rate_lo"] == pytest.approx(lo, abs=1e-12)
        assert row["rate_hi"] == pytest.approx(hi, abs=1e-12)
        assert row["rate_lo"] <= row["rate"] <= row["rate_hi"]


@settings(max_examples=80, deadline=None)
@given(
    n=st.integers(min_value=1, max_value=5000),
    share=st.floats(min_value=0, max_value=1),
    ci=st.floats(min_value=0.5, max_value=0.999),
)
def test_the_wilson_interval_is_statsmodels(n, share, ci):
    proportion = pytest.importorskip("statsmodels.stats.proportion")
    k = round(share * n)
    frame = pl.DataFrame({"k": [k], "n": [n]})
    lo, hi = wilson_interval(pl.col("k"), pl.col("n"), ci=ci)
    got = frame.select(lo.alias("lo"), hi.alias("hi")).row(0)
    want = proportion.proportion_confint(k, n, alpha=1 - ci, method="wilson")
    assert got == pytest.approx(want, abs=1e-12)


def test_directions_are_kept_apart_and_partial_is_its_own_state():
    frame = pl.DataFrame(
        {
            "sc_base_posture": ["refused", "refused", "complied"],
            "sc_response_postures": [
                ["complied", "partial", "refused", None],
                ["refused"],
                ["refused", "partial", "complied"],
            ],
        }
    )
    table = sc.posture_flips(frame)
    got = {r["direction"]: (r["flips"], r["answers"]) for r in table.iter_rows(named=True)}
    # Base refused: four fresh answers with a posture (the None has none).
    assert got["refused->complied"] == (1, 4)
    assert got["refused->partial"] == (1, 4)
    assert got["complied->refused"] == (1, 3)
    assert got["complied->partial"] == (1, 3)
    assert got["partial->complied"] == (0, 0)
    assert table.filter(pl.col("answers") == 0)["rate"].is_null().all()
    assert table["direction"].to_list() == [f"{x}->{y}" for x, y in DIRECTIONS]


def test_template_family_is_the_outermost_template(scored):
    table = sc.posture_flips(scored, by="template_family")
    families = set(table["template_family"].drop_nulls())
    kinds = scored.select(
        "sc_variant_kind", "sc_toxicity_template_id", "sc_jailbreak_template_id"
    ).rows()
    want = set()
    for kind, tox, jb in kinds:
        outer = jb if kind == "dpi" else tox
        want.add(outer.split(".")[1] if outer.startswith(("tox.", "jb.")) else outer)
    assert families == want
    overall = sc.posture_flips(scored)
    summed = table.group_by("direction").agg(pl.col("flips", "answers").sum())
    assert dict(summed.select("direction", "flips").rows()) == dict(
        overall.select("direction", "flips").rows()
    )
    assert dict(summed.select("direction", "answers").rows()) == dict(
        overall.select("direction", "answers").rows()
    )


@pytest.fixture(scope="module")
def scored() -> pl.DataFrame:
    return sc.demo_frame().pipe(
        sc.safety_consistency,
        sut=StandInSUT(seed=3),
        judge=sc.OfflineJudge(),
        progress=False,
        responses_per_query=4,
        dpi_ratio=0.5,
    )


def test_a_run_counts_every_fresh_answer_read(scored):
    table = sc.posture_flips(scored, by="sc_variant_kind")
    fresh = scored.select("sc_base_posture", "sc_response_postures").explode("sc_response_postures")
    read = fresh.drop_nulls()
    refused = read.filter(pl.col("sc_base_posture") == "refused").height
    r2c = table.filter(pl.col("direction") == "refused->complied")
    assert r2c["answers"].sum() == refused
    assert set(table["sc_variant_kind"]) == set(scored["sc_variant_kind"])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda f: f.drop("sc_base_posture"), "missing column(s) 'sc_base_posture'"),
        (lambda f: f.drop("sc_response_postures"), "'sc_response_postures'"),
        (
            lambda f: f.with_columns(sc_base_posture=pl.lit("refusal")),
            "column 'sc_base_posture' holds",
        ),
        (
            lambda f: f.with_columns(sc_response_postures=pl.lit("refused")),
            "'sc_response_postures' has dtype String",
        ),
    ],
    ids=["no-base", "no-fresh", "bad-posture", "flat-list"],
)
def test_bad_frames_name_the_column(change, message):
    frame = pl.DataFrame({"sc_base_posture": ["refused"], "sc_response_postures": [["complied"]]})
    with pytest.raises(sc.InputError, match="posture_flips") as err:
        sc.posture_flips(change(frame))
    assert message in str(err.value)


def test_bad_arguments_name_the_parameter():
    frame = pl.DataFrame({"sc_base_posture": ["refused"], "sc_response_postures": [["complied"]]})
    with pytest.raises(sc.InputError, match="ci="):
        sc.posture_flips(frame, ci=95)
    with pytest.raises(sc.InputError, match="by="):
        sc.posture_flips(frame, by="nope")
    with pytest.raises(sc.InputError, match="derived from"):
        sc.posture_flips(frame, by="template_family")
    with pytest.raises(sc.InputError, match="which the table itself adds"):
        sc.posture_flips(frame.with_columns(direction=pl.lit("x")), by="direction")
