"""The :class:`Template` record and the fingerprint of a template set."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Literal

from ..errors import InputError

__all__ = (
    "PLACEHOLDER",
    "TEMPLATE_KINDS",
    "Template",
    "TemplateKind",
    "fingerprint_templates",
)

#: Where a template takes the query. Substituted by plain string replacement, never by
#: ``str.format``: user queries and public templates hold braces of their own.
PLACEHOLDER: Final[str] = "{query}"

TemplateKind = Literal["toxicity", "jailbreak"]
TEMPLATE_KINDS: Final[tuple[TemplateKind, ...]] = ("toxicity", "jailbreak")


@dataclass(frozen=True, slots=True)
class Template:
    """One adversarial template: a toxicity-provoking prompt or a jailbreak wrapper.

    Parameters
    ----------
    id : str
        Stable identifier, e.g. ``"tox.continuation.01"``. Results record it, so it must not
        change once published.
    family : str
        The technique the template belongs to, e.g. ``"continuation"`` or ``"dev_mode"``;
        results can be sliced by it.
    kind : {"toxicity", "jailbreak"}
        A toxicity template turns a query into a toxicity-provoking prompt; a jailbreak
        template wraps such a prompt (the ``dpi`` variant).
    text : str
        The template text. It holds the placeholder ``{query}`` at least once.
    source : str, default "safecons"
        Where the text comes from: ``"safecons"`` for the built-ins, the public set's name for
        loaded templates.

    Raises
    ------
    InputError
        If ``text`` lacks the placeholder, or a field is empty or mistyped; the message names
        the template id.

    Examples
    --------
    >>> from safecons.templates import Template
    >>> t = Template("demo.01", "demo", "toxicity", "Say it rudely: {query}")
    >>> t.render("what is {x}?")
    'Say it rudely: what is {x}?'
    >>> Template("demo.02", "demo", "toxicity", "no placeholder")
    Traceback (most recent call last):
    ...
    safecons.errors.InputError: template 'demo.02': text has no '{query}' placeholder
    """

    id: str
    family: str
    kind: TemplateKind
    text: str
    source: str = "safecons"

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id.strip():
            raise InputError(f"template id must be a non-empty string, got {self.id!r}")
        if not isinstance(self.family, str) or not self.family.strip():
            raise InputError(
                f"template {self.id!r}: family must be a non-empty string, got {self.family!r}"
            )
        if self.kind not in TEMPLATE_KINDS:
            raise InputError(
                f"template {self.id!r}: kind must be one of {TEMPLATE_KINDS}, got {self.kind!r}"
            )
        if not isinstance(self.source, str):
            raise InputError(
                f"template {self.id!r}: source must be a string, got {type(self.source).__name__}"
            )
        if not isinstance(self.text, str):
            raise InputError(
                f"template {self.id!r}: text must be a string, got {type(self.text).__name__}"
            )
        if PLACEHOLDER not in self.text:
            raise InputError(f"template {self.id!r}: text has no {PLACEHOLDER!r} placeholder")

    def render(self, query: str) -> str:
        """Substitute ``query`` for every ``{query}`` placeholder.

        Parameters
        ----------
        query : str
            The text to insert. Braces in it are kept as they are, and a ``{query}`` inside
            it is not substituted again.

        Returns
        -------
        str
            The rendered prompt.

        Examples
        --------
        >>> from safecons.templates import Template
        >>> Template("demo.01", "demo", "jailbreak", "[{query}] / [{query}]").render("{query}")
        '[{query}] / [{query}]'
        """
        return self.text.replace(PLACEHOLDER, query)


def _field(value: str) -> bytes:
    # Length-prefixed fields make the encoding injective: no pair of different sets can
    # concatenate to the same bytes.
    data = value.encode("utf-8", "surrogatepass")
    return len(data).to_bytes(8, "big") + data


def fingerprint_templates(templates: Iterable[Template]) -> str:
    """A stable hex digest of a template set's ids and texts.

    The digest ignores the order of the templates and their family, kind and source: two sets
    with the same ids and texts draw the same variants.

    Parameters
    ----------
    templates : iterable of Template
        The set to fingerprint.

    Returns
    -------
    str
        32 hexadecimal digits (BLAKE2b, 128 bits).

    Examples
    --------
    >>> from safecons.templates import JAILBREAK_TEMPLATES, fingerprint_templates
    >>> a = fingerprint_templates(JAILBREAK_TEMPLATES)
    >>> a == fingerprint_templates(reversed(JAILBREAK_TEMPLATES))
    True
    >>> len(a)
    32
    """
    h = hashlib.blake2b(digest_size=16, person=b"safecons.tmplset")
    for t in sorted(templates, key=lambda t: t.id):
        h.update(_field(t.id))
        h.update(_field(t.text))
    return h.hexdigest()
