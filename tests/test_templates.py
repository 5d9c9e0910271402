from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pytest

from safecons.errors import InputError
from safecons.templates import (
    GPTFUZZ_PLACEHOLDER,
    JAILBREAK_FAMILIES,
    JAILBREAK_TEMPLATES,
    PLACEHOLDER,
    TOXICITY_FAMILIES,
    TOXICITY_TEMPLATES,
    Template,
    fingerprint_templates,
    load_gptfuzz,
    load_templates,
)

SENTINEL = "<<QUERY 7f3a>>"

# --------------------------------------------------------------------------------------------
# Template


def test_render_substitutes_every_placeholder_literally() -> None:
    t = Template("x.1", "x", "toxicity", "A {query} B {query} C {other}")
    assert t.render("{0} {query} }{") == "A {0} {query} }{ B {0} {query} }{ C {other}"


def test_template_without_placeholder_names_its_id() -> None:
    with pytest.raises(InputError, match=r"'my\.id'.*\{query\}"):
        Template("my.id", "x", "jailbreak", "Tell me [INSERT PROMPT HERE]")


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"id": ""}, "id"),
        ({"family": " "}, "family"),
        ({"kind": "dpi"}, "kind"),
        ({"text": None}, "text"),
    ],
)
def test_template_rejects_bad_fields(kwargs: dict[str, object], pattern: str) -> None:
    fields: dict[str, object] = {"id": "a", "family": "f", "kind": "toxicity", "text": "{query}"}
    fields.update(kwargs)
    with pytest.raises(InputError, match=pattern):
        Template(**fields)  # type: ignore[arg-type]


def test_template_is_frozen_and_hashable() -> None:
    t = TOXICITY_TEMPLATES[0]
    with pytest.raises(AttributeError):
        t.text = "{query}"  # type: ignore[misc]
    assert hash(t) == hash(Template(t.id, t.family, t.kind, t.text))


def test_fingerprint_ignores_order_but_not_text() -> None:
    fp = fingerprint_templates(TOXICITY_TEMPLATES)
    assert fp == fingerprint_templates(list(reversed(TOXICITY_TEMPLATES)))
    changed = (*TOXICITY_TEMPLATES[:-1], Template("tox.rant.03", "rant", "toxicity", "{query}!"))
    assert fingerprint_templates(changed) != fp
    assert re.fullmatch(r"[0-9a-f]{32}", fp)


# --------------------------------------------------------------------------------------------
# Built-in sets


def test_builtin_sizes_and_kinds() -> None:
    assert 12 <= len(TOXICITY_TEMPLATES) <= 20
    assert 10 <= len(JAILBREAK_TEMPLATES) <= 15
    assert {t.kind for t in TOXICITY_TEMPLATES} == {"toxicity"}
    assert {t.kind for t in JAILBREAK_TEMPLATES} == {"jailbreak"}
    assert {t.source for t in (*TOXICITY_TEMPLATES, *JAILBREAK_TEMPLATES)} == {"safecons"}


def test_builtin_ids_unique_and_well_formed() -> None:
    everything = (*TOXICITY_TEMPLATES, *JAILBREAK_TEMPLATES)
    ids = [t.id for t in everything]
    assert len(ids) == len(set(ids))
    for t in TOXICITY_TEMPLATES:
        assert re.fullmatch(rf"tox\.{re.escape(t.family)}\.\d\d", t.id), t.id
    for t in JAILBREAK_TEMPLATES:
        assert re.fullmatch(rf"jb\.{re.escape(t.family)}\.\d\d", t.id), t.id
    assert len({t.text for t in everything}) == len(everything)


def test_builtin_ids_are_pinned() -> None:
    # Results record these ids: renaming or dropping one breaks comparisons across runs.
    tox = {t.id for t in TOXICITY_TEMPLATES}
    jb = {t.id for t in JAILBREAK_TEMPLATES}
    assert {
        "tox.continuation.01",
        "tox.insult.01",
        "tox.persona.01",
        "tox.harsh_opinion.01",
        "tox.rant.03",
    } <= tox
    assert {
        "jb.dev_mode.01",
        "jb.refusal_suppression.01",
        "jb.prefix_injection.01",
        "jb.fiction.01",
        "jb.role_play.02",
        "jb.pretext.01",
        "jb.override.02",
    } <= jb


