"""Published figures reproduced from the licensed test data (skipped when it is absent)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl
import pytest

import safecons.reliability as rel
from safecons.errors import InputError

RUN = ["dataset", "judge", "prompting"]


def _count(field: str) -> int:
    # statistics.json stores counts as "138 / 200 = 69.0%".
    return int(field.split("/", maxsplit=1)[0])


@pytest.fixture
def llmbar(shared_data: Path) -> pl.DataFrame:
    return rel.read_llmbar(shared_data / "llmbar")


def _llmbar_table(df: pl.DataFrame) -> pl.DataFrame:
    order_x = rel.agreement(df, pred="winner_xy", gold="gold", by=RUN)
    order_y = rel.agreement(df, pred="winner_yx", gold="gold", by=RUN)
    both = rel.agreement(df, pred="verdict", gold="gold", by=RUN)
    # The authors' binarisation: output_1 named the winner -> 1, anything else (null too) -> 0.
    first = (pl.col("winner_xy") == "x").cast(pl.Int8)
    second = (pl.col("winner_yx") == "x").cast(pl.Int8)
    extra = df.group_by(RUN).agg(
        kappa=rel.cohen_kappa(first, second),
        both_null=((pl.col("letter_xy") == "error") & (pl.col("letter_yx") == "error")).sum(),
        n=pl.len(),
    )
    return (
        rel.position_bias(df, by=RUN)
        .join(order_x.select(*RUN, correct_false="n_agree_s1"), on=RUN)
        .join(order_y.select(*RUN, correct_true="n_agree_s1"), on=RUN)
        .join(both.select(*RUN, correct_both="n_agree_s1"), on=RUN)
        .join(extra, on=RUN)
    )


def test_llmbar_all_sixteen_runs_match_published_statistics(
    shared_data: Path, llmbar: pl.DataFrame
) -> None:
    table = _llmbar_table(llmbar)
    assert table.height == 16
    null_pairs = {}
    for row in table.iter_rows(named=True):
        folder = shared_data / "llmbar" / row["dataset"] / "evaluators" / row["judge"]
        stats = json.loads((folder / row["prompting"] / "statistics.json").read_text())
        where = "/".join(row[k] for k in RUN)
        # The authors count null == null as "equal"; our consistent class needs two usable
        # letters, so the both-null pairs are reported beside it rather than folded in.
        assert _count(stats["equal"]) == row["consistent"] + row["both_null"], where
        assert _count(stats["correct_False"]) == row["correct_false"], where
        assert _count(stats["correct_True"]) == row["correct_true"], where
        assert _count(stats["correct_both"]) == row["correct_both"], where
        assert abs(stats["kappa_agreement"] - row["kappa"]) <= 1e-12, where
        if row["n_error"]:
            null_pairs[where] = (row["n_error"], row["both_null"])
    # Pairs with a null verdict (either order, both orders), reported separately.
    assert null_pairs == {
        "MT-Bench/PaLM2/Metrics_Reference": (10, 8),
        "MT-Bench/PaLM2/Vanilla_NoRules": (8, 7),
        "FairEval/PaLM2/Vanilla_NoRules": (1, 0),
    }


def test_llmbar_loader_shape(llmbar: pl.DataFrame) -> None:
    sizes = llmbar.group_by("dataset").agg(pl.col("item").n_unique()).sort("dataset")
    assert sizes.rows() == [("FairEval", 66), ("MT-Bench", 200)]
    assert set(llmbar["gold"].unique()) == {"x", "y"}
    assert set(llmbar["letter_xy"].unique()) <= {"A", "B", "error"}
    assert llmbar.columns[-2:] == ["verdict_xy_raw", "verdict_yx_raw"]


def test_llmbar_single_file(shared_data: Path) -> None:
    folder = shared_data / "llmbar" / "FairEval" / "evaluators" / "GPT-4" / "Vanilla_NoRules"
    one = rel.read_llmbar(folder / "result.json")
    assert one.height == 66
    assert one.select(RUN).unique().rows() == [("FairEval", "GPT-4", "Vanilla_NoRules")]


@pytest.fixture
def pandalm(shared_data: Path) -> pl.DataFrame:
    return rel.read_pandalm(shared_data / "pandalm" / "testset-v1.json")


RATERS = ["annotator1", "annotator2", "annotator3"]


def test_pandalm_published_kappas_and_majority(pandalm: pl.DataFrame) -> None:
    kappas = pandalm.select(
        k12=rel.cohen_kappa("annotator1", "annotator2"),
        k13=rel.cohen_kappa("annotator1", "annotator3"),
        k23=rel.cohen_kappa("annotator2", "annotator3"),
    ).row(0)
    assert [round(k, 2) for k in kappas] == [0.85, 0.88, 0.86]
    counts = dict(pandalm["majority"].value_counts().iter_rows())
    assert counts == {"tie": 105, "x": 422, "y": 472}


def _reference_fleiss(rows: list[tuple[str, ...]]) -> float:
    n, big_n = len(rows[0]), len(rows)
    cats = sorted({v for r in rows for v in r})
    p_bar = sum((sum(r.count(c) ** 2 for c in cats) - n) / (n * (n - 1)) for r in rows) / big_n
    p_e = sum((sum(r.count(c) for r in rows) / (big_n * n)) ** 2 for c in cats)
    return (p_bar - p_e) / (1 - p_e)


def _reference_alpha(rows: list[tuple[str, ...]]) -> float:
    cats = sorted({v for r in rows for v in r})
    # With every item rated by all m raters, o_ck = sum over items of n_c * n_k' / (m - 1).
    o = {(c, k): 0.0 for c in cats for k in cats}
    for r in rows:
        m = len(r)
        for c in cats:
            for k in cats:
                pairs = r.count(c) * (r.count(k) - (c == k))
                o[(c, k)] += pairs / (m - 1)
    n_c = {c: sum(o[(c, k)] for k in cats) for c in cats}
    n = sum(n_c.values())
    d_o = sum(v for (c, k), v in o.items() if c != k)
    d_e = sum(n_c[c] * n_c[k] for c in cats for k in cats if c != k) / (n - 1)
    return 1 - d_o / d_e


def test_pandalm_panel_statistics_match_reference(pandalm: pl.DataFrame) -> None:
    rows = pandalm.select(RATERS).rows()
    fk = rel.fleiss_kappa(pandalm, raters=RATERS).row(0, named=True)
    ka = rel.krippendorff_alpha(pandalm, raters=RATERS).row(0, named=True)
    assert (fk["n_items"], fk["n_raters"]) == (999, 3)
    assert fk["fleiss_kappa"] == pytest.approx(_reference_fleiss(rows), abs=1e-12)
    assert (ka["n_items"], ka["n_values"]) == (999, 2997)
    assert ka["krippendorff_alpha"] == pytest.approx(_reference_alpha(rows), abs=1e-12)
    # Three raters who agree pairwise at about 0.86 agree as a panel at about that level too.
    assert 0.85 < fk["fleiss_kappa"] < 0.88


def test_pandalm_bootstrap_interval(pandalm: pl.DataFrame) -> None:
    out = rel.fleiss_kappa(pandalm, raters=RATERS, ci=0.95, n_boot=300, seed=0)
    r = out.row(0, named=True)
    assert r["fleiss_kappa_lo"] < r["fleiss_kappa"] < r["fleiss_kappa_hi"]
    assert r["fleiss_kappa_hi"] - r["fleiss_kappa_lo"] < 0.1


# --- FastChat: no redistributable file, so a small file in its exact format -----------------


def _fastchat_line(qid: int, g1: str, g2: str, turn: int = 1, **extra: object) -> str:
    rec = {
        "question_id": qid,
        "model_1": "vicuna-13b-v1.3",
        "model_2": "gpt-3.5-turbo",
        "g1_winner": g1,
        "g2_winner": g2,
        "judge": ["gpt-4", "pair-v2" if turn == 1 else "pair-v2-multi-turn"],
        "g1_user_prompt": "...",
        "g1_judgment": f"... [[{'A' if g1 == 'model_1' else 'B'}]]",
        "g2_user_prompt": "...",
        "g2_judgment": "...",
        "turn": turn,
        "tstamp": 1687000000.0,
    }
    rec.update(extra)
    return json.dumps(rec)


def test_fastchat_loader_maps_winners_back_to_letters(tmp_path: Path) -> None:
    lines = [
        _fastchat_line(81, "model_1", "model_1"),  # x wins both: A then B
        _fastchat_line(82, "model_2", "model_2", turn=2),  # y wins both: B then A
        _fastchat_line(83, "model_1", "model_2"),  # first slot both times: A, A
        _fastchat_line(84, "tie", "model_1"),  # C, B: recency
        _fastchat_line(85, "error", "tie"),
    ]
    path = tmp_path / "gpt-4_pair.jsonl"
    path.write_text("\n".join(lines) + "\n")
    questions = tmp_path / "question.jsonl"
    questions.write_text(
        "\n".join(
            json.dumps({"question_id": q, "category": c, "turns": ["..."]})
            for q, c in [(81, "writing"), (82, "math"), (83, "coding"), (84, "stem"), (85, "stem")]
        )
    )
    df = rel.read_fastchat_pairs(path, questions=questions)
    assert df["letter_xy"].to_list() == ["A", "B", "A", "C", "error"]
    assert df["letter_yx"].to_list() == ["B", "A", "A", "B", "C"]
    assert df["verdict"].to_list() == ["x", "y", "tie", "tie", "error"]
    assert df["position"].to_list() == ["consistent", "consistent", "primacy", "recency", "error"]
    assert df["category"].to_list() == ["writing", "math", "coding", "stem", "stem"]
    assert df["judge_prompt"][1] == "pair-v2-multi-turn"
    # One call from file to statistics, per turn.
    out = rel.position_bias(df, by="turn")
    assert out["n_pairs"].to_list() == [3, 1]


def test_fastchat_loader_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"question_id": 1, "model_1": "a", "model_2": "b"}) + "\n")
    with pytest.raises(InputError, match="line 1: field 'g1_winner' is missing"):
        rel.read_fastchat_pairs(bad)
    with pytest.raises(InputError, match="no file"):
        rel.read_fastchat_pairs(tmp_path / "absent.jsonl")


def test_pandalm_loader_rejects_unknown_label(tmp_path: Path) -> None:
    item = {"instruction": "i", "response1": "a", "response2": "b"}
    item |= {"annotator1": "1", "annotator2": "3", "annotator3": "0"}
    path = tmp_path / "t.json"
    path.write_text(json.dumps([item]))
    with pytest.raises(InputError, match="annotator2 is '3'"):
        rel.read_pandalm(path)


def test_no_nan_kappa_in_llmbar(llmbar: pl.DataFrame) -> None:
    table = _llmbar_table(llmbar)
    assert not any(math.isnan(k) for k in table["kappa"])


def test_llmbar_statistics_gives_the_authors_figures_for_all_sixteen_runs(
    shared_data: Path, llmbar: pl.DataFrame
) -> None:
    table = rel.llmbar_statistics(llmbar)
    assert table.height == 16 and table.columns[:3] == RUN
    for row in table.iter_rows(named=True):
        folder = shared_data / "llmbar" / row["dataset"] / "evaluators" / row["judge"]
        stats = json.loads((folder / row["prompting"] / "statistics.json").read_text())
        where = "/".join(row[k] for k in RUN)
        for name in ("equal", "correct_False", "correct_True", "correct_both"):
            assert row[name] == _count(stats[name]), (where, name)
        assert abs(row["kappa_agreement"] - stats["kappa_agreement"]) <= 1e-12, where


def test_llmbar_statistics_counts_null_with_null_as_equal_and_binarises_kappa() -> None:
    df = pl.DataFrame(
        {
            "letter_xy": ["A", "B", "error", "A"],
            "letter_yx": ["B", "B", "error", "A"],
            "gold": ["x", "y", "x", "y"],
        }
    ).with_columns(
        winner_xy=rel.winner_from_letter("letter_xy", shown_first="x"),
        winner_yx=rel.winner_from_letter("letter_yx", shown_first="y"),
        verdict=rel.both_orders_verdict("letter_xy", "letter_yx"),
    )
    row = rel.llmbar_statistics(df, by=None).row(0, named=True)
    # consistent: A/B (x both orders); B/B is primacy; error/error counts as equal.
    assert (row["n"], row["equal"], row["both_null"]) == (4, 2, 1)
    assert (row["correct_False"], row["correct_True"], row["correct_both"]) == (2, 2, 1)
    first, second = [1, 0, 0, 1], [1, 1, 0, 0]  # "x" (output_1) named -> 1, else 0
    from sklearn.metrics import cohen_kappa_score

    assert row["kappa_agreement"] == pytest.approx(cohen_kappa_score(first, second))
