"""Everything about judging safety posture.

- :mod:`._llm`: the LLM judge's prompt, its structured-output schema, the label bands, the
  parser of its verdicts, and :class:`LLMJudge` (its settings).
- :mod:`._protocol`: :class:`PostureJudge`, a judge that compares two answers directly (the
  shape an offline classifier takes), and the validation of what it returns.

- :mod:`._posture`: :class:`PostureClassifier`, one answer's posture (complied or refused),
  offline, numpy alone; :func:`posture` and :func:`posture_proba` as expressions.

- :mod:`._harm`: :class:`HarmClassifier`, harmful or toxic content, offline, the same way.
- :mod:`._acts`: refusal as an act (the sentences in which an answer declines).
- :mod:`._disguise`: the forms an answer may hide content in, brought into the open.

- :mod:`._offline`: :class:`OfflineJudge`, the metric's judge offline: the judge prompt's
  posture semantics on top of the posture classifier; :mod:`._reading`, how one answer
  reads to it (:mod:`._addressed`: lines addressed to the evaluator, set aside);
  :mod:`._identity`, the digest of its verdicts its cache identity carries; :mod:`._postures`,
  :func:`answer_postures`.
- :mod:`.training`: what the scripts that train the shipped models compute the way the
  models read it (public on purpose: the research folder trains with it).
"""

from . import training as training
from ._harm import HarmClassifier as HarmClassifier
from ._llm import JUDGE_RESPONSE_FORMAT as JUDGE_RESPONSE_FORMAT
from ._llm import JUDGE_SYSTEM_PROMPT as JUDGE_SYSTEM_PROMPT
from ._llm import LABEL_BANDS as LABEL_BANDS
from ._llm import LABELS as LABELS
from ._llm import MAX_JUDGE_OUTPUT_CHARS as MAX_JUDGE_OUTPUT_CHARS
from ._llm import MAX_JUDGED_CHARS as MAX_JUDGED_CHARS
from ._llm import NOMINAL_SCORES as NOMINAL_SCORES
from ._llm import Judgment as Judgment
from ._llm import JudgmentError as JudgmentError
from ._llm import LLMJudge as LLMJudge
from ._llm import build_judge_messages as build_judge_messages
from ._llm import clamp_to_band as clamp_to_band
from ._llm import fit_for_judge as fit_for_judge
from ._llm import parse_judgment as parse_judgment
from ._llm import top_level_objects as top_level_objects
from ._offline import OFFLINE_JUDGE_LIMITS as OFFLINE_JUDGE_LIMITS
from ._offline import OfflineJudge as OfflineJudge
from ._posture import PostureClassifier as PostureClassifier
from ._posture import posture as posture
from ._posture import posture_proba as posture_proba
from ._postures import PostureMemo as PostureMemo
from ._postures import answer_postures as answer_postures
from ._protocol import PostureJudge as PostureJudge
from ._protocol import judgment_from as judgment_from
from ._reading import POSTURES as POSTURES

__all__ = (
    "JUDGE_RESPONSE_FORMAT",
    "JUDGE_SYSTEM_PROMPT",
    "LABELS",
    "LABEL_BANDS",
    "MAX_JUDGED_CHARS",
    "MAX_JUDGE_OUTPUT_CHARS",
    "NOMINAL_SCORES",
    "OFFLINE_JUDGE_LIMITS",
    "POSTURES",
    "HarmClassifier",
    "Judgment",
    "JudgmentError",
    "LLMJudge",
    "OfflineJudge",
    "PostureClassifier",
    "PostureJudge",
    "PostureMemo",
    "answer_postures",
    "build_judge_messages",
    "clamp_to_band",
    "fit_for_judge",
    "judgment_from",
    "parse_judgment",
    "posture",
    "posture_proba",
    "top_level_objects",
)
