"""Tables as the docs quote them."""

from __future__ import annotations

import polars as pl


def markdown(frame: pl.DataFrame) -> str:
    """``frame`` as a markdown table: floats to three decimals, numbers right-aligned."""

    def cell(v: object) -> str:
        return f"{v:.3f}" if isinstance(v, float) else str(v)

    head = "| " + " | ".join(frame.columns) + " |"
    rule = "|" + "|".join("---" if d == pl.String else "---:" for d in frame.dtypes) + "|"
    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.iter_rows()]
    return "\n".join([head, rule, *body])
