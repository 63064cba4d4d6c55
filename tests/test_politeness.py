"""Unit tests for spider.politeness: pure functions from what a host did to when we may ask again."""

from __future__ import annotations

import email.utils

import pytest

from spider.politeness import (MAX_RETRY_AFTER, PARK_AFTER, PARK_FOR, RECOVERY, HostState,
                               after_failure, after_response, effective_delay, parse_host_line,
                               parse_retry_after)

NOW = 1_700_000_000.0


def http_date(when: float) -> str:
    return email.utils.formatdate(when, usegmt=True)


# ============================================================================ parse_retry_after


@pytest.mark.parametrize("value, expected", [
    ("0", 0.0), ("2", 2.0), ("120", 120.0), (" 30 ", 30.0), ("3600", 3600.0),
])
def test_retry_after_seconds(value: str, expected: float) -> None:
    assert parse_retry_after(value, NOW) == expected


def test_retry_after_seconds_are_capped() -> None:
    assert MAX_RETRY_AFTER == 3600.0
    assert parse_retry_after("3601", NOW) == MAX_RETRY_AFTER
    assert parse_retry_after("86400", NOW) == MAX_RETRY_AFTER
    assert parse_retry_after("9" * 400, NOW) == MAX_RETRY_AFTER


def test_retry_after_http_date_in_the_future() -> None:
    assert parse_retry_after(http_date(NOW + 90), NOW) == pytest.approx(90.0)
    # NOW is Tue, 14 Nov 2023 22:13:20 GMT
    assert parse_retry_after("Tue, 14 Nov 2023 22:13:50 GMT", NOW) == pytest.approx(30.0)
    assert parse_retry_after("Tue, 14 Nov 2023 22:13:50 GMT", NOW - 10) == pytest.approx(40.0)


def test_retry_after_http_date_in_the_past_means_now() -> None:
    assert parse_retry_after(http_date(NOW - 500), NOW) == 0.0


def test_retry_after_http_date_far_ahead_is_capped() -> None:
    assert parse_retry_after(http_date(NOW + 7 * 86400), NOW) == MAX_RETRY_AFTER


@pytest.mark.parametrize("value", [None, "", "   ", "soon", "-5", "2.5", "1e3", "0x10",
                                   "Wed, 99 Foo 2015 07:28:00 GMT", "Mon, 32 Jan 2024 25:61:00 GMT"])
def test_retry_after_garbage_is_none(value: str | None) -> None:
    assert parse_retry_after(value, NOW) is None


@pytest.mark.parametrize("value", ["\xb2", "\xb9", "1\xb3"])
def test_retry_after_unicode_digits_are_garbage(value: str) -> None:
    # superscripts pass str.isdigit() but float() refuses them; a server can send them (Latin-1)
    assert parse_retry_after(value, NOW) is None


# ============================================================================ after_response: 429 / 503


@pytest.mark.parametrize("status", [429, 503])
def test_retry_after_sets_next_allowed(status: int) -> None:
    state = HostState(next_allowed=NOW - 10, delay=0.5, failures=3, reason="-")
    new = after_response(state, NOW, status, "2", 0.1, floor=0.2, cap=60)
    assert new.next_allowed == NOW + 2
    assert new.delay == 0.5                  # the delay is left as it was (not below the floor)
    assert new.failures == 0
    assert new.reason == f"retry-after {status}"


def test_retry_after_as_a_date() -> None:
    new = after_response(HostState(), NOW, 429, http_date(NOW + 40), 0.1, floor=0.0, cap=60)
    assert new.next_allowed == pytest.approx(NOW + 40)


def test_retry_after_never_moves_next_allowed_earlier() -> None:
    state = HostState(next_allowed=NOW + 100)
    assert after_response(state, NOW, 429, "5", 0.1, floor=0.0, cap=60).next_allowed == NOW + 100


def test_retry_after_is_not_bounded_by_max_delay() -> None:
    # --max-delay caps the delay between requests, not the server's explicit Retry-After
    new = after_response(HostState(), NOW, 503, "600", 0.1, floor=0.0, cap=60)
    assert new.next_allowed == NOW + 600
    assert new.delay == 0.0


def test_retry_after_raises_the_delay_to_the_floor() -> None:
    new = after_response(HostState(delay=0.1), NOW, 429, "1", 0.1, floor=2.0, cap=60)
    assert new.delay == 2.0


