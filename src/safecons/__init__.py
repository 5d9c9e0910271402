"""safecons: safety consistency of LLM systems, and judge-reliability tools, on Polars frames."""

from __future__ import annotations

from .errors import AuthenticationError as AuthenticationError
from .errors import ConfigError as ConfigError
from .errors import InputError as InputError
from .errors import SafeconsError as SafeconsError

__version__ = "0.1.0"

__all__ = (
    "AuthenticationError",
    "ConfigError",
    "InputError",
    "SafeconsError",
    "__version__",
)
