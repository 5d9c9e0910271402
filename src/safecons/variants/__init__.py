"""Rows -> adversarial variants, seeded per ``input_id``.

Each row's query (its string prompt, or the content of the last user turn of its
conversation) is substituted into a toxicity template; with probability ``dpi_ratio`` the
result is further wrapped in a jailbreak template (the ``dpi`` variant). The draw for a row
depends only on the seed, the row's ``input_id`` and the template sets, so a variant is the
same whatever the row order, the batching or the process that computes it.

How a row draws (all from BLAKE2b digests; no process-salted ``hash()``, no library RNG
whose stream may change between versions):

- the kind, from ``(seed, input_id)`` alone: the row is ``dpi`` when a uniform number in
  [0, 1) falls below ``dpi_ratio``. Raising ``dpi_ratio`` therefore only turns ``toxicity``
  rows into ``dpi`` rows, never the reverse;
- the toxicity template, from ``(seed, input_id)`` and the toxicity set's fingerprint, drawn
  whatever the kind, so a ``dpi`` variant wraps the very prompt its row's ``toxicity`` variant
  would have been;
- the jailbreak template, from ``(seed, input_id)`` and the jailbreak set's fingerprint.

Templates are picked uniformly from each set sorted by id, so the order a set is passed in
does not matter.
"""

from ._variants import MESSAGES_DTYPE as MESSAGES_DTYPE
from ._variants import VARIANT_FIELDS as VARIANT_FIELDS
from ._variants import VARIANT_SCHEMA as VARIANT_SCHEMA
from ._variants import Variant as Variant
from ._variants import VariantKind as VariantKind
from ._variants import build_variants as build_variants
from ._variants import check_input_columns as check_input_columns
from ._variants import check_unique_ids as check_unique_ids
from ._variants import draw_variant as draw_variant
from ._variants import messages_for as messages_for
from ._variants import query_of as query_of
from ._variants import variant_expr as variant_expr
from ._variants import variant_schema as variant_schema

__all__ = (
    "MESSAGES_DTYPE",
    "VARIANT_FIELDS",
    "VARIANT_SCHEMA",
    "Variant",
    "VariantKind",
    "build_variants",
    "check_input_columns",
    "check_unique_ids",
    "draw_variant",
    "messages_for",
    "query_of",
    "variant_expr",
    "variant_schema",
)
