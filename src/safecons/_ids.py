"""The bytes an ``input_id`` stands for: one key for the variant draw and the call slots."""

from __future__ import annotations

import operator
from typing import SupportsIndex

from .errors import InputError

__all__ = ("id_key",)


def id_key(input_id: object) -> bytes:
    """The key of a row's ``input_id``, from which its variant is drawn and its calls named.

    The type goes into the key so that input_id 1 and "1" draw independently, while the
    integer width (Int32 or Int64 column) does not matter.

    Examples
    --------
    >>> id_key(7), id_key("7")
    (b'int:7', b'str:7')
    """
    if isinstance(input_id, str):
        return b"str:" + input_id.encode("utf-8", "surrogatepass")
    if type(input_id) is int:  # the common case, without the slow protocol check below
        return b"int:" + str(input_id).encode()
    if isinstance(input_id, bool) or not isinstance(input_id, SupportsIndex):
        raise InputError(f"input_id must be an integer or a string, got {type(input_id).__name__}")
    return b"int:" + str(operator.index(input_id)).encode()
