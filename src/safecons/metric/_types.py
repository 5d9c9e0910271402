"""What the fronts take as a system under test and as a judge, as types an IDE and mypy read."""

from __future__ import annotations

from typing import TypeAlias

from ..clients import ChatClient
from ..clients._house import ChatFunction
from ..judges import LLMJudge, PostureJudge

__all__ = ("SUT", "ChatFunction", "Judge")

#: What ``sut=`` takes: a chat client (:class:`~safecons.OpenAICompatible`, a
#: :class:`~safecons.clients.ChatClient` of your own) or a chat callable.
SUT: TypeAlias = ChatClient | ChatFunction

#: What ``judge=`` takes: a chat client or callable (wrapped in safecons' judge prompt and
#: parser), a :class:`~safecons.LLMJudge` around one, or a judge object with a ``compare``
#: method (the :class:`~safecons.PostureJudge` protocol; safecons' offline judge is one).
Judge: TypeAlias = ChatClient | ChatFunction | LLMJudge | PostureJudge
