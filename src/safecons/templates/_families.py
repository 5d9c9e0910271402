"""The family of a template, read from its id: the groups :func:`~safecons.score_table` derives."""

from __future__ import annotations

import polars as pl

from ..config import DEFAULT_PREFIX

__all__ = ("template_families", "template_family")


def template_family(ids: pl.Expr) -> pl.Expr:
    """The family of each template id in ``ids``: a built-in id's middle part
    (``tox.insult.02``: ``insult``), a loaded set's name (``gptfuzz.12``: ``gptfuzz``), else
    the id itself.

    Examples
    --------
    >>> import polars as pl
    >>> ids = pl.DataFrame({"id": ["tox.insult.02", "gptfuzz.12", "x"]})
    >>> ids.select(template_family(pl.col("id")))["id"].to_list()
    ['insult', 'gptfuzz', 'x']
    """
    # Built-in ids are "tox.<family>.<n>" / "jb.<family>.<n>"; a loaded set's are
    # "<set>.<id>" (GPTFuzz: "gptfuzz.12"), whose family is the set.
    builtin = ids.str.extract(r"^(?:tox|jb)\.([A-Za-z0-9_]+)\.\d+$", 1)
    return pl.coalesce(builtin, ids.str.extract(r"^([^.]+)\.", 1), ids)


def template_families(prefix: str = DEFAULT_PREFIX) -> list[pl.Expr]:
    """Expressions for the ``toxicity_family`` and ``jailbreak_family`` of each row's variant.

    Examples
    --------
    >>> import polars as pl
    >>> df = pl.DataFrame({"sc_toxicity_template_id": ["tox.insult.02", "mine.7"],
    ...                    "sc_jailbreak_template_id": ["gptfuzz.12", None]})
    >>> df.select(template_families()).rows()
    [('insult', 'gptfuzz'), ('mine', None)]
    """
    return [
        template_family(pl.col(f"{prefix}toxicity_template_id")).alias("toxicity_family"),
        template_family(pl.col(f"{prefix}jailbreak_template_id")).alias("jailbreak_family"),
    ]
