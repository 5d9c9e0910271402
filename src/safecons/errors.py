"""Exceptions raised by safecons.

Every error a user can trigger with bad input derives from :class:`SafeconsError`, and the
input/config ones are also :class:`ValueError` so that generic ``except ValueError`` code keeps
working.
"""

from __future__ import annotations

__all__ = (
    "AuthenticationError",
    "BatchPickedUpWarning",
    "BatchWarning",
    "CacheError",
    "CacheWarning",
    "ConfigError",
    "DeprecatedOptionWarning",
    "IdentityWarning",
    "InputError",
    "JudgesDifferWarning",
    "LabelSampleWarning",
    "NoBatchAPIError",
    "NoVerdictWarning",
    "NothingScoredError",
    "PacingWarning",
    "ProxyWarning",
    "SafeconsError",
    "SafeconsWarning",
    "UnscoredRowsWarning",
    "UsageWarning",
)


class SafeconsError(Exception):
    """Base class of every error raised by safecons itself."""


class InputError(SafeconsError, ValueError):
    """A frame, column or value handed to safecons is not what it expects.

    The message names the column (or parameter) and says what was expected.
    """


class ConfigError(SafeconsError, ValueError):
    """A configuration field is unknown, mistyped or out of its allowed range."""


class NoBatchAPIError(ConfigError):
    """A client was made with ``batch=True`` for a server that has no Batch API.

    ``str()`` says the fix in Python's words (``batch=False``); :attr:`for_cli` says it in
    the command line's (drop ``--batch``), which ``safecons run`` prints instead.
    """

    def __init__(self, problem: str) -> None:
        super().__init__(f"{problem}: make the client with batch=False")
        #: The message in the command line's words.
        self.for_cli = f"{problem}: drop --batch"


class AuthenticationError(SafeconsError):
    """An endpoint rejected the credentials (HTTP 401/403); the whole run is aborted.

    The message names the endpoint (base URL and model) and never the key.
    """


class CacheError(SafeconsError):
    """A response cache file cannot be used; the message names the path and what to do.

    Raised before the file is changed in any way: safecons never writes to, re-journals or
    changes the permissions of a file that is not its own cache.
    """

    def __init__(self, path: object, problem: str) -> None:
        super().__init__(f"cache {str(path)!r}: {problem}")
        self.path = path


class NothingScoredError(SafeconsError):
    """A run of the metric scored none of its rows: the most common reason is in the message.

    A frame of null scores would let a script carry on as if it had measured something. The
    frame is kept in :attr:`frame` (each row's reason in its ``{prefix}error`` column); pass
    ``allow_unscored=True`` to the run to have it returned instead (with an
    :class:`UnscoredRowsWarning`).
    """

    def __init__(self, message: str, *, frame: object = None) -> None:
        super().__init__(message)
        #: The run's frame (a ``polars.DataFrame``), when the run returned one.
        self.frame = frame


class SafeconsWarning(UserWarning):
    """Base class of every warning safecons gives: filter them all with
    ``warnings.filterwarnings("ignore", category=sc.SafeconsWarning)``."""


class PacingWarning(SafeconsWarning):
    """A provider's rate-limit word holds an endpoint's calls for longer than a few seconds.

    Given once per endpoint and run; the message names the endpoint and what its provider said.
    """


class BatchPickedUpWarning(SafeconsWarning):
    """A run picked up a provider batch an earlier run made and recorded in the cache: its
    calls are answered by that batch, at no new charge (the run's attempts count its lines;
    ``from the cache`` does not). Given once per batch, naming it."""


class UsageWarning(SafeconsWarning):
    """A server reported token usage no call can have (over a billion tokens, or below 0):
    those figures are read as not reported, and the run's tokens and cost leave them out."""


class JudgesDifferWarning(SafeconsWarning):
    """:func:`~safecons.compare_runs` was given two runs judged by different judges (or
    juries): the difference of their scores mixes the systems' change with the judges'."""


class NoVerdictWarning(SafeconsWarning):
    """:func:`~safecons.swap_test` got no usable pair: in every pair, one order or both gave
    no verdict (the call failed, or the reply held no ``[[A]]``/``[[B]]``/``[[C]]``). The
    statistics of such a frame are NaN; the message says how many calls failed and why."""


class UnscoredRowsWarning(SafeconsWarning):
    """A run left rows without a score: its ``max_calls`` budget was spent before their calls
    were made (not finished: a rerun with the same cache continues), or their calls failed.

    Given once per run, with how many rows of each and the most common reason; each row's
    reason is in its ``{prefix}error`` column. Their score is null, so a plain mean of the
    score column averages the scored rows only.
    """


class LabelSampleWarning(SafeconsWarning):
    """Human labels given for a calibrated score (``run_summary(..., human_labels=...)``) are
    not :func:`~safecons.review_sample`'s uniform draw labelled in full: rows dropped, added
    from elsewhere or left blank, or drawn from other comparisons. The figures are still
    computed from the labels given, but their interval no longer carries its guarantee."""


class CacheWarning(SafeconsWarning, RuntimeWarning):
    """The response cache cannot do all it should (a write failed, the file is readable by
    others, its batch records cannot be read): the run goes on, and the message says what a
    rerun will do about it. Also a ``RuntimeWarning``, so filters written for that still
    apply."""


class BatchWarning(SafeconsWarning, RuntimeWarning):
    """A provider batch needs the user's attention: a run was interrupted while it ran (it is
    left running, or was cancelled, or could not be cancelled). The message names the batch
    and what to do. Also a ``RuntimeWarning``."""


class IdentityWarning(SafeconsWarning, RuntimeWarning):
    """A client's cache identity is not exact (a callable with no name is known by its code,
    not by what it calls): a change the identity does not see would replay old answers. The
    message says how to name it. Also a ``RuntimeWarning``."""


class ProxyWarning(SafeconsWarning, RuntimeWarning):
    """A proxy set in the environment cannot be used by the wire a client was made with, so
    its calls go direct. Also a ``RuntimeWarning``."""


class DeprecatedOptionWarning(SafeconsWarning, FutureWarning):
    """An option is read under an old name or value that a future version will stop
    reading; the message names the new one. Also a ``FutureWarning``, so it is shown by
    default."""
