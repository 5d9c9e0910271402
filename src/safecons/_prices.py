"""What tokens cost, at the prices a user gives: safecons knows no price of its own.

Providers change their prices and differ by model, region and contract, so a price built into
safecons would be wrong somewhere on the day it shipped. :class:`Prices` holds the user's own,
per **1M tokens** (the unit providers publish), and :func:`token_cost` is the one rule every
reader applies: the run's summary (:func:`~safecons.run_summary`) and the dry run
(:func:`~safecons.planned_calls`).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from .errors import InputError

__all__ = (
    "KINDS",
    "PARTS",
    "PER_TOKENS",
    "Prices",
    "as_prices",
    "costs",
    "kind_cost",
    "money_text",
    "token_cost",
)

#: Prices are per this many tokens (providers publish prices per million).
PER_TOKENS: Final = 1_000_000
#: The kinds of call a run makes, in the order every table shows them.
KINDS: Final = ("sut", "judge")
#: The parts of a kind's tokens, each with its own price.
PARTS: Final = ("prompt", "completion")


def _price(name: str, value: object, *, fraction: bool = False) -> float | None:
    """``value`` as a price (a finite number >= 0) or a discount (in [0, 1]); None stays None."""
    if value is None and not fraction:
        return None
    expected = (
        "a number from 0 to 1 (the fraction taken off batch tokens: 0.5 is half price)"
        if fraction
        else "a finite number >= 0 (a price per 1M tokens) or None"
    )
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InputError(f"prices: {name} is {value!r}; expected {expected}")
    number = float(value)
    if not math.isfinite(number) or number < 0 or (fraction and number > 1):
        raise InputError(f"prices: {name} is {value!r}; expected {expected}")
    return number


@dataclass(frozen=True, slots=True)
class Prices:
    """Prices per 1M tokens, per kind of call and part of the tokens; the user's own.

    A price left at None is unknown: the costs that need it are None, never a guess.
    ``batch_discount`` is the fraction taken off the price of the tokens a provider's batch
    answered (0.5: they cost half); 0 (the default) prices them like the others.

    Parameters
    ----------
    sut_prompt, sut_completion, judge_prompt, judge_completion
        Price per 1M prompt (input) or completion (output) tokens of the SUT's and the
        judge's calls, in whatever currency you like (the costs are in the same).
    batch_discount
        From 0 to 1.

    Raises
    ------
    InputError
        A price that is not a finite number >= 0 (or None), a discount outside [0, 1].

    Examples
    --------
    >>> from safecons import Prices
    >>> p = Prices(sut_prompt=0.15, sut_completion=0.6, batch_discount=0.5)
    >>> p.price("sut", "completion"), p.price("judge", "prompt")
    (0.6, None)
    >>> Prices(sut_prompt=-1)
    Traceback (most recent call last):
    ...
    safecons.errors.InputError: prices: sut_prompt is -1; expected a finite number >= 0 (a price per 1M tokens) or None
    """  # noqa: E501

    sut_prompt: float | None = None
    sut_completion: float | None = None
    judge_prompt: float | None = None
    judge_completion: float | None = None
    batch_discount: float = 0.0

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            fraction = f.name == "batch_discount"
            checked = _price(f.name, getattr(self, f.name), fraction=fraction)
            # Frozen: the checked float replaces an int or a NumPy number in place.
            object.__setattr__(self, f.name, checked)

    def price(self, kind: str, part: str) -> float | None:
        """The price per 1M tokens of ``part`` (prompt, completion) of ``kind``'s calls."""
        value: float | None = getattr(self, f"{kind}_{part}")
        return value


def as_prices(prices: object, *, parameter: str = "prices") -> Prices | None:
    """``prices`` as :class:`Prices`: one already, a mapping of its fields, or None (no prices).

    Examples
    --------
    >>> as_prices({"judge_prompt": 1, "batch_discount": 0.5})
    Prices(sut_prompt=None, sut_completion=None, judge_prompt=1.0, judge_completion=None, batch_discount=0.5)
    >>> as_prices({"judge_input": 1})
    Traceback (most recent call last):
    ...
    safecons.errors.InputError: prices: unknown field(s) 'judge_input'; expected sut_prompt, sut_completion, judge_prompt, judge_completion, batch_discount
    """  # noqa: E501
    if prices is None or isinstance(prices, Prices):
        return prices
    if not isinstance(prices, Mapping):
        raise InputError(
            f"{parameter}: expected safecons.Prices, a mapping of its fields or None, got "
            f"{type(prices).__name__}"
        )
    names = [f.name for f in dataclasses.fields(Prices)]
    unknown = [str(k) for k in prices if k not in names]
    if unknown:
        raise InputError(
            f"{parameter}: unknown field(s) {', '.join(map(repr, unknown))}; expected "
            f"{', '.join(names)}"
        )
    values = dict(prices)
    if values.get("batch_discount") is None:
        values.pop("batch_discount", None)
    return Prices(**values)


