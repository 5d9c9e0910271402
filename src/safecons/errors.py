"""Exceptions raised by safecons.

Every error a user can trigger with bad input derives from :class:`SafeconsError`, and the
input/config ones are also :class:`ValueError` so that generic ``except ValueError`` code keeps
working.
"""

from __future__ import annotations

__all__ = (
    "AuthenticationError",
    "ConfigError",
    "InputError",
    "SafeconsError",
)


class SafeconsError(Exception):
    """Base class of every error raised by safecons itself."""


class InputError(SafeconsError, ValueError):
    """A frame, column or value handed to safecons is not what it expects.

    The message names the column (or parameter) and says what was expected.
    """


class ConfigError(SafeconsError, ValueError):
    """A configuration field is unknown, mistyped or out of its allowed range."""


class AuthenticationError(SafeconsError):
    """An endpoint rejected the credentials (HTTP 401/403); the whole run is aborted.

    The message names the endpoint (base URL and model) and never the key.
    """
