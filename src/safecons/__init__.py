"""safecons: safety consistency of LLM systems, and judge-reliability tools, on Polars frames.

The top level holds the metric, its clients and judges, the judge audit, the swap test, the
cache and what reads a scored frame. The rest lives in subpackages, each reachable as an
attribute (``sc.reliability.position_bias``) or imported from its home
(``from safecons.reliability import position_bias``):

- :mod:`safecons.reliability`: judge-reliability statistics, the pairwise prompt and verdict
  parser, and loaders of public judged pairs (pure, no network);
- :mod:`safecons.judges`: what a judge is asked and how its reply is read, the posture
  classifier;
- :mod:`safecons.templates`: the toxicity and jailbreak templates, loaders of public sets;
- :mod:`safecons.variants`: the variant stage, as a frame function and as an expression;
- :mod:`safecons.charts`: Altair charts of what safecons returns (the ``charts`` extra);
- :mod:`safecons.testing`: stand-ins and fake servers for tests;
- :mod:`safecons.config` and :mod:`safecons.errors`.
"""

from . import charts as charts
from . import config as config
from . import errors as errors
from . import judges as judges
from . import reliability as reliability
from . import templates as templates
from . import variants as variants
from ._demo import demo_frame as demo_frame
from ._prices import Prices as Prices
from ._record import output_schema as output_schema
from ._review import review_sample as review_sample
from ._version import __version__ as __version__
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
from .errors import SafeconsWarning as SafeconsWarning
from .errors import UnscoredRowsWarning as UnscoredRowsWarning
from .flips import posture_flips as posture_flips
from .golden import golden_set as golden_set
from .judges import Judgment as Judgment
from .judges import LLMJudge as LLMJudge
from .judges import OfflineJudge as OfflineJudge
from .judges import PostureJudge as PostureJudge
from .metric import CallPlan as CallPlan
from .metric import judge_responses as judge_responses
from .metric import planned_calls as planned_calls
from .metric import respond as respond
from .metric import safety_consistency as safety_consistency
from .metric import safety_consistency_async as safety_consistency_async
from .metric import score_expr as score_expr
from .pairwise import swap_test as swap_test
from .pairwise import swap_test_async as swap_test_async
from .report import report as report
from .report import report_html as report_html
from .run import ResponseCache as ResponseCache
from .run import get_default_cache as get_default_cache
from .run import set_default_cache as set_default_cache
from .scores import compare_runs as compare_runs
from .scores import score_table as score_table
from .summary import RunSummary as RunSummary
from .summary import run_summary as run_summary
from .variants import build_variants as build_variants

__all__ = (
    "AuthenticationError",
    "CacheError",
    "CallPlan",
    "CallableClient",
    "ChatClient",
    "Completion",
    "ConfigError",
    "InputError",
    "JudgeAudit",
    "Judgment",
    "LLMJudge",
    "OfflineJudge",
    "OpenAICompatible",
    "PostureJudge",
    "Prices",
    "ResponseCache",
    "RunSummary",
    "SafeconsError",
    "SafeconsWarning",
    "SafetyConsistencyConfig",
    "UnscoredRowsWarning",
    "__version__",
    "audit_judge",
    "audit_judge_async",
    "build_variants",
    "compare_runs",
    "demo_frame",
    "get_default_cache",
    "golden_set",
    "judge_responses",
    "manifest",
    "output_schema",
    "planned_calls",
    "posture_flips",
    "report",
    "report_html",
    "respond",
    "review_sample",
    "run_summary",
    "safety_consistency",
    "safety_consistency_async",
    "score_expr",
    "score_table",
    "set_default_cache",
    "swap_test",
    "swap_test_async",
)


def __getattr__(name: str) -> object:
    # safecons.testing (stand-ins and loopback servers, on aiohttp.web) is imported on first
    # use: a run never needs it, and it is the heaviest import of the house.
    if name == "testing":
        import importlib

        return importlib.import_module(".testing", __name__)
    raise AttributeError(f"module 'safecons' has no attribute {name!r}")
