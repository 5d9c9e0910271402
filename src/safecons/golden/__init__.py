"""A golden set for the safety-consistency judge: labelled (query, variant, base, candidate).

:func:`golden_set` builds it. Its hand-written rows (our own text, shipped with safecons) are
always there; rows derived from public data are added when ``data_dir`` points at the project's
data folder (GPTFuzz and LLMBar/PandaLM, never copied into the package). See
``docs/judges.md``, "The golden set", for every family and how its gold label is decided.
"""

from ._build import FAMILIES as FAMILIES
from ._build import GOLDEN_SCHEMA as GOLDEN_SCHEMA
from ._build import benign_questions as benign_questions
from ._build import golden_set as golden_set
from ._build import held_out as held_out

__all__ = ("FAMILIES", "GOLDEN_SCHEMA", "benign_questions", "golden_set", "held_out")
