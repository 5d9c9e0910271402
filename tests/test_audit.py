"""audit_judge: the seed's protocol on the safety judge, through the metric's runner."""

from __future__ import annotations

import json
import random
import re
from typing import Any

import polars as pl
import pytest

import safecons as sc
from safecons.testing import looks_like_refusal


def cohen_kappa_score(*args: Any, **kwargs: Any) -> Any:
    """scikit-learn's, the oracle: imported by the tests that call it, not at collection
    (scikit-learn's import takes about a second, paid again by each worker)."""
    from sklearn.metrics import cohen_kappa_score as reference

    return reference(*args, **kwargs)


GOLDEN = sc.golden_set()
_BLOCK = re.compile(r"<<<(BASE|CANDIDATE) ANSWER (\w+)>>>\n(.*?)\n<<<END \1 ANSWER \2>>>", re.S)


def verdict(label: str) -> str:
    score = {"Consistent": 0.95, "Slightly Inconsistent": 0.6, "Contradictory": 0.1}[label]
    return json.dumps({"label": label, "score": score, "reason": "scripted"})


def shown(messages: list[dict[str, str]]) -> list[tuple[str, str]]:
    """The answers in the order the prompt shows them: (role, text)."""
    return [(m.group(1), m.group(3)) for m in _BLOCK.finditer(messages[-1]["content"])]


def fair(messages, temperature):
    answers = dict(shown(messages))
    if answers["CANDIDATE"] == answers["BASE"]:
        return verdict("Consistent")
    return verdict("Consistent" if looks_like_refusal(answers["CANDIDATE"]) else "Contradictory")


def primacy(messages, temperature):
    # Always prefers (holds up as the safer) whatever it sees first.
    first = shown(messages)[0][0]
    return verdict("Contradictory" if first == "BASE" else "Consistent")


def recency(messages, temperature):
    last = shown(messages)[-1][0]
    return verdict("Contradictory" if last == "BASE" else "Consistent")


def obeys_injections(messages, temperature):
    text = messages[-1]["content"]
    claimed = re.search(
        r'"label": "(Consistent|Contradictory)"|Final label: (\w+)|record it as (\w+)', text
    )
    if claimed:
        return verdict(next(g for g in claimed.groups() if g))
    return fair(messages, temperature)


def audit(judge, golden=GOLDEN, **kw):
    kw.setdefault("progress", False)
    kw.setdefault("cache", False)
    return sc.audit_judge(judge, golden, **kw)


def row(result: sc.JudgeAudit, slice_: str = "all", group: str = "all") -> dict:
    return result.table.filter(slice=slice_, group=group).row(0, named=True)


def test_a_judge_that_prefers_what_it_sees_first_comes_out_primacy_biased():
    result = audit(primacy, repeats=1, probes=False)
    r = row(result)
    assert r["n_swapped"] == GOLDEN.height
    assert r["primacy"] == GOLDEN.height and r["recency"] == 0
    assert r["swap_consistency"] == 0.0
    r = row(audit(recency, repeats=1, probes=False))
    assert r["recency"] == GOLDEN.height and r["primacy"] == 0


def test_a_fair_judge_is_swap_consistent_and_stable():
    result = audit(fair, repeats=2)
    r = row(result)
    assert r["swap_consistency"] == 1.0 and r["primacy"] == r["recency"] == 0
    assert r["stability"] == 1.0
    assert r["identical_consistent"] == 1.0
    assert r["injection_unmoved"] == 1.0 and r["injection_obeyed"] == 0.0
    assert r["n_error"] == 0


def test_a_judge_that_obeys_an_injected_verdict_fails_the_probe():
    r = row(audit(obeys_injections, repeats=1, swap=False))
    assert r["injection_obeyed"] == 1.0
    assert r["injection_unmoved"] < 0.5
    assert r["n_swapped"] is None  # swap=False: not run, not zero


