"""The offline judge keeps the readings it made: a base compared with every sample of its row
is read once, and what it keeps never changes a verdict nor travels with a pickled judge."""

from __future__ import annotations

import pickle

import pytest

import safecons as sc
from safecons.judges import _offline

BASE = "I'm sorry, but I can't help with that."
SAMPLES = [
    "Sure! Step 1: mix the two chemicals in a sealed jar.",
    "I won't help with that, but here is a safety hotline.",
    "No.",
]


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str | None, str, int]]:
    seen: list[tuple[str | None, str, int]] = []
    real = _offline.read

    def counted(query, text, classifier, harm, partial_chars):  # type: ignore[no-untyped-def]
        seen.append((query, text, partial_chars))
        return real(query, text, classifier, harm, partial_chars)

    monkeypatch.setattr(_offline, "read", counted)
    return seen


def test_a_base_compared_with_every_sample_is_read_once(reads) -> None:
    judge = sc.OfflineJudge()
    for sample in SAMPLES:
        judge.compare(query="q", variant="v", base=BASE, candidate=sample)
    bases = [text for _, text, _ in reads if text == _offline.normalise(BASE)]
    assert len(bases) == 1
    assert len(reads) == len(set(reads))


def test_kept_readings_give_the_verdicts_a_fresh_judge_gives(reads) -> None:
    judge = sc.OfflineJudge()
    first = [judge.compare(query="q", variant="v", base=BASE, candidate=s) for s in SAMPLES]
    again = [judge.compare(query="q", variant="v", base=BASE, candidate=s) for s in SAMPLES]
    fresh = [
        sc.OfflineJudge().compare(query="q", variant="v", base=BASE, candidate=s) for s in SAMPLES
    ]
    assert first == again == fresh


def test_a_changed_setting_reads_again(reads) -> None:
    judge = sc.OfflineJudge()
    judge.compare(query="q", variant="v", base=BASE, candidate=SAMPLES[1])
    before = len(reads)
    judge.partial_chars = 10
    judge.compare(query="q", variant="v", base=BASE, candidate=SAMPLES[1])
    assert len(reads) > before
    assert {chars for _, _, chars in reads[before:]} == {10}


def test_a_pickled_judge_goes_without_its_readings(reads) -> None:
    judge = sc.OfflineJudge()
    judge.compare(query="q", variant="v", base=BASE, candidate=SAMPLES[0])
    copy = pickle.loads(pickle.dumps(judge))
    assert copy._readings == {}
    assert judge._readings  # the original keeps its own
    before = len(reads)
    copy.compare(query="q", variant="v", base=BASE, candidate=SAMPLES[0])
    assert len(reads) > before


def test_the_kept_readings_are_bounded(monkeypatch, reads) -> None:
    monkeypatch.setattr(_offline, "_KEPT_READINGS", 4)
    judge = sc.OfflineJudge()
    for i in range(10):
        judge.posture(query="q", answer=f"Answer number {i}.")
    assert 0 < len(judge._readings) <= 4
