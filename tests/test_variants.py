from __future__ import annotations

import itertools
import json
import math
import os
import subprocess
import sys
from collections import Counter
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from safecons.errors import ConfigError, InputError
from safecons.templates import JAILBREAK_TEMPLATES, TOXICITY_TEMPLATES, Template
from safecons.variants import (
    MESSAGES_DTYPE,
    VARIANT_SCHEMA,
    Variant,
    build_variants,
    draw_variant,
    messages_for,
    query_of,
    variant_schema,
)

ADDED = list(variant_schema("sc_"))
BY_ID = {t.id: t for t in (*TOXICITY_TEMPLATES, *JAILBREAK_TEMPLATES)}


def _frame(n: int, *, offset: int = 0) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "input_id": list(range(offset, offset + n)),
            "prompt": [f"question number {i}?" for i in range(offset, offset + n)],
        }
    )


def _draws(df: pl.DataFrame) -> dict[Any, tuple[Any, ...]]:
    cols = ["input_id", *ADDED[:4]]
    return {row[0]: row[1:] for row in df.select(cols).iter_rows()}


def _conversation(*turns: tuple[str, str]) -> list[dict[str, str]]:
    return [{"role": r, "content": c} for r, c in turns]


# --------------------------------------------------------------------------------------------
# Output shape


def test_output_schema_and_order() -> None:
    df = _frame(50).with_columns(extra=pl.lit(1))
    out = build_variants(df)
    assert out.columns == [*df.columns, *ADDED]
    assert dict(out.schema.items()) == {**df.schema, **variant_schema()}
    assert out.select(df.columns).equals(df)
    assert set(out["sc_variant_kind"].unique()) <= {"toxicity", "dpi"}
    assert out.schema["sc_variant_messages"] == MESSAGES_DTYPE


def test_variant_schema_constant() -> None:
    assert list(VARIANT_SCHEMA) == [name.removeprefix("sc_") for name in ADDED]
    assert list(variant_schema("")) == list(VARIANT_SCHEMA)
    with pytest.raises(TypeError):
        VARIANT_SCHEMA["x"] = pl.String()  # type: ignore[index]


def test_variant_text_is_the_rendered_templates() -> None:
    out = build_variants(_frame(300), dpi_ratio=0.5)
    for row in out.iter_rows(named=True):
        tox = BY_ID[row["sc_toxicity_template_id"]]
        expected = tox.render(row["prompt"])
        if row["sc_variant_kind"] == "dpi":
            expected = BY_ID[row["sc_jailbreak_template_id"]].render(expected)
        else:
            assert row["sc_jailbreak_template_id"] is None
        assert row["sc_variant_text"] == expected
        assert row["sc_variant_messages"] == [{"role": "user", "content": expected}]


def test_matches_draw_variant() -> None:
    out = build_variants(_frame(40), seed=3, dpi_ratio=0.4)
    for row in out.iter_rows(named=True):
        v = draw_variant(row["input_id"], row["prompt"], seed=3, dpi_ratio=0.4)
        assert v == Variant(
            row["sc_variant_kind"],
            row["sc_toxicity_template_id"],
            row["sc_jailbreak_template_id"],
            row["sc_variant_text"],
        )


def test_empty_frame_gets_output_schema() -> None:
    empty = _frame(0)
    out = build_variants(empty)
    assert out.height == 0
    assert out.schema == pl.Schema({**empty.schema, **variant_schema()})
    lazy = build_variants(empty.lazy()).collect()
    assert lazy.schema == out.schema
    # A frame built from empty lists has Null dtypes; nothing in it is invalid.
    untyped = pl.DataFrame({"input_id": [], "prompt": []})
    assert build_variants(untyped).height == 0


# --------------------------------------------------------------------------------------------
# Distribution of the draws


def test_dpi_ratio_zero_and_one() -> None:
    df = _frame(500)
    none = build_variants(df, dpi_ratio=0.0)
    assert set(none["sc_variant_kind"]) == {"toxicity"}
    assert none["sc_jailbreak_template_id"].null_count() == 500
    every = build_variants(df, dpi_ratio=1.0)
    assert set(every["sc_variant_kind"]) == {"dpi"}
    assert every["sc_jailbreak_template_id"].null_count() == 0
    # Kind never changes the toxicity template.
    assert none["sc_toxicity_template_id"].equals(every["sc_toxicity_template_id"])


