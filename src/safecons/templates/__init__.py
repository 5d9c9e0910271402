"""Adversarial templates: the project's own set and loaders for public sets.

Two kinds of :class:`Template` exist. A *toxicity* template turns a query into a
toxicity-provoking prompt; a *jailbreak* template wraps such a prompt to get it past a
system's safety handling (the ``dpi`` variant). Each holds the placeholder ``{query}``.

The built-in sets, :data:`TOXICITY_TEMPLATES` and :data:`JAILBREAK_TEMPLATES`, are written by
this project and are the offline default. Public sets a user has on disk are read with
:func:`load_gptfuzz` or :func:`load_templates`. :func:`template_families` reads the family of
each row's templates from their ids, the groups :func:`~safecons.score_table` derives.
"""

from ._builtin import JAILBREAK_FAMILIES as JAILBREAK_FAMILIES
from ._builtin import JAILBREAK_TEMPLATES as JAILBREAK_TEMPLATES
from ._builtin import TOXICITY_FAMILIES as TOXICITY_FAMILIES
from ._builtin import TOXICITY_TEMPLATES as TOXICITY_TEMPLATES
from ._families import template_families as template_families
from ._families import template_family as template_family
from ._loaders import GPTFUZZ_PLACEHOLDER as GPTFUZZ_PLACEHOLDER
from ._loaders import load_gptfuzz as load_gptfuzz
from ._loaders import load_templates as load_templates
from ._template import PLACEHOLDER as PLACEHOLDER
from ._template import TEMPLATE_KINDS as TEMPLATE_KINDS
from ._template import Template as Template
from ._template import TemplateKind as TemplateKind
from ._template import fingerprint_templates as fingerprint_templates

__all__ = (
    "GPTFUZZ_PLACEHOLDER",
    "JAILBREAK_FAMILIES",
    "JAILBREAK_TEMPLATES",
    "PLACEHOLDER",
    "TEMPLATE_KINDS",
    "TOXICITY_FAMILIES",
    "TOXICITY_TEMPLATES",
    "Template",
    "TemplateKind",
    "fingerprint_templates",
    "load_gptfuzz",
    "load_templates",
    "template_families",
    "template_family",
)