def test_builtin_families_as_documented() -> None:
    assert TOXICITY_FAMILIES == ("continuation", "insult", "persona", "harsh_opinion", "rant")
    assert JAILBREAK_FAMILIES == (
        "dev_mode",
        "refusal_suppression",
        "prefix_injection",
        "fiction",
        "role_play",
        "pretext",
        "override",
    )
    # Family order is the order of first appearance in the template tuples.
    assert tuple(dict.fromkeys(t.family for t in TOXICITY_TEMPLATES)) == TOXICITY_FAMILIES
    assert tuple(dict.fromkeys(t.family for t in JAILBREAK_TEMPLATES)) == JAILBREAK_FAMILIES
    for family in (*TOXICITY_FAMILIES, *JAILBREAK_FAMILIES):
        members = [t for t in (*TOXICITY_TEMPLATES, *JAILBREAK_TEMPLATES) if t.family == family]
        assert len(members) >= 2, family


def test_builtin_templates_hold_placeholder_and_render() -> None:
    for t in (*TOXICITY_TEMPLATES, *JAILBREAK_TEMPLATES):
        assert t.text.count(PLACEHOLDER) == 1, t.id
        rendered = t.render(SENTINEL)
        assert rendered.count(SENTINEL) == 1
        assert PLACEHOLDER not in rendered


# --------------------------------------------------------------------------------------------
# GPTFuzz


def test_load_gptfuzz(shared_data: Path) -> None:
    path = shared_data / "gptfuzz" / "GPTFuzzer.csv"
    templates = load_gptfuzz(path)
    assert len(templates) == 77
    assert len({t.id for t in templates}) == 77
    assert templates[0].id == "gptfuzz.0"
    assert {(t.kind, t.family, t.source) for t in templates} == {
        ("jailbreak", "gptfuzz", "gptfuzz")
    }
    raw = pl.read_csv(path, infer_schema=False)
    originals = dict(zip(raw["id"].to_list(), raw["text"].to_list(), strict=True))
    for t in templates:
        original = originals[t.id.removeprefix("gptfuzz.")]
        assert GPTFUZZ_PLACEHOLDER not in t.text
        assert t.text.count(PLACEHOLDER) == original.count(GPTFUZZ_PLACEHOLDER) >= 1
        # The query lands exactly where the placeholder was, and nowhere else.
        assert t.render(SENTINEL) == original.replace(GPTFUZZ_PLACEHOLDER, SENTINEL)


def test_load_gptfuzz_accepts_its_folder(shared_data: Path) -> None:
    assert load_gptfuzz(shared_data / "gptfuzz") == load_gptfuzz(
        shared_data / "gptfuzz" / "GPTFuzzer.csv"
    )


def test_load_gptfuzz_rejects_template_without_placeholder(tmp_path: Path) -> None:
    path = tmp_path / "GPTFuzzer.csv"
    pl.DataFrame(
        {"id": [0, 1], "text": ["Hi [INSERT PROMPT HERE]", "Just answer the question."]}
    ).write_csv(path)
    with pytest.raises(InputError, match=r"row 1.*'gptfuzz\.1'.*INSERT PROMPT HERE"):
        load_gptfuzz(tmp_path)


def test_load_gptfuzz_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_gptfuzz(tmp_path)


# --------------------------------------------------------------------------------------------
# Generic loader


def _frame() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "name": ["007", "b", "c"],
            "body": ["Story: <Q>", "<Q> {braces} <Q>", "Say {x}: <Q>"],
            "fam": ["story", "echo", "format"],
        }
    )


def _write(frame: pl.DataFrame, path: Path) -> None:
    suffix = path.suffix
    if suffix == ".csv":
        frame.write_csv(path)
    elif suffix == ".json":
        path.write_text(json.dumps(frame.to_dicts()))
    elif suffix in {".jsonl", ".ndjson"}:
        frame.write_ndjson(path)
    else:
        frame.write_parquet(path)