@pytest.mark.parametrize("status", [429, 503])
def test_without_retry_after_the_delay_doubles(status: int) -> None:
    state = HostState(NOW, delay=3.0)
    new = after_response(state, NOW, status, None, 0.1, floor=1.0, cap=60)
    assert new.delay == 6.0
    assert new.next_allowed == NOW + 6.0
    assert new.reason == f"slowed down after {status}"
    assert new.failures == 0
    again = after_response(new, NOW + 6, status, None, 0.1, floor=1.0, cap=60)
    assert again.delay == 12.0 and again.next_allowed == NOW + 6 + 12


def test_without_retry_after_the_delay_is_at_least_one_second() -> None:
    new = after_response(HostState(), NOW, 429, None, 0.1, floor=0.0, cap=60)
    assert new.delay == 1.0 and new.next_allowed == NOW + 1.0
    assert after_response(HostState(delay=0.3), NOW, 503, None, 0.1, floor=0.2, cap=60).delay == 1.0


def test_without_retry_after_the_doubling_uses_the_floor() -> None:
    # the current delay is max(state.delay, floor): a Crawl-delay of 5 doubles to 10
    assert after_response(HostState(delay=0.0), NOW, 429, None, 0.1, floor=5.0, cap=60).delay == 10.0


def test_without_retry_after_the_delay_is_capped() -> None:
    state = HostState(delay=40.0)
    new = after_response(state, NOW, 503, None, 0.1, floor=1.0, cap=60)
    assert new.delay == 60.0 and new.next_allowed == NOW + 60
    assert after_response(HostState(delay=0.0), NOW, 429, None, 0.1, floor=0.0, cap=0.5).delay == 0.5


def test_garbage_retry_after_counts_as_none() -> None:
    new = after_response(HostState(delay=2.0), NOW, 429, "whenever", 0.1, floor=0.0, cap=60)
    assert new.delay == 4.0 and new.reason == "slowed down after 429"


# ============================================================================ after_response: success


def test_success_recovers_towards_the_floor() -> None:
    state = HostState(NOW + 5, delay=8.0, failures=0, reason="slowed down after 429")
    new = after_response(state, NOW, 200, None, 0.1, floor=1.0, cap=60)
    assert new.delay == 8.0 * RECOVERY == 6.0
    assert new.next_allowed == NOW + 5            # a success does not touch the reservation
    assert new.reason == "-"
    delays = []
    s = new
    for _ in range(30):
        s = after_response(s, NOW, 200, None, 0.1, floor=1.0, cap=60)
        delays.append(s.delay)
    assert all(b <= a for a, b in zip(delays, delays[1:]))
    assert min(delays) == 1.0 == delays[-1]       # reaches the floor, never goes below it


def test_success_never_goes_below_the_floor() -> None:
    new = after_response(HostState(delay=1.1), NOW, 200, None, 0.1, floor=1.0, cap=60)
    assert new.delay == 1.0                       # 1.1 * 0.75 = 0.825, held at the floor
    assert after_response(HostState(delay=0.0), NOW, 200, None, 0.1, floor=2.0, cap=60).delay == 2.0


def test_success_at_the_floor_stays_there() -> None:
    new = after_response(HostState(delay=1.0), NOW, 200, None, 0.1, floor=1.0, cap=60)
    assert new.delay == 1.0


def test_success_resets_failures() -> None:
    new = after_response(HostState(failures=7), NOW, 200, None, 0.1, floor=0.0, cap=60)
    assert new.failures == 0


@pytest.mark.parametrize("status", [200, 301, 404, 410, 500])
def test_other_statuses_count_as_an_answer(status: int) -> None:
    new = after_response(HostState(delay=4.0, failures=2), NOW, status, "100", 0.1, floor=1.0, cap=60)
    assert new.delay == 3.0 and new.failures == 0
    assert new.next_allowed == 0.0                 # Retry-After only matters with 429/503


# ============================================================================ auto-throttle


def test_auto_throttle_moves_halfway_to_the_latency() -> None:
    new = after_response(HostState(delay=1.0), NOW, 200, None, 3.0, floor=0.5, cap=60, auto_throttle=True)
    assert new.delay == 2.0
    down = after_response(HostState(delay=4.0), NOW, 200, None, 1.0, floor=0.5, cap=60, auto_throttle=True)
    assert down.delay == 2.5