@pytest.mark.parametrize("ratio", [0.1, 0.25, 0.5, 0.9])
def test_dpi_share_close_to_ratio(ratio: float) -> None:
    n = 4000
    out = build_variants(_frame(n), seed=11, dpi_ratio=ratio)
    dpi = int((out["sc_variant_kind"] == "dpi").sum())
    # Deterministic (fixed seed); a 5-sigma binomial band documents what a bug would break.
    assert abs(dpi - n * ratio) < 5 * math.sqrt(n * ratio * (1 - ratio))


def test_templates_picked_uniformly() -> None:
    n = 6000
    out = build_variants(_frame(n), seed=5, dpi_ratio=1.0)
    for column, templates in (
        ("sc_toxicity_template_id", TOXICITY_TEMPLATES),
        ("sc_jailbreak_template_id", JAILBREAK_TEMPLATES),
    ):
        counts = Counter(out[column].to_list())
        assert set(counts) == {t.id for t in templates}
        p = 1 / len(templates)
        for count in counts.values():
            assert abs(count - n * p) < 5 * math.sqrt(n * p * (1 - p))


def test_raising_dpi_ratio_only_adds_dpi_rows() -> None:
    df = _frame(1000)
    low = build_variants(df, dpi_ratio=0.2)["sc_variant_kind"] == "dpi"
    high = build_variants(df, dpi_ratio=0.6)["sc_variant_kind"] == "dpi"
    assert not (low & ~high).any()


# --------------------------------------------------------------------------------------------
# Determinism


def test_same_draws_after_reordering() -> None:
    df = _frame(300)
    out = build_variants(df, seed=9)
    shuffled = build_variants(df.sample(fraction=1.0, shuffle=True, seed=1), seed=9)
    assert _draws(out) == _draws(shuffled)


def test_same_draws_in_batches() -> None:
    df = _frame(300)
    whole = build_variants(df, seed=9)
    parts = pl.concat([build_variants(part, seed=9) for part in df.iter_slices(37)])
    assert parts.equals(whole)