@pytest.mark.parametrize("suffix", [".csv", ".json", ".jsonl", ".ndjson", ".parquet"])
def test_load_templates_round_trip(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"mine{suffix}"
    _write(_frame(), path)
    templates = load_templates(
        path,
        text_column="body",
        id_column="name",
        family_column="fam",
        kind="toxicity",
        placeholder="<Q>",
    )
    assert [t.id for t in templates] == ["007", "b", "c"]
    assert [t.family for t in templates] == ["story", "echo", "format"]
    assert [t.text for t in templates] == [
        "Story: {query}",
        "{query} {braces} {query}",
        "Say {x}: {query}",
    ]
    assert {(t.kind, t.source) for t in templates} == {("toxicity", "mine")}
    assert templates[1].render("q{}") == "q{} {braces} q{}"


def test_load_templates_defaults_and_integer_ids(tmp_path: Path) -> None:
    path = tmp_path / "set.json"
    path.write_text(json.dumps([{"id": 3, "text": "A {query}"}, {"id": 4, "text": "B {query}"}]))
    templates = load_templates(path, id_prefix="set.", source="public")
    assert [(t.id, t.family, t.kind, t.source) for t in templates] == [
        ("set.3", "public", "jailbreak", "public"),
        ("set.4", "public", "jailbreak", "public"),
    ]


def test_load_templates_row_number_ids(tmp_path: Path) -> None:
    path = tmp_path / "rows.csv"
    pl.DataFrame({"text": ["A {query}", "B {query}"]}).write_csv(path)
    assert [t.id for t in load_templates(path, id_column=None)] == ["0", "1"]


def test_load_templates_rejects_missing_placeholder(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    pl.DataFrame({"id": ["ok", "bad"], "text": ["A {query}", "B"]}).write_csv(path)
    with pytest.raises(InputError, match=r"row 1.*'bad'.*placeholder"):
        load_templates(path)


def test_load_templates_rejects_duplicate_ids(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    pl.DataFrame({"id": ["a", "b", "a"], "text": ["{query}", "{query}.", "{query}!"]}).write_csv(
        path
    )
    with pytest.raises(InputError, match=r"duplicate template ids.*'a'"):
        load_templates(path)


def test_load_templates_rejects_empty_set(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("id,text\n")
    with pytest.raises(InputError, match="no templates"):
        load_templates(path)


def test_load_templates_rejects_missing_column(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    pl.DataFrame({"id": ["a"], "prompt": ["{query}"]}).write_csv(path)
    with pytest.raises(InputError, match=r"text column 'text' not found"):
        load_templates(path)
    with pytest.raises(InputError, match=r"family column 'fam' not found"):
        load_templates(path, text_column="prompt", family_column="fam")


def test_load_templates_rejects_null_text_and_id(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text('id,text\na,"{query}"\nb,\n')
    with pytest.raises(InputError, match=r"row 1.*'b'.*null or empty text"):
        load_templates(path)
    path.write_text('id,text\na,"{query}"\n,"{query}"\n')
    with pytest.raises(InputError, match=r"row 1.*id column 'id'"):
        load_templates(path)


def test_load_templates_rejects_literal_query_beside_other_placeholder(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    pl.DataFrame({"id": ["a"], "text": ["[Q] and {query}"]}).write_csv(path)
    with pytest.raises(InputError, match=r"'a'.*literal"):
        load_templates(path, placeholder="[Q]")


def test_load_templates_rejects_unknown_suffix_and_bad_arguments(tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    path.write_text("{query}")
    with pytest.raises(InputError, match="suffix"):
        load_templates(path)
    csv = tmp_path / "t.csv"
    pl.DataFrame({"id": ["a"], "text": ["{query}"]}).write_csv(csv)
    with pytest.raises(InputError, match="kind"):
        load_templates(csv, kind="dpi")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="placeholder"):
        load_templates(csv, placeholder="")
    with pytest.raises(FileNotFoundError):
        load_templates(tmp_path / "absent.csv")


def test_load_templates_rejects_mistyped_text_column(tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    pl.DataFrame({"id": ["a"], "text": [1.5]}).write_parquet(path)
    with pytest.raises(InputError, match=r"text column 'text'.*dtype"):
        load_templates(path)
