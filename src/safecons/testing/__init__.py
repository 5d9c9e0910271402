"""Offline stand-ins and test servers, for safecons' own tests and for yours.

- :class:`StandInSUT` and :class:`StandInJudge` are **stand-ins**, not models: deterministic
  toys that let ``safecons demo`` and offline pipelines run with no network and no key. The
  stand-in judge is a refusal-phrase heuristic and is not a validated judge.
- :class:`ScriptedChat` answers from a script and records every call.
- :class:`FakeOpenAIServer` is a real OpenAI-compatible HTTP server on 127.0.0.1 with fault
  injection and counters, and a provider's rate limit (:class:`RateLimit`) with its headers.
- :class:`ScriptedServer` is a loopback server whose every reply your handler writes, for
  probes no honest server would send (the hostile-inputs tests use it).
- A hostile Batch API: ``FakeOpenAIServer(batch_tamper=...)`` with the recipes below
  (:func:`nested_json`, :func:`batch_id`, :func:`gzip_bomb`, :func:`trickle`, ...), each
  changing what the client is told while the batches run honestly.
- Control judges for :func:`~safecons.audit_judge`'s verdict: :func:`constant_judge`,
  :func:`coin_judge` and :func:`position_only_judge` must fail it, :func:`oracle_judge`
  must pass it.
"""

from ._control_judges import coin_judge as coin_judge
from ._control_judges import constant_judge as constant_judge
from ._control_judges import oracle_judge as oracle_judge
from ._control_judges import position_only_judge as position_only_judge
from ._hostile_batch import batch_id as batch_id
from ._hostile_batch import batch_status as batch_status
from ._hostile_batch import failing as failing
from ._hostile_batch import gzip_bomb as gzip_bomb
from ._hostile_batch import nested_json as nested_json
from ._hostile_batch import not_a_batch as not_a_batch
from ._hostile_batch import slow as slow
from ._hostile_batch import string_body as string_body
from ._hostile_batch import tampers as tampers
from ._hostile_batch import trickle as trickle
from ._hostile_batch import unnamed_files as unnamed_files
from ._scripted_server import ScriptedServer as ScriptedServer
from ._scripted_server import Seen as Seen
from ._scripted_server import completion as completion
from ._scripted_server import raw as raw
from ._scripted_server import reply as reply
from ._server import BatchExchange as BatchExchange
from ._server import FakeOpenAIServer as FakeOpenAIServer
from ._server import Fault as Fault
from ._server import RateLimit as RateLimit
from ._server import route_by_model as route_by_model
from ._standins import ScriptedChat as ScriptedChat
from ._standins import StandInJudge as StandInJudge
from ._standins import StandInSUT as StandInSUT
from ._standins import looks_like_refusal as looks_like_refusal

__all__ = (
    "BatchExchange",
    "FakeOpenAIServer",
    "Fault",
    "RateLimit",
    "ScriptedChat",
    "ScriptedServer",
    "Seen",
    "StandInJudge",
    "StandInSUT",
    "batch_id",
    "batch_status",
    "coin_judge",
    "completion",
    "constant_judge",
    "failing",
    "gzip_bomb",
    "looks_like_refusal",
    "nested_json",
    "not_a_batch",
    "oracle_judge",
    "position_only_judge",
    "raw",
    "reply",
    "route_by_model",
    "slow",
    "string_body",
    "tampers",
    "trickle",
    "unnamed_files",
)