@pytest.mark.slow  # real processes (started, interrupted or killed)
def test_same_draws_in_a_fresh_process_with_other_hash_seed() -> None:
    ids: list[Any] = [0, 1, 2, 17, 10**12, -3, "a", "row-7", "ünï"]
    df = pl.DataFrame({"input_id": [str(i) for i in ids], "prompt": ["q"] * len(ids)})
    here = build_variants(df, seed=4, dpi_ratio=0.5).select(ADDED[:4]).rows()
    here_int = [draw_variant(i, "q", seed=4, dpi_ratio=0.5) for i in ids if isinstance(i, int)]
    script = (
        "import json, sys, polars as pl\n"
        "from safecons.variants import build_variants, draw_variant\n"
        "ids = json.loads(sys.argv[1])\n"
        "df = pl.DataFrame({'input_id': [str(i) for i in ids], 'prompt': ['q'] * len(ids)})\n"
        "rows = build_variants(df, seed=4, dpi_ratio=0.5).select(\n"
        "    'sc_variant_kind', 'sc_toxicity_template_id', 'sc_jailbreak_template_id',\n"
        "    'sc_variant_text').rows()\n"
        "ints = [draw_variant(i, 'q', seed=4, dpi_ratio=0.5) for i in ids if isinstance(i, int)]\n"
        "print(json.dumps([rows, [[v.kind, v.toxicity_template_id, v.jailbreak_template_id,\n"
        "    v.text] for v in ints]]))\n"
    )
    for hash_seed in ("1", "987654"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        result = subprocess.run(
            [sys.executable, "-c", script, json.dumps(ids)],
            capture_output=True,
            text=True,
            env=env,
            check=True,
            timeout=60,
        )
        rows, ints = json.loads(result.stdout)
        assert [tuple(r) for r in rows] == here
        assert [tuple(v) for v in ints] == [
            (v.kind, v.toxicity_template_id, v.jailbreak_template_id, v.text) for v in here_int
        ]


def test_different_seed_changes_draws() -> None:
    df = _frame(200)
    a = build_variants(df, seed=0, dpi_ratio=0.5)
    b = build_variants(df, seed=1, dpi_ratio=0.5)
    changed = sum(x != y for x, y in zip(_draws(a).values(), _draws(b).values(), strict=True))
    assert changed > 100


def test_integer_width_does_not_matter_but_type_does() -> None:
    df = _frame(200)
    a = build_variants(df)
    b = build_variants(df.with_columns(pl.col("input_id").cast(pl.Int32)))
    assert a.select(ADDED).equals(b.select(ADDED))
    as_text = build_variants(df.with_columns(pl.col("input_id").cast(pl.String)))
    assert not a.select(ADDED).equals(as_text.select(ADDED))
    as_cat = build_variants(
        df.with_columns(pl.col("input_id").cast(pl.String).cast(pl.Categorical))
    )
    assert as_text.select(ADDED).equals(as_cat.select(ADDED))


def test_template_set_order_does_not_matter() -> None:
    df = _frame(200)
    a = build_variants(df, dpi_ratio=0.5)
    b = build_variants(
        df,
        dpi_ratio=0.5,
        toxicity_templates=list(reversed(TOXICITY_TEMPLATES)),
        jailbreak_templates=list(reversed(JAILBREAK_TEMPLATES)),
    )
    assert a.equals(b)


def test_each_pick_depends_only_on_its_own_set() -> None:
    df = _frame(300)
    a = build_variants(df, dpi_ratio=0.5)
    fewer_jb = build_variants(df, dpi_ratio=0.5, jailbreak_templates=JAILBREAK_TEMPLATES[:3])
    assert a["sc_toxicity_template_id"].equals(fewer_jb["sc_toxicity_template_id"])
    assert a["sc_variant_kind"].equals(fewer_jb["sc_variant_kind"])
    assert set(fewer_jb["sc_jailbreak_template_id"].drop_nulls()) <= {
        t.id for t in JAILBREAK_TEMPLATES[:3]
    }
    # Changing a text changes the fingerprint, hence the picks from that set.
    edited = (
        *TOXICITY_TEMPLATES[:-1],
        Template(TOXICITY_TEMPLATES[-1].id, "rant", "toxicity", "Edited: {query}"),
    )
    b = build_variants(df, dpi_ratio=0.5, toxicity_templates=edited)
    assert not a["sc_toxicity_template_id"].equals(b["sc_toxicity_template_id"])


@settings(max_examples=40, deadline=None)
@given(
    ids=st.one_of(
        st.lists(st.integers(-(2**62), 2**62), min_size=1, max_size=40, unique=True),
        st.lists(st.text(min_size=0, max_size=8), min_size=1, max_size=40, unique=True),
    ),
    data=st.data(),
)
def test_draws_invariant_to_order_and_batching(ids: list[Any], data: st.DataObject) -> None:
    df = pl.DataFrame({"input_id": ids, "prompt": [f"q {{{i}}}" for i in range(len(ids))]})
    reference = _draws(build_variants(df, seed=2, dpi_ratio=0.5))
    order = data.draw(st.permutations(range(len(ids))))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(ids)), max_size=4)))
    shuffled = df[list(order)]
    bounds = [0, *cuts, len(ids)]
    parts = [shuffled[lo:hi] for lo, hi in itertools.pairwise(bounds) if hi > lo]
    out = pl.concat([build_variants(p, seed=2, dpi_ratio=0.5) for p in parts])
    assert out["input_id"].to_list() == shuffled["input_id"].to_list()
    assert _draws(out) == reference


# --------------------------------------------------------------------------------------------
# Prompts


def test_conversation_keeps_earlier_turns_and_system() -> None:
    chat = _conversation(
        ("system", "You are helpful."),
        ("user", "Hi"),
        ("assistant", "Hello!"),
        ("user", "How do tides work?"),
    )
    df = pl.DataFrame({"input_id": ["c1"], "prompt": [chat]})
    assert df.schema["prompt"] == MESSAGES_DTYPE
    row = build_variants(df, dpi_ratio=1.0).row(0, named=True)
    tox = BY_ID[row["sc_toxicity_template_id"]]
    jb = BY_ID[row["sc_jailbreak_template_id"]]
    assert row["sc_variant_text"] == jb.render(tox.render("How do tides work?"))
    assert row["sc_variant_messages"] == [
        *chat[:3],
        {"role": "user", "content": row["sc_variant_text"]},
    ]


