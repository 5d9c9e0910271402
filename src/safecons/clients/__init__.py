"""Chat clients: OpenAI-compatible HTTP endpoints and plain Python callables."""

from ._base import CONTENT_FILTER_TEXT as CONTENT_FILTER_TEXT
from ._base import ChatClient as ChatClient
from ._base import ChatSession as ChatSession
from ._base import Completion as Completion
from ._callable import CallableClient as CallableClient
from ._openai import OpenAICompatible as OpenAICompatible

__all__ = (
    "CONTENT_FILTER_TEXT",
    "CallableClient",
    "ChatClient",
    "ChatSession",
    "Completion",
    "OpenAICompatible",
)
