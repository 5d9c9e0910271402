"""Servers and recipes that misbehave on purpose: for testing that a client survives them.

:mod:`safecons.testing` holds what a test of code that uses safecons needs (stand-ins, the
loopback :class:`~safecons.testing.FakeOpenAIServer` with its faults and rate limits). This
module holds the attacker's side, which a test of safecons' own defences needs:

- :class:`ScriptedServer` is a loopback server whose every reply your handler writes, for
  replies no honest server sends (bodies echoing the request's headers, JSON nested past the
  stack, gzip bombs); :func:`reply`, :func:`completion` and :func:`raw` build its replies and
  :class:`Seen` is each request it saw.
- A hostile Batch API: ``FakeOpenAIServer(batch_tamper=...)`` with a recipe below, called with
  each Batch API exchange (a :class:`BatchExchange`: the request and the honest answer), may
  answer something else while the batches run honestly. :func:`nested_json`,
  :func:`batch_id`, :func:`not_a_batch`, :func:`string_body`, :func:`gzip_bomb`,
  :func:`slow`, :func:`trickle`, :func:`batch_status`, :func:`unnamed_files` and
  :func:`failing` each build one; :func:`tampers` combines them.

Examples
--------
>>> from safecons.testing.hostile import completion
>>> completion("hi")["choices"][0]["message"]
{'role': 'assistant', 'content': 'hi'}
"""

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
from ._wire import BatchExchange as BatchExchange

__all__ = (
    "BatchExchange",
    "ScriptedServer",
    "Seen",
    "batch_id",
    "batch_status",
    "completion",
    "failing",
    "gzip_bomb",
    "nested_json",
    "not_a_batch",
    "raw",
    "reply",
    "slow",
    "string_body",
    "tampers",
    "trickle",
    "unnamed_files",
)
