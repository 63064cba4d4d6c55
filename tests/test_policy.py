"""Tests for spider.policy: the failure policy table (`classify`) and retry back-off (`retry_delay`)."""

from __future__ import annotations

import random

import pytest

from spider.policy import (
    REDIRECT_STATUSES,
    TRANSIENT_STATUSES,
    FetchFailure,
    Outcome,
    Verdict,
    classify,
    retry_delay,
)

MAX = 3  # max_attempts used throughout (the CrawlConfig default)


def status_outcome(status: int, attempts: int = 1, has_location: bool = False) -> Outcome:
    return classify(status, None, attempts, MAX, has_location=has_location)


# --------------------------------------------------------------------------- the table, by status

# (status, has_location, attempts, expected verdict, expected reason)
STATUS_ROWS = [
    # 2xx: crawled, on any attempt
    (200, False, 1, Verdict.CRAWLED, ""),
    (201, False, 1, Verdict.CRAWLED, ""),
    (203, False, 2, Verdict.CRAWLED, ""),
    (204, False, 3, Verdict.CRAWLED, ""),
    (206, False, 1, Verdict.CRAWLED, ""),
    (299, False, 1, Verdict.CRAWLED, ""),
    # redirects with a Location: followed hop by hop
    *[(s, True, 1, Verdict.REDIRECT, "") for s in (301, 302, 303, 307, 308)],
    *[(s, True, MAX, Verdict.REDIRECT, "") for s in (301, 302, 303, 307, 308)],
    # redirects without a Location: failed with the status
    *[(s, False, 1, Verdict.FAILED, str(s)) for s in (301, 302, 303, 307, 308)],
    # other 3xx: failed with the status, Location or not
    (300, True, 1, Verdict.FAILED, "300"),
    (304, False, 1, Verdict.FAILED, "304"),
    (304, True, 1, Verdict.FAILED, "304"),
    (305, True, 1, Verdict.FAILED, "305"),
    # permanent client errors: failed with the status on the first attempt
    (400, False, 1, Verdict.FAILED, "400"),
    (401, False, 1, Verdict.FAILED, "401"),
    (403, False, 1, Verdict.FAILED, "403"),
    (404, False, 1, Verdict.FAILED, "404"),
    (404, True, 1, Verdict.FAILED, "404"),  # a Location on a 404 changes nothing
    (451, False, 1, Verdict.FAILED, "451"),
    # 410: gone, at once and on every attempt
    (410, False, 1, Verdict.GONE, "410"),
    (410, False, MAX, Verdict.GONE, "410"),
    # 501 is not transient
    (501, False, 1, Verdict.FAILED, "501"),
    (505, False, 1, Verdict.FAILED, "505"),
]


@pytest.mark.parametrize(("status", "has_location", "attempts", "verdict", "reason"), STATUS_ROWS)
def test_classify_status(status: int, has_location: bool, attempts: int, verdict: Verdict, reason: str) -> None:
    assert status_outcome(status, attempts, has_location) == Outcome(verdict, reason)


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504])
def test_transient_status_retried_until_the_last_attempt(status: int) -> None:
    assert status_outcome(status, 1) == Outcome(Verdict.RETRY, str(status))
    assert status_outcome(status, MAX - 1) == Outcome(Verdict.RETRY, str(status))
    assert status_outcome(status, MAX) == Outcome(Verdict.FAILED, str(status))
    assert status_outcome(status, MAX + 1) == Outcome(Verdict.FAILED, str(status))


def test_transient_status_with_a_single_attempt_fails_at_once() -> None:
    assert classify(503, None, 1, 1) == Outcome(Verdict.FAILED, "503")


def test_policy_sets_match_the_table() -> None:
    assert REDIRECT_STATUSES == {301, 302, 303, 307, 308}
    assert TRANSIENT_STATUSES == {408, 429, 500, 502, 503, 504}


# --------------------------------------------------------------------------- the table, by failure

TRANSIENT_KINDS = ["timeout", "connect timeout", "connection refused", "connection broken",
                   "connection error", "dns error"]