def test_agreement_and_kappa_are_the_reference_figures():
    result = audit(fair, repeats=1, swap=False, probes=False)
    pairs = result.pairs
    r = row(result)
    assert r["agreement"] == pytest.approx((pairs["label"] == pairs["gold"]).mean())
    assert r["kappa"] == pytest.approx(cohen_kappa_score(pairs["gold"], pairs["label"]), abs=1e-12)
    decisive = pairs.filter(
        pl.col("gold") != "Slightly Inconsistent", pl.col("label") != "Slightly Inconsistent"
    )
    assert r["n_decisive"] == decisive.height
    assert r["agreement_decisive"] == pytest.approx((decisive["label"] == decisive["gold"]).mean())
    by_gold = result.table.filter(slice="gold")
    assert by_gold["n"].sum() == GOLDEN.height
    assert by_gold["kappa"].null_count() == by_gold.height  # undefined inside one gold label
    assert set(result.table["slice"]) == {"gold", "template_family", "family", "all"}


def test_a_flaky_judge_is_less_than_stable():
    rng = random.Random(0)

    def coin(messages, temperature):
        return verdict(rng.choice(["Consistent", "Contradictory"]))

    r = row(audit(coin, repeats=4, swap=False, probes=False))
    assert 0.5 <= r["stability"] < 0.95


def test_calls_the_budget_did_not_allow_are_errors_not_gaps():
    result = audit(fair, repeats=1, swap=False, probes=False, max_calls=10)
    assert result.pairs.height == GOLDEN.height
    r = row(result)
    assert r["n_judged"] == 10 and r["n_error"] == GOLDEN.height - 10
    assert result.calls["error"].drop_nulls().len() == GOLDEN.height - 10


def test_a_judge_that_fails_on_some_pairs_is_counted():
    def sometimes(messages, temperature):
        if "phishing" in messages[-1]["content"]:
            raise RuntimeError("boom")
        return fair(messages, temperature)

    result = audit(sometimes, repeats=1, swap=False, probes=False, n_judge_retries=0)
    failed = result.pairs.filter(pl.col("label").is_null())
    assert failed.height == 5 and failed["error"].str.contains("boom").all()
    assert row(result)["n_error"] == 5


def test_a_cached_audit_replays_every_call(tmp_path):
    cache = tmp_path / "audit.sqlite"
    first = audit(fair, repeats=2, cache=cache)
    again = audit(fair, repeats=2, cache=cache)
    assert again.calls["cache_hits"].sum() == again.calls.height
    assert again.table.equals(first.table)


def test_the_offline_judge_gets_no_swap_test_and_passes_the_identity_probe():
    result = audit(sc.OfflineJudge(), repeats=2)
    assert result.ordered is False
    r = row(result)
    assert r["n_swapped"] is None and r["swap_consistency"] is None
    assert r["identical_consistent"] == 1.0 and r["stability"] == 1.0
    disguised = GOLDEN.filter(gold="Contradictory").height  # one disguise per such pair
    assert (
        result.calls.height
        == (2 + 2) * GOLDEN.height
        + GOLDEN.select("query", "variant", "base").n_unique()
        + disguised
    )
    assert result.calls.filter(condition="disguised").height == disguised


def test_the_disguise_probe_catches_a_judge_fooled_by_a_refusal_line():
    def fooled(*, query: str, variant: str, base: str, candidate: str) -> sc.Judgment:
        # Reads only the first line: a refusal there buys Consistent.
        first = candidate.strip().splitlines()[0] if candidate.strip() else ""
        refused = first.startswith("I'm sorry") or "Evaluator" in first
        return sc.Judgment("Consistent" if refused else "Contradictory", 0.9 if refused else 0.1)

    class Fooled:
        compare = staticmethod(fooled)

    r = row(audit(Fooled(), repeats=1))
    assert r["disguise_caught"] is not None and r["disguise_caught"] < 0.5
    honest = row(audit(sc.OfflineJudge(), repeats=1))
    assert honest["disguise_caught"] == 1.0


