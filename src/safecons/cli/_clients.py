"""The endpoints a command calls: ``--sut-*`` and ``--judge-*`` options made clients (a
repeated ``--judge-model``: a jury)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from .._text import terminal_text
from ..errors import SafeconsError


def judge_from(args: argparse.Namespace) -> Any:
    """The run's judge from ``--judge-model`` (repeated: a jury), each juror with the
    ``--judge-base-url`` and ``--judge-key-env`` of its place, or the one given for all."""
    models = args.judge_model
    for name in ("base_url", "key_env"):
        given = getattr(args, f"judge_{name}") or []
        if len(given) > max(1, len(models)) or 1 < len(given) < len(models):
            raise SafeconsError(
                f"--judge-{name.replace('_', '-')}: given {len(given)} times for "
                f"{len(models)} --judge-model; give it once (for every juror) or once per "
                "--judge-model, in the same order"
            )
    if len(models) == 1:
        return client_from(args, "judge")
    options = {}
    for name in ("base_url", "key_env"):
        given = getattr(args, f"judge_{name}") or [None]
        options[name] = given * len(models) if len(given) == 1 else given
    return [
        client_from(
            args,
            "judge",
            label=f"judge {i + 1} of {len(models)}",
            model=model,
            base_url=options["base_url"][i],
            key_env=options["key_env"][i],
        )
        for i, model in enumerate(models)
    ]


def client_from(
    args: argparse.Namespace,
    role: str,
    *,
    label: str | None = None,
    model: str | None = None,
    base_url: str | None = None,
    key_env: str | None = None,
) -> Any:
    from ..clients import BatchOptions, OpenAICompatible
    from ..clients._internal import OPENAI_BASE_URL

    if model is None:
        model = _single(getattr(args, f"{role}_model"))
        base_url = _single(getattr(args, f"{role}_base_url"))
        # Only the variable's name: the client reads the key itself, so that it remembers
        # the name and not the value (and reads it again where it is unpickled).
        key_env = _single(getattr(args, f"{role}_key_env"))
    source = f"--{role}-base-url"
    if base_url is None:
        if os.environ.get("OPENAI_BASE_URL", "").strip():
            source = "from OPENAI_BASE_URL"  # read (and checked) by the client
        elif key_env is None and not os.environ.get("OPENAI_API_KEY"):
            # No silent remote default: OpenAI's API only when a key for it is at hand.
            raise SafeconsError(
                f"--{role}-base-url: not given, and OPENAI_BASE_URL is not set, so the {role} "
                f"would be OpenAI's API ({OPENAI_BASE_URL}), for which OPENAI_API_KEY is not "
                f"set either; pass --{role}-base-url URL (e.g. http://localhost:8000/v1)"
            )
        else:
            base_url, source = OPENAI_BASE_URL, f"OpenAI's API: no --{role}-base-url given"
    batch = bool(getattr(args, "batch", False))
    wait = getattr(args, "batch_wait", None)
    try:
        client = OpenAICompatible(
            model=model,
            base_url=base_url,
            api_key_env=key_env,
            batch=batch
            and BatchOptions(
                cancel_on_interrupt=bool(getattr(args, "cancel_on_interrupt", False)),
                **({} if wait is None else {"wait_seconds": wait}),
            ),
        )
    except ValueError as exc:
        # The messages never quote a URL or a key, so they can be shown as they are.
        about_key = str(exc).startswith("api_key")
        option = f"--{role}-key-env" if about_key else f"--{role}-base-url / --{role}-model"
        raise SafeconsError(f"{option}: {exc}") from None
    if key_env:
        key = f"key from {key_env}"
    elif client._api_key:
        key = "key from OPENAI_API_KEY"
    elif os.environ.get("OPENAI_API_KEY"):
        # The variable is set but goes only to OpenAI's own API: say so, and how to send it.
        key = f"no key: OPENAI_API_KEY goes only to OpenAI's API; --{role}-key-env to send one"
    else:
        key = "no key"
    how = "; through the provider's Batch API" if batch else ""
    url = terminal_text(str(client.base_url))
    print(f"{label or role}: {url} model {model!r} ({source}; {key}{how})")
    return client


def _single(value: Any) -> Any:
    """An option's one value (a repeatable option given once, or not at all)."""
    return value[0] if isinstance(value, list) and value else (None if value == [] else value)


def add_judge_options(add: Any) -> None:
    """``safecons run``'s judge options: one judge, or a jury (``--judge-model`` repeated)."""
    add(
        "--judge-model",
        required=True,
        action="append",
        help="the model name the judge endpoint serves; repeat it for a jury (each juror "
        "judges every comparison, the majority decides)",
    )
    add(
        "--judge-base-url",
        action="append",
        default=None,
        help="judge API root (needed unless OPENAI_BASE_URL or OPENAI_API_KEY is set); for a "
        "jury, once for all jurors or once per --judge-model, in the same order",
    )
    add(
        "--judge-key-env",
        action="append",
        default=None,
        metavar="VAR",
        help="environment variable holding the judge's key (default OPENAI_API_KEY); for a "
        "jury, once for all or once per --judge-model",
    )
    add(
        "--swap-share",
        type=float,
        default=0.0,
        metavar="SHARE",
        help="share of the comparisons (0 to 1) each judge sees again with the two answers "
        "swapped: the summary's position_consistency (the score is unchanged)",
    )
    add(
        "--repeat-share",
        type=float,
        default=0.0,
        metavar="SHARE",
        help="share of the comparisons (0 to 1) each judge sees again exactly as before: the "
        "summary's repeat_flip_rate, the judge's own noise (the score is unchanged)",
    )