PERMANENT_KINDS = ["too large", "too slow", "bad content encoding", "invalid request"]


@pytest.mark.parametrize("kind", TRANSIENT_KINDS)
def test_transient_failure_retried_then_failed_with_attempt_count(kind: str) -> None:
    failure = FetchFailure(kind, True, "detail")
    assert classify(None, failure, 1, MAX) == Outcome(Verdict.RETRY, kind)
    assert classify(None, failure, 2, MAX) == Outcome(Verdict.RETRY, kind)
    assert classify(None, failure, 3, MAX) == Outcome(Verdict.FAILED, f"{kind} after 3 attempts")


def test_transient_failure_reason_matches_the_documented_example() -> None:
    outcome = classify(None, FetchFailure("timeout", True), 3, 3)
    assert outcome == Outcome(Verdict.FAILED, "timeout after 3 attempts")


def test_transient_failure_with_a_single_attempt_has_no_suffix() -> None:
    assert classify(None, FetchFailure("timeout", True), 1, 1) == Outcome(Verdict.FAILED, "timeout")


@pytest.mark.parametrize("kind", PERMANENT_KINDS)
@pytest.mark.parametrize("attempts", [1, 2, 3])
def test_non_transient_failure_fails_at_once_with_its_kind(kind: str, attempts: int) -> None:
    assert classify(None, FetchFailure(kind, False, "x"), attempts, MAX) == Outcome(Verdict.FAILED, kind)


def test_failure_wins_over_a_status() -> None:
    """A failure (e.g. the body broke after a 200 status line) decides, not the status."""
    assert classify(200, FetchFailure("too large", False), 1, MAX) == Outcome(Verdict.FAILED, "too large")


# --------------------------------------------------------------------------- retry_delay


@pytest.mark.parametrize("attempts", range(1, 12))
def test_retry_delay_between_half_and_full_delay(attempts: int) -> None:
    base, cap = 2.0, 300.0
    full = min(cap, base * 2 ** (attempts - 1))
    rng = random.Random(attempts)
    for _ in range(200):
        d = retry_delay(attempts, base, cap, rng)
        assert full / 2 <= d <= full


def test_retry_delay_uses_the_whole_jitter_range() -> None:
    rng = random.Random(7)
    values = [retry_delay(3, 2.0, 300.0, rng) for _ in range(500)]  # full delay 8
    assert min(values) < 4.5 and max(values) > 7.5


def test_retry_delay_is_reproducible_with_a_seeded_rng() -> None:
    a = [retry_delay(n, rng=random.Random(42)) for n in range(1, 8)]
    b = [retry_delay(n, rng=random.Random(42)) for n in range(1, 8)]
    assert a == b


def test_retry_delay_grows_with_attempts() -> None:
    rng = random.Random(1234)
    for _ in range(50):
        delays = [retry_delay(n, 2.0, 10_000.0, rng) for n in range(1, 10)]
        assert delays == sorted(delays)
        assert delays[-1] > 4 * delays[0]
    # the bounds themselves double: attempt 1 is in [1, 2], attempt 4 in [8, 16]
    assert 1.0 <= retry_delay(1, rng=rng) <= 2.0
    assert 8.0 <= retry_delay(4, rng=rng) <= 16.0


@pytest.mark.parametrize("attempts", [9, 10, 20, 60])
def test_retry_delay_capped(attempts: int) -> None:
    rng = random.Random(attempts)
    for _ in range(100):
        assert 150.0 <= retry_delay(attempts, 2.0, 300.0, rng) <= 300.0
        assert 5.0 <= retry_delay(attempts, 1.0, 10.0, rng) <= 10.0


def test_retry_delay_attempt_zero_uses_the_base() -> None:
    rng = random.Random(0)
    assert 1.0 <= retry_delay(0, 2.0, 300.0, rng) <= 2.0


def test_retry_delay_capped_for_a_huge_attempt_count() -> None:
    d = retry_delay(2000, 2.0, 300.0, random.Random(0))
    assert 150.0 <= d <= 300.0
