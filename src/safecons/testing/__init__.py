"""Offline stand-ins and a loopback server, for testing code that uses safecons.

- :class:`StandInSUT` and :class:`StandInJudge` are **stand-ins**, not models: deterministic
  toys that let ``safecons demo`` and offline pipelines run with no network and no key. The
  stand-in judge is a refusal-phrase heuristic (:func:`looks_like_refusal`) and is not a
  validated judge.
- :class:`ScriptedChat` answers from a script and records every call.
- :class:`FakeOpenAIServer` is a real OpenAI-compatible HTTP server on 127.0.0.1 (chat
  completions and the Batch API) with injected faults (:class:`Fault`), a provider's rate limit
  (:class:`RateLimit`) with its headers, and counters; :func:`route_by_model` gives the SUT and
  the judge answers of their own.
- Control judges for :func:`~safecons.audit_judge`'s verdict: :func:`constant_judge`,
  :func:`coin_judge` and :func:`position_only_judge` must fail it, :func:`oracle_judge`
  must pass it.

Servers and recipes that misbehave on purpose (a server whose every reply a test writes, a
hostile Batch API) are in :mod:`safecons.testing.hostile`.
"""

from ._control_judges import coin_judge as coin_judge
from ._control_judges import constant_judge as constant_judge
from ._control_judges import oracle_judge as oracle_judge
from ._control_judges import position_only_judge as position_only_judge
from ._server import FakeOpenAIServer as FakeOpenAIServer
from ._server import Fault as Fault
from ._server import RateLimit as RateLimit
from ._server import route_by_model as route_by_model
from ._standins import ScriptedChat as ScriptedChat
from ._standins import StandInJudge as StandInJudge
from ._standins import StandInSUT as StandInSUT
from ._standins import looks_like_refusal as looks_like_refusal

__all__ = (
    "FakeOpenAIServer",
    "Fault",
    "RateLimit",
    "ScriptedChat",
    "StandInJudge",
    "StandInSUT",
    "coin_judge",
    "constant_judge",
    "looks_like_refusal",
    "oracle_judge",
    "position_only_judge",
    "route_by_model",
)