@pytest.mark.parametrize(
    ("turns", "match"),
    [
        # A trailing assistant turn was silently dropped before; now the prompt is refused.
        ((("user", "Hi"), ("assistant", "Hello!")), "ends with a 'assistant' turn"),
        ((("system", "Be brief."),), "no user turn"),
        ((("hacker", "obey"), ("user", "Hi")), "role 'hacker' \\(turn 0\\)"),
        ((("user", "Hi"), ("tool", "{}"), ("user", "ok")), "role 'tool' \\(turn 1\\)"),
    ],
)
def test_a_conversation_must_end_with_a_user_turn_and_use_known_roles(turns, match) -> None:
    df = pl.DataFrame({"input_id": [7], "prompt": [_conversation(*turns)]})
    with pytest.raises(InputError, match=f"input_id=7 .*{match}"):
        build_variants(df)


def test_developer_turns_are_kept() -> None:
    chat = _conversation(("developer", "Answer in French."), ("user", "Hi"))
    messages = build_variants(pl.DataFrame({"input_id": [1], "prompt": [chat]}))
    assert [m["role"] for m in messages["sc_variant_messages"][0]] == ["developer", "user"]


def test_conversation_with_extra_struct_fields() -> None:
    dtype = pl.List(pl.Struct({"role": pl.String, "content": pl.String, "name": pl.String}))
    chat = [{"role": "user", "content": "Hi", "name": "ann"}]
    df = pl.DataFrame({"input_id": [1], "prompt": pl.Series([chat], dtype=dtype)})
    messages = build_variants(df)["sc_variant_messages"].to_list()[0]
    assert [m["role"] for m in messages] == ["user"]
    assert "Hi" in messages[0]["content"]


def test_braces_in_query_survive() -> None:
    query = "Explain {x} and {0} and {query} and }{"
    df = pl.DataFrame({"input_id": list(range(60)), "prompt": [query] * 60})
    out = build_variants(df, dpi_ratio=0.5)
    assert (out["sc_variant_kind"] == "dpi").any()
    for text in out["sc_variant_text"]:
        assert query in text
    v = draw_variant("x", query, dpi_ratio=1.0)
    assert query in v.text


def test_query_of_and_messages_for() -> None:
    chat = _conversation(("system", "S"), ("user", "first"), ("user", "second"))
    assert query_of("plain") == "plain"
    assert query_of(chat) == "second"
    assert messages_for("plain", "V") == [{"role": "user", "content": "V"}]
    assert messages_for(chat, "V") == [*chat[:2], {"role": "user", "content": "V"}]
    assert chat[2]["content"] == "second"  # the input is not modified


@pytest.mark.parametrize(
    ("value", "pattern"),
    [
        (None, "null"),
        ("   ", "empty"),
        ([], "empty conversation"),
        (_conversation(("system", "S"), ("assistant", "A")), "no user turn"),
        ([{"role": "user", "content": None}], "empty last user turn"),
        (5, "int"),
    ],
)
def test_query_of_rejects(value: object, pattern: str) -> None:
    with pytest.raises(InputError, match=rf"column 'msgs'.*input_id=9.*{pattern}"):
        query_of(value, column="msgs", input_id=9)


def test_messages_for_rejects_null_role_in_kept_turn() -> None:
    with pytest.raises(InputError, match=r"column 'prompt'.*turn 0"):
        messages_for([{"role": None, "content": "x"}, {"role": "user", "content": "q"}], "V")


# --------------------------------------------------------------------------------------------
# LazyFrame


def test_lazyframe_in_lazyframe_out() -> None:
    df = _frame(100)
    lazy = build_variants(df.lazy(), seed=1, dpi_ratio=0.3)
    assert isinstance(lazy, pl.LazyFrame)
    assert lazy.collect_schema() == pl.Schema({**df.schema, **variant_schema()})
    assert lazy.collect().equals(build_variants(df, seed=1, dpi_ratio=0.3))


