"""safecons: safety consistency of LLM systems, and judge-reliability tools, on Polars frames."""

from __future__ import annotations

from .clients import CallableClient as CallableClient
from .clients import ChatClient as ChatClient
from .clients import Completion as Completion
from .clients import OpenAICompatible as OpenAICompatible
from .config import SafetyConsistencyConfig as SafetyConsistencyConfig
from .config import manifest as manifest
from .errors import AuthenticationError as AuthenticationError
from .errors import ConfigError as ConfigError
from .errors import InputError as InputError
from .errors import SafeconsError as SafeconsError
from .judge import Judgment as Judgment
from .judge import build_judge_messages as build_judge_messages
from .judge import parse_judgment as parse_judgment

__version__ = "0.1.0"

__all__ = (
    "AuthenticationError",
    "CallableClient",
    "ChatClient",
    "Completion",
    "ConfigError",
    "InputError",
    "Judgment",
    "OpenAICompatible",
    "SafeconsError",
    "SafetyConsistencyConfig",
    "__version__",
    "build_judge_messages",
    "manifest",
    "parse_judgment",
)
