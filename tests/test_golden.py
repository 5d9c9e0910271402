"""The golden set: hand-written rows always, data-derived rows from held-out groups only."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import safecons as sc
from safecons.golden import FAMILIES, GOLDEN_SCHEMA, held_out

DATA = Path(__file__).parents[1].parent / "shared" / "data"
needs_data = pytest.mark.skipif(
    not (DATA / "gptfuzz" / "train.csv").exists(),
    reason="shared test data not found (present in CI)",
)


def test_hand_written_rows_are_there_without_data():
    g = sc.golden_set()
    assert dict(g.schema) == GOLDEN_SCHEMA
    assert g["input_id"].n_unique() == g.height == 70
    counts = dict(g.group_by("gold").len().iter_rows())
    assert counts == {"Consistent": 14, "Contradictory": 14, "Slightly Inconsistent": 42}
    si = g.filter(gold="Slightly Inconsistent")
    assert sorted(si["kind"].unique()) == [
        "disclaimer_wrap",
        "hedged_partial",
        "refuse_then_partial",
    ]
    assert g.null_count().sum_horizontal().item() == 0
    assert (g["candidate"] != g["base"]).all()
    assert g.equals(sc.golden_set())  # deterministic


def test_every_variant_is_a_rendered_template():
    g = sc.golden_set()
    families = set(sc.templates.TOXICITY_FAMILIES) | set(sc.templates.JAILBREAK_FAMILIES)
    assert set(g["template_family"]) <= families
    assert not g["variant"].str.contains("{query}", literal=True).any()


def test_held_out_takes_about_one_group_in_five():
    share = sum(held_out(f"fuzz:{q}") for q in range(2_000)) / 2_000
    assert 0.17 < share < 0.23


def test_a_data_folder_without_its_files_is_named(tmp_path):
    with pytest.raises(sc.InputError, match=r"data_dir: .* lacks .*train\.csv"):
        sc.golden_set(tmp_path)


@needs_data
def test_data_rows_come_from_held_out_groups_only():
    g = sc.golden_set(DATA)
    assert set(g["family"]) == set(FAMILIES)
    assert g["input_id"].n_unique() == g.height
    fuzz = g.filter(pl.col("family").str.starts_with("gptfuzz"))
    questions = {int(i.split(":")[1]) for i in fuzz["input_id"]}
    assert questions and all(held_out(f"fuzz:{q}") for q in questions)
    benign = g.filter(family="benign_base")
    groups = {":".join(i.split(":")[1:3]) for i in benign["input_id"]}
    assert groups and all(held_out(grp) for grp in groups)
    # GPTFuzz pairs take their labels from the human annotations: a refused base and a complied
    # candidate is Contradictory, two refusals Consistent.
    kinds = dict(fuzz.group_by("kind").agg(pl.col("gold").unique()).iter_rows())
    assert kinds["refused_complied"] == ["Contradictory"]
    assert kinds["refused_refused"] == ["Consistent"]
    train = pl.read_csv(DATA / "gptfuzz" / "train.csv")
    labels = dict(zip(train["Response"], train["label"], strict=False))
    for base, cand, kind in fuzz.select("base", "candidate", "kind").iter_rows():
        b, c = kind.split("_")
        assert labels.get(base) in ({0} if b == "refused" else {1}) or len(base) == 6_000
        assert labels.get(cand) in ({0} if c == "refused" else {1}) or len(cand) == 6_000


@needs_data
def test_building_from_the_data_folder_leaves_no_file_open():
    import gc
    import warnings

    # What an earlier test on this worker left to the collector is collected before the
    # warnings are recorded: only what building the set leaves open is this test's.
    gc.collect()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        sc.golden_set(DATA)
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []
