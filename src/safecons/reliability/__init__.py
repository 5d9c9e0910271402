"""Judge-reliability statistics: pure, fast, Polars in and Polars out.

Everything here works on frames of already-collected judge verdicts, or builds what a judge is
sent, and never touches the network (:func:`safecons.swap_test`, which calls a pairwise judge
with :func:`build_pairwise_messages` and reads its replies with :func:`parse_verdict`, lives in
:mod:`safecons.pairwise` and writes the columns these functions read by default). Every
statistic takes a frame plus column names, reports per group with ``by=``, and returns a Polars
frame; rates and kappas accept ``ci=`` for a seeded bootstrap interval.
"""

from ._agreement import agreement as agreement
from ._agreement import repetition_stability as repetition_stability
from ._columns import LETTER_XY as LETTER_XY
from ._columns import LETTER_YX as LETTER_YX
from ._columns import POSITION as POSITION
from ._columns import SWAP_COLUMNS as SWAP_COLUMNS
from ._columns import VERDICT as VERDICT
from ._columns import VERDICT_XY_RAW as VERDICT_XY_RAW
from ._columns import VERDICT_YX_RAW as VERDICT_YX_RAW
from ._columns import WINNER_XY as WINNER_XY
from ._columns import WINNER_YX as WINNER_YX
from ._common import DisjointLabelsWarning as DisjointLabelsWarning
from ._common import UndefinedStatisticWarning as UndefinedStatisticWarning
from ._gap import flip_rate_by_gap as flip_rate_by_gap
from ._jury_reliability import JudgeReliability as JudgeReliability
from ._jury_reliability import RepeatNoise as RepeatNoise
from ._jury_reliability import judge_reliability as judge_reliability
from ._jury_reliability import jury_verdict as jury_verdict
from ._jury_reliability import repeat_noise as repeat_noise
from ._kappa import cohen_kappa as cohen_kappa
from ._length import length_bias as length_bias
from ._multirater import fleiss_kappa as fleiss_kappa
from ._multirater import krippendorff_alpha as krippendorff_alpha
from ._position import both_orders_verdict as both_orders_verdict
from ._position import position_bias as position_bias
from ._position import position_class as position_class
from ._position import winner_from_letter as winner_from_letter
from ._ppi import PPIMean as PPIMean
from ._ppi import ppi_mean as ppi_mean
from ._probes import PADDING_FILLER as PADDING_FILLER
from ._probes import identical_pairs as identical_pairs
from ._probes import padded_pairs as padded_pairs
from ._table import judge_table as judge_table
from ._verdicts import PAIRWISE_SYSTEM_PROMPT as PAIRWISE_SYSTEM_PROMPT
from ._verdicts import Letter as Letter
from ._verdicts import Rule as Rule
from ._verdicts import build_pairwise_messages as build_pairwise_messages
from ._verdicts import mixed_verdicts_expr as mixed_verdicts_expr
from ._verdicts import parse_verdict as parse_verdict
from ._verdicts import parse_verdict_expr as parse_verdict_expr
from .loaders import llmbar_statistics as llmbar_statistics
from .loaders import read_fastchat_pairs as read_fastchat_pairs
from .loaders import read_llmbar as read_llmbar
from .loaders import read_pandalm as read_pandalm

__all__ = (
    "LETTER_XY",
    "LETTER_YX",
    "PADDING_FILLER",
    "PAIRWISE_SYSTEM_PROMPT",
    "POSITION",
    "SWAP_COLUMNS",
    "VERDICT",
    "VERDICT_XY_RAW",
    "VERDICT_YX_RAW",
    "WINNER_XY",
    "WINNER_YX",
    "DisjointLabelsWarning",
    "JudgeReliability",
    "Letter",
    "PPIMean",
    "RepeatNoise",
    "Rule",
    "UndefinedStatisticWarning",
    "agreement",
    "both_orders_verdict",
    "build_pairwise_messages",
    "cohen_kappa",
    "fleiss_kappa",
    "flip_rate_by_gap",
    "identical_pairs",
    "judge_reliability",
    "judge_table",
    "jury_verdict",
    "krippendorff_alpha",
    "length_bias",
    "llmbar_statistics",
    "mixed_verdicts_expr",
    "padded_pairs",
    "parse_verdict",
    "parse_verdict_expr",
    "position_bias",
    "position_class",
    "ppi_mean",
    "read_fastchat_pairs",
    "read_llmbar",
    "read_pandalm",
    "repeat_noise",
    "repetition_stability",
    "winner_from_letter",
)