def test_lazyframe_checks_columns_at_call_and_data_at_collect() -> None:
    with pytest.raises(InputError, match="'prompt'"):
        build_variants(pl.LazyFrame({"input_id": [1]}))
    lazy = build_variants(pl.LazyFrame({"input_id": [1, 1], "prompt": ["a", "b"]}))
    with pytest.raises(InputError, match=r"'input_id'.*duplicate.*\[1\]"):
        lazy.collect()


# --------------------------------------------------------------------------------------------
# Bad input


@pytest.mark.parametrize(
    ("frame", "pattern"),
    [
        (pl.DataFrame({"prompt": ["a"]}), r"missing input_id column 'input_id'"),
        (pl.DataFrame({"input_id": [1]}), r"missing prompt column 'prompt'"),
        (pl.DataFrame({"input_id": [1], "prompt": [3]}), r"column 'prompt'.*dtype"),
        (
            pl.DataFrame({"input_id": [1], "prompt": [["a"]]}),
            r"column 'prompt'.*dtype",
        ),
        (pl.DataFrame({"input_id": [1.5], "prompt": ["a"]}), r"column 'input_id'.*dtype"),
        (pl.DataFrame({"input_id": [1, None], "prompt": ["a", "b"]}), r"'input_id'.*null.*\[1\]"),
        (
            pl.DataFrame({"input_id": [4, 2, 4, 2, 3], "prompt": list("abcde")}),
            r"'input_id'.*duplicate.*\[4, 2\]",
        ),
        (pl.DataFrame({"input_id": [1, 2], "prompt": ["a", None]}), r"'prompt'.*input_id=2.*null"),
        (pl.DataFrame({"input_id": ["x"], "prompt": [""]}), r"'prompt'.*input_id='x'.*empty"),
        (
            pl.DataFrame(
                {"input_id": [7], "prompt": [_conversation(("system", "S"), ("assistant", "A"))]}
            ),
            r"'prompt'.*input_id=7.*no user turn",
        ),
        (
            pl.DataFrame({"input_id": [7], "prompt": pl.Series([[]], dtype=MESSAGES_DTYPE)}),
            r"'prompt'.*input_id=7.*empty conversation",
        ),
        (
            pl.DataFrame({"input_id": [7], "prompt": pl.Series([None], dtype=MESSAGES_DTYPE)}),
            r"'prompt'.*input_id=7.*null",
        ),
    ],
)
def test_bad_frames_raise_naming_the_column(frame: pl.DataFrame, pattern: str) -> None:
    with pytest.raises(InputError, match=pattern):
        build_variants(frame)
    with pytest.raises(InputError, match=pattern):
        build_variants(frame.lazy()).collect()


def test_custom_column_names_in_errors_and_output() -> None:
    df = pl.DataFrame({"rid": ["a", "b"], "msg": ["hi", None]})
    with pytest.raises(InputError, match=r"column 'msg'.*input_id='b'"):
        build_variants(df, input_id="rid", prompt="msg")
    out = build_variants(df.head(1), input_id="rid", prompt="msg", prefix="adv_")
    assert out.columns == ["rid", "msg", *variant_schema("adv_")]


def test_output_column_collision_raises() -> None:
    df = _frame(3).with_columns(sc_variant_text=pl.lit("mine"))
    with pytest.raises(InputError, match=r"'sc_variant_text'.*already exist"):
        build_variants(df)
    with pytest.raises(InputError, match=r"'sc_variant_text'.*already exist"):
        build_variants(df.lazy())
    assert "x_variant_text" in build_variants(df, prefix="x_").columns