def test_auto_throttle_stays_within_floor_and_cap() -> None:
    fast = after_response(HostState(delay=1.0), NOW, 200, None, 0.01, floor=0.8, cap=60, auto_throttle=True)
    assert fast.delay == 0.8
    slow = after_response(HostState(delay=10.0), NOW, 200, None, 500.0, floor=0.0, cap=20, auto_throttle=True)
    assert slow.delay == 20.0


def test_auto_throttle_converges_on_the_latency() -> None:
    s = HostState(delay=0.0)
    for _ in range(40):
        s = after_response(s, NOW, 200, None, 1.5, floor=0.1, cap=60, auto_throttle=True)
    assert s.delay == pytest.approx(1.5, abs=1e-6)


def test_auto_throttle_still_obeys_429() -> None:
    new = after_response(HostState(delay=1.0), NOW, 429, "7", 0.1, floor=0.5, cap=60, auto_throttle=True)
    assert new.next_allowed == NOW + 7


# ============================================================================ after_failure / parking


def test_failures_are_counted() -> None:
    s = HostState(NOW + 1, delay=2.0, failures=0, reason="-")
    for n in range(1, PARK_AFTER):
        s = after_failure(s, NOW, floor=0.5)
        assert s.failures == n
        assert s.next_allowed == NOW + 1          # not parked yet: nothing else changes
        assert s.delay == 2.0 and s.reason == "-"


def test_the_tenth_failure_parks_the_host() -> None:
    assert PARK_AFTER == 10 and PARK_FOR == 300.0
    s = HostState(failures=PARK_AFTER - 1)
    parked = after_failure(s, NOW, floor=0.5)
    assert parked.next_allowed == NOW + PARK_FOR
    assert parked.failures == 0                   # counting starts again after the pause
    assert parked.reason == "parked after 10 connection errors"
    assert parked.delay == 0.5


def test_parking_never_shortens_a_longer_wait() -> None:
    s = HostState(next_allowed=NOW + 1000, failures=PARK_AFTER - 1)
    assert after_failure(s, NOW, 0.0).next_allowed == NOW + 1000


def test_a_success_in_between_restarts_the_count() -> None:
    s = HostState()
    for _ in range(PARK_AFTER - 1):
        s = after_failure(s, NOW, 0.0)
    s = after_response(s, NOW, 200, None, 0.1, floor=0.0, cap=60)
    s = after_failure(s, NOW, 0.0)
    assert s.failures == 1 and s.next_allowed < NOW + PARK_FOR


def test_effective_delay() -> None:
    assert effective_delay(HostState(delay=0.2), 1.0) == 1.0
    assert effective_delay(HostState(delay=3.0), 1.0) == 3.0


# ============================================================================ hosts.txt lines


@pytest.mark.parametrize("host, state", [
    ("example.com", HostState()),
    ("127.0.0.1:8080", HostState(NOW + 12.5, 2.25, 3, "slowed down after 429")),
    ("a.example", HostState(NOW, 0.0, 0, "parked after 10 connection errors")),
    ("[::1]:81", HostState(0.0, 60.0, 9, "retry-after 503")),
])
def test_host_line_round_trip(host: str, state: HostState) -> None:
    line = state.line(host)
    assert line.endswith("\n") and line.count("\n") == 1
    assert line.split("\t")[0] == host and len(line.split("\t")) == 5
    back_host, back = parse_host_line(line)
    assert back_host == host
    assert back == state


def test_host_line_format() -> None:
    assert HostState(NOW + 0.5, 1.0, 2, "x").line("h") == "h\t1700000000.500\t1.000\t2\tx\n"
    assert HostState(reason="").line("h").endswith("\t-\n")


def test_short_host_lines_take_defaults() -> None:
    assert parse_host_line("h\t12.5\n") == ("h", HostState(12.5, 0.0, 0, "-"))
    assert parse_host_line("h\t1\t2") == ("h", HostState(1.0, 2.0, 0, "-"))


@pytest.mark.parametrize("line", ["", "\n", "justahost\n", "\t5\n", "h\tsoon\n", "h\t1\tslow\n",
                                  "h\t1\t2\tmany\tx\n"])
def test_bad_host_lines_raise_value_error(line: str) -> None:
    with pytest.raises(ValueError):
        parse_host_line(line)
