"""What the fronts take as a system under test and as a judge, as types an IDE and mypy read."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

from ..clients import ChatClient
from ..clients._internal import ChatFunction
from ..judges import LLMJudge, PostureJudge

__all__ = ("SUT", "ChatFunction", "Judge", "OneJudge")

#: What ``sut=`` takes: a chat client (:class:`~safecons.OpenAICompatible`, a
#: :class:`~safecons.clients.ChatClient` of your own) or a chat callable.
SUT: TypeAlias = ChatClient | ChatFunction

#: One judge: a chat client or callable (wrapped in safecons' judge prompt and parser), a
#: :class:`~safecons.LLMJudge` around one, or a judge object with a ``compare`` method (the
#: :class:`~safecons.PostureJudge` protocol; safecons' offline judge is one).
OneJudge: TypeAlias = ChatClient | ChatFunction | LLMJudge | PostureJudge

#: What ``judge=`` takes: one judge, or a list or tuple of them (a jury: each juror judges
#: every comparison, and the majority decides).
Judge: TypeAlias = OneJudge | Sequence[OneJudge]