def token_cost(
    tokens: int | None,
    price: float | None,
    *,
    batch_tokens: int | None = 0,
    batch_discount: float = 0.0,
) -> float | None:
    """What ``tokens`` cost at ``price`` per 1M, ``batch_tokens`` of them at the discount.

    None when the tokens or the price are unknown (None): an unknown is never counted as 0.
    No tokens cost nothing, priced or not.

    Examples
    --------
    >>> token_cost(2_000_000, 0.15)
    0.3
    >>> token_cost(2_000_000, 0.15, batch_tokens=1_000_000, batch_discount=0.5)
    0.225
    >>> token_cost(None, 0.15), token_cost(10, None), token_cost(0, None)
    (None, None, 0.0)
    """
    if tokens == 0:
        return 0.0
    if tokens is None or price is None:
        return None
    batched = min(batch_tokens or 0, tokens)
    return price * (tokens - batch_discount * batched) / PER_TOKENS


def costs(
    prices: Prices,
    tokens: Mapping[str, Mapping[str, int | None]],
    batch_tokens: Mapping[str, Mapping[str, int | None] | None],
) -> dict[str, dict[str, float | None]]:
    """The cost of each kind's ``tokens`` (:func:`kind_cost`, ``batch_tokens[kind]`` those a
    provider batch answered) and, under ``"all"``, their sums over the kinds (None where a
    kind's is unknown): what a plan and a run summary report alike.

    Examples
    --------
    >>> tokens = {"sut": {"prompt": 1_000_000, "completion": 0},
    ...           "judge": {"prompt": 2_000_000, "completion": None}}
    >>> out = costs(Prices(sut_prompt=1.0, judge_prompt=1.0), tokens, {"sut": None, "judge": None})
    >>> out["sut"]["total"], out["all"]["prompt"], out["all"]["total"]
    (1.0, 3.0, None)
    """
    out = {kind: kind_cost(prices, kind, tokens[kind], batch_tokens[kind]) for kind in KINDS}
    out["all"] = {
        part: None
        if any(out[k][part] is None for k in KINDS)
        else sum(out[k][part] or 0.0 for k in KINDS)
        for part in (*PARTS, "total")
    }
    return out


def kind_cost(
    prices: Prices,
    kind: str,
    tokens: Mapping[str, int | None],
    batch_tokens: Mapping[str, int | None] | None = None,
) -> dict[str, float | None]:
    """The cost of one kind's tokens, per part and in all (``total``: None unless both parts
    are known), at ``prices``; ``batch_tokens`` are those a provider batch answered."""
    out: dict[str, float | None] = {
        part: token_cost(
            tokens.get(part),
            prices.price(kind, part),
            batch_tokens=(batch_tokens or {}).get(part),
            batch_discount=prices.batch_discount,
        )
        for part in PARTS
    }
    prompt, completion = out["prompt"], out["completion"]
    out["total"] = None if prompt is None or completion is None else prompt + completion
    return out


#: Decimals of a cost under 1 (a small run costs fractions of a cent) and of one above.
_SMALL_DECIMALS: Final = 6
_LARGE_DECIMALS: Final = 2


def money_text(value: float | None) -> str:
    """A cost as the summaries print it: ``n/a`` when unknown, 6 decimals under 1, 2 above.

    Examples
    --------
    >>> money_text(0.0000384), money_text(7855.1234), money_text(None)
    ('0.000038', '7,855.12', 'n/a')
    """
    if value is None:
        return "n/a"
    decimals = _SMALL_DECIMALS if abs(value) < 1 else _LARGE_DECIMALS
    return f"{value:,.{decimals}f}"
