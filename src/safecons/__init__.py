"""safecons: safety consistency of LLM systems, and judge-reliability tools, on Polars frames."""

from . import charts as charts
from ._demo import demo_frame as demo_frame
from .audit import JudgeAudit as JudgeAudit
from .audit import audit_judge as audit_judge
from .audit import audit_judge_async as audit_judge_async
from .clients import CallableClient as CallableClient
from .clients import ChatClient as ChatClient
from .clients import Completion as Completion
from .clients import OpenAICompatible as OpenAICompatible
from .config import SafetyConsistencyConfig as SafetyConsistencyConfig
from .config import manifest as manifest
from .errors import AuthenticationError as AuthenticationError
from .errors import CacheError as CacheError
from .errors import ConfigError as ConfigError
from .errors import InputError as InputError
from .errors import SafeconsError as SafeconsError
from .golden import golden_set as golden_set
from .judges import JUDGE_RESPONSE_FORMAT as JUDGE_RESPONSE_FORMAT
from .judges import LABELS as LABELS
from .judges import MAX_JUDGE_OUTPUT_CHARS as MAX_JUDGE_OUTPUT_CHARS
from .judges import MAX_JUDGED_CHARS as MAX_JUDGED_CHARS
from .judges import Judgment as Judgment
from .judges import LLMJudge as LLMJudge
from .judges import OfflineJudge as OfflineJudge
from .judges import PostureClassifier as PostureClassifier
from .judges import PostureJudge as PostureJudge
from .judges import build_judge_messages as build_judge_messages
from .judges import fit_for_judge as fit_for_judge
from .judges import parse_judgment as parse_judgment
from .judges import posture as posture
from .judges import posture_proba as posture_proba
from .metric import CallPlan as CallPlan
from .metric import RunSummary as RunSummary
from .metric import SafetyConsistencyRun as SafetyConsistencyRun
from .metric import judge_responses as judge_responses
from .metric import output_schema as output_schema
from .metric import planned_calls as planned_calls
from .metric import respond as respond
from .metric import respond_and_judge as respond_and_judge
from .metric import safety_consistency as safety_consistency
from .metric import safety_consistency_async as safety_consistency_async
from .metric import safety_consistency_run as safety_consistency_run
from .metric import score_expr as score_expr
from .pairwise import swap_test as swap_test
from .pairwise import swap_test_async as swap_test_async
from .reliability import PADDING_FILLER as PADDING_FILLER
from .reliability import DisjointLabelsWarning as DisjointLabelsWarning
from .reliability import UndefinedStatisticWarning as UndefinedStatisticWarning
from .reliability import agreement as agreement
from .reliability import both_orders_verdict as both_orders_verdict
from .reliability import build_pairwise_messages as build_pairwise_messages
from .reliability import cohen_kappa as cohen_kappa
from .reliability import fleiss_kappa as fleiss_kappa
from .reliability import flip_rate_by_gap as flip_rate_by_gap
from .reliability import identical_pairs as identical_pairs
from .reliability import judge_table as judge_table
from .reliability import krippendorff_alpha as krippendorff_alpha
from .reliability import length_bias as length_bias
from .reliability import mixed_verdicts_expr as mixed_verdicts_expr
from .reliability import padded_pairs as padded_pairs
from .reliability import parse_verdict as parse_verdict
from .reliability import parse_verdict_expr as parse_verdict_expr
from .reliability import position_bias as position_bias
from .reliability import position_class as position_class
from .reliability import read_fastchat_pairs as read_fastchat_pairs
from .reliability import read_llmbar as read_llmbar
from .reliability import read_pandalm as read_pandalm
from .reliability import repetition_stability as repetition_stability
from .reliability import winner_from_letter as winner_from_letter
from .report import report as report
from .report import report_html as report_html
from .run._cache import ResponseCache as ResponseCache
from .run._cache import get_default_cache as get_default_cache
from .run._cache import set_default_cache as set_default_cache
from .scores import compare_runs as compare_runs
from .scores import score_table as score_table
from .summary import run_summary as run_summary
from .templates import JAILBREAK_FAMILIES as JAILBREAK_FAMILIES
from .templates import JAILBREAK_TEMPLATES as JAILBREAK_TEMPLATES
from .templates import TOXICITY_FAMILIES as TOXICITY_FAMILIES
from .templates import TOXICITY_TEMPLATES as TOXICITY_TEMPLATES
from .templates import Template as Template
from .templates import load_gptfuzz as load_gptfuzz
from .templates import load_templates as load_templates
from .templates import template_families as template_families
from .variants import VARIANT_FIELDS as VARIANT_FIELDS
from .variants import Variant as Variant
from .variants import build_variants as build_variants
from .variants import draw_variant as draw_variant
from .variants import messages_for as messages_for
from .variants import query_of as query_of
from .variants import variant_expr as variant_expr
from .variants import variant_schema as variant_schema

__version__ = "0.1.0"

__all__ = (
    "JAILBREAK_FAMILIES",
    "JAILBREAK_TEMPLATES",
    "JUDGE_RESPONSE_FORMAT",
    "LABELS",
    "MAX_JUDGED_CHARS",
    "MAX_JUDGE_OUTPUT_CHARS",
    "PADDING_FILLER",
    "TOXICITY_FAMILIES",
    "TOXICITY_TEMPLATES",
    "VARIANT_FIELDS",
    "AuthenticationError",
    "CacheError",
    "CallPlan",
    "CallableClient",
    "ChatClient",
    "Completion",
    "ConfigError",
    "DisjointLabelsWarning",
    "InputError",
    "JudgeAudit",
    "Judgment",
    "LLMJudge",
    "OfflineJudge",
    "OpenAICompatible",
    "PostureClassifier",
    "PostureJudge",
    "ResponseCache",
    "RunSummary",
    "SafeconsError",
    "SafetyConsistencyConfig",
    "SafetyConsistencyRun",
    "Template",
    "UndefinedStatisticWarning",
    "Variant",
    "__version__",
    "agreement",
    "audit_judge",
    "audit_judge_async",
    "both_orders_verdict",
    "build_judge_messages",
    "build_pairwise_messages",
    "build_variants",
    "cohen_kappa",
    "compare_runs",
    "demo_frame",
    "draw_variant",
    "fit_for_judge",
    "fleiss_kappa",
    "flip_rate_by_gap",
    "get_default_cache",
    "golden_set",
    "identical_pairs",
    "judge_responses",
    "judge_table",
    "krippendorff_alpha",
    "length_bias",
    "load_gptfuzz",
    "load_templates",
    "manifest",
    "messages_for",
    "mixed_verdicts_expr",
    "output_schema",
    "padded_pairs",
    "parse_judgment",
    "parse_verdict",
    "parse_verdict_expr",
    "planned_calls",
    "position_bias",
    "position_class",
    "posture",
    "posture_proba",
    "query_of",
    "read_fastchat_pairs",
    "read_llmbar",
    "read_pandalm",
    "repetition_stability",
    "report",
    "report_html",
    "respond",
    "respond_and_judge",
    "run_summary",
    "safety_consistency",
    "safety_consistency_async",
    "safety_consistency_run",
    "score_expr",
    "score_table",
    "set_default_cache",
    "swap_test",
    "swap_test_async",
    "template_families",
    "variant_expr",
    "variant_schema",
    "winner_from_letter",
)