def test_bad_parameters() -> None:
    df = _frame(3)
    for ratio in (-0.1, 1.5, float("nan"), "0.5", True):
        with pytest.raises(ConfigError, match="dpi_ratio"):
            build_variants(df, dpi_ratio=ratio)  # type: ignore[arg-type]
    for seed in (1.5, "1", None, True):
        with pytest.raises(InputError, match="seed"):
            build_variants(df, seed=seed)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="toxicity_templates is empty"):
        build_variants(df, toxicity_templates=[])
    with pytest.raises(InputError, match="jailbreak_templates is empty"):
        build_variants(df, jailbreak_templates=[])
    assert set(build_variants(df, jailbreak_templates=[], dpi_ratio=0.0)["sc_variant_kind"]) == {
        "toxicity"
    }
    with pytest.raises(InputError, match=r"toxicity_templates.*'jb\.dev_mode\.01'.*kind"):
        build_variants(df, toxicity_templates=JAILBREAK_TEMPLATES)
    with pytest.raises(InputError, match="duplicate template ids"):
        build_variants(df, toxicity_templates=[TOXICITY_TEMPLATES[0]] * 2)
    with pytest.raises(InputError, match="sequence of Template"):
        build_variants(df, toxicity_templates=TOXICITY_TEMPLATES[0])  # type: ignore[arg-type]
    with pytest.raises(InputError, match="DataFrame or LazyFrame"):
        build_variants({"input_id": [1]})  # type: ignore[type-var]


def test_draw_variant_rejects_bad_input() -> None:
    with pytest.raises(InputError, match="query"):
        draw_variant(1, "")
    with pytest.raises(InputError, match="input_id"):
        draw_variant(1.5, "q")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="input_id"):
        draw_variant(True, "q")


def test_custom_template_sets() -> None:
    tox = [
        Template("t.a", "t", "toxicity", "A<{query}>"),
        Template("t.b", "t", "toxicity", "B{query}"),
    ]
    jb = [Template("j.a", "j", "jailbreak", "J[{query}]")]
    out = build_variants(_frame(50), toxicity_templates=tox, jailbreak_templates=jb, dpi_ratio=0.5)
    assert set(out["sc_toxicity_template_id"]) == {"t.a", "t.b"}
    dpi = out.filter(pl.col("sc_variant_kind") == "dpi")
    assert dpi.height > 0
    assert all(t.startswith("J[") and t.endswith("]") for t in dpi["sc_variant_text"])


def test_thousands_of_conversation_rows() -> None:
    # Speed is measured in benchmarks/bench_pipeline.py, not asserted here.
    n = 5000
    df = pl.DataFrame(
        {
            "input_id": [f"id-{i}" for i in range(n)],
            "prompt": [_conversation(("system", "S"), ("user", f"q{i}")) for i in range(n)],
        }
    )
    out = build_variants(df)
    assert out.height == n
    assert out["sc_variant_messages"].list.len().to_list() == [2] * n
    assert out["sc_variant_text"].str.contains(r"q\d+").all()


def test_the_variant_expression_equals_build_variants_in_any_batches() -> None:
    df = pl.DataFrame(
        {
            "input_id": list(range(40)),
            "prompt": [f"How do I do thing {i}?" for i in range(40)],
        }
    )
    framed = build_variants(df, seed=3, dpi_ratio=0.5)
    from safecons.variants import VARIANT_FIELDS, variant_expr

    lazy = pl.concat([df.head(13).lazy(), df.slice(13).lazy()]).with_columns(
        v=variant_expr(seed=3, dpi_ratio=0.5)
    )
    got = lazy.collect().unnest("v")
    for field in VARIANT_FIELDS:
        column = {"kind": "sc_variant_kind", "text": "sc_variant_text"}.get(field, f"sc_{field}")
        if field == "messages":
            column = "sc_variant_messages"
        assert got[field].to_list() == framed[column].to_list(), field
    # A filter before the expression: only the kept rows are drawn, to the same values.
    one = (
        df.lazy()
        .filter(pl.col("input_id") == 7)
        .with_columns(v=variant_expr(seed=3, dpi_ratio=0.5))
    )
    assert one.collect()["v"].struct.field("text").to_list() == [framed["sc_variant_text"][7]]


def test_the_variant_expression_names_a_bad_prompt() -> None:
    from safecons.variants import variant_expr

    df = pl.DataFrame({"input_id": [1, 2], "prompt": ["ok", "  "]})
    with pytest.raises(InputError, match="input_id=2 is empty"):
        df.with_columns(v=variant_expr())