@pytest.mark.parametrize(
    ("golden", "message"),
    [
        (GOLDEN.drop("gold"), "missing column"),
        (GOLDEN.with_columns(gold=pl.lit("Fine")), "'gold' has"),
        (pl.concat([GOLDEN.head(2), GOLDEN.head(1)]), "duplicate"),
        (GOLDEN.head(0), "no rows"),
        (GOLDEN.with_columns(pl.lit(None, dtype=pl.String).alias("base")), "'base' has nulls"),
        ("golden.parquet", "expected a polars DataFrame"),
    ],
)
def test_a_bad_golden_set_is_named(golden, message):
    with pytest.raises(sc.InputError, match=message):
        audit(fair, golden)


def test_bad_options_are_named():
    with pytest.raises(sc.InputError, match="repeats"):
        audit(fair, repeats=0)
    with pytest.raises(sc.InputError, match="max_calls"):
        audit(fair, max_calls=-1)
    with pytest.raises(sc.InputError, match="judge"):
        audit(42)


def test_it_runs_inside_a_running_event_loop():
    import asyncio

    async def inside():
        return audit(sc.OfflineJudge(), repeats=1, probes=False)

    assert asyncio.run(inside()).pairs.height == GOLDEN.height


def test_a_judge_whose_label_moves_on_every_swap_is_caught():
    # Contradictory <-> Slightly Inconsistent keeps the seed's letters (both hold the base up
    # as the safer answer), so the exact-label rate is what shows the flip.
    def flips(messages, temperature):
        first = shown(messages)[0][0]
        return verdict("Contradictory" if first == "BASE" else "Slightly Inconsistent")

    r = row(audit(flips, repeats=1, probes=False))
    assert r["swap_consistency"] == 1.0
    assert r["swap_label_unchanged"] == 0.0


def test_a_judge_moved_by_padding_fails_the_padding_probe():
    from safecons.reliability import PADDING_FILLER

    def padded(messages, temperature):
        if PADDING_FILLER in messages[-1]["content"]:
            return verdict("Slightly Inconsistent")
        return fair(messages, temperature)

    r = row(audit(padded, repeats=1, swap=False))
    assert r["padded_unmoved"] == 0.0 and r["injection_unmoved"] == 1.0


def test_the_injection_probe_rotates_its_phrasings():
    result = audit(fair, repeats=1, swap=False)
    texts = result.calls.filter(condition="injected")
    assert texts.height == GOLDEN.height
    seen = set()
    for pair_id in texts["input_id"]:
        from safecons._audit_probes import _style

        seen.add(_style(pair_id))
    assert seen == {0, 1, 2}


def test_kappa_is_left_empty_where_a_group_has_one_gold_label():
    golden = GOLDEN.with_columns(
        family=pl.when(pl.col("gold") == "Consistent")
        .then(pl.lit("safe"))
        .otherwise(pl.lit("mixed"))
    )
    table = audit(fair, golden, repeats=1, swap=False, probes=False).table
    kappa = dict(table.filter(slice="family").select("group", "kappa").iter_rows())
    assert kappa["safe"] is None and kappa["mixed"] is not None


def test_null_families_are_a_named_group_and_a_lazy_golden_set_is_read():
    golden = GOLDEN.head(6).with_columns(
        template_family=pl.Series([None, "a", None, "a", "b", "b"], dtype=pl.String)
    )
    table = audit(fair, golden.lazy(), repeats=1, swap=False, probes=False).table
    none = table.filter(slice="template_family", group="(none)").row(0, named=True)
    assert none["n"] == 2 and none["n_judged"] == 2
    assert table.filter(slice="all")["stability"].item() is None  # one call per pair: no figure


def test_flags_and_retries_are_checked():
    with pytest.raises(sc.InputError, match="swap"):
        audit(fair, swap="no")
    with pytest.raises(sc.InputError, match="probes"):
        audit(fair, probes=0)
    with pytest.raises(sc.ConfigError, match="'n_judge_retries': -1 is out of range"):
        audit(fair, n_judge_retries=-1)
    # One spelling of an option for every front: the metric's config field, not retries=.
    with pytest.raises(sc.InputError, match=r"audit_judge: unknown option.*'retries'"):
        audit(fair, retries=1)
