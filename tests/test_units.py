"""Parsing of sizes, rates and durations (cclab.units)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cclab.units import FRAME_BYTES, Size, bdp_bytes, parse_bytes, parse_duration_ns, parse_rate_bps, parse_size

DECIMAL = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9}
BINARY = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30}


@pytest.mark.parametrize(
    ("text", "expected_bytes"),
    [("200000B", 200_000), ("100KB", 100_000), ("10MB", 10_000_000), ("1GB", 10**9),
     ("64KiB", 65_536), ("10MiB", 10_485_760), ("1.5KB", 1_500), ("100kB", 100_000)],
)
def test_byte_sizes_use_decimal_kb_and_binary_kib(text: str, expected_bytes: int) -> None:
    assert parse_bytes(text) == expected_bytes


def test_a_packet_is_a_whole_1514_byte_frame() -> None:
    size = parse_size("250pkt")
    assert size == Size(250, "packets")
    assert size.bytes_for(rate_bps=10**8, rtt_ns=25_000_000) == 250 * 1514 == 250 * FRAME_BYTES


def test_bdp_is_rate_times_base_rtt_in_bytes() -> None:
    # 100 Mbit/s x 25 ms = 312,500 bytes.
    assert parse_size("1bdp").bytes_for(rate_bps=100_000_000, rtt_ns=25_000_000) == 312_500
    assert parse_size("0.3bdp").bytes_for(rate_bps=100_000_000, rtt_ns=25_000_000) == 93_750


@pytest.mark.parametrize(
    ("text", "fragment"),
    [("lots", "not a size"), ("10XB", "unknown size unit"), ("-5KB", "negative"), ("2.5pkt", "whole number"),
     ("10Mb", "lowercase b means bits"), ("", "not a size"), ("10", "not a size")],
)
def test_bad_sizes_say_what_is_wrong(text: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        parse_size(text)


def test_a_size_that_must_be_bytes_rejects_packets_and_bdp() -> None:
    with pytest.raises(ValueError, match="bytes"):
        parse_bytes("10pkt")
    with pytest.raises(ValueError, match="bytes"):
        parse_bytes("1bdp")


@pytest.mark.parametrize(
    ("text", "expected_bps"),
    [("500mbit", 500_000_000), ("1gbit", 10**9), ("100mbps", 100_000_000), ("64kbit", 64_000), ("1.5Gbit", 1_500_000_000)],
)
def test_rates_are_in_bits_per_second(text: str, expected_bps: int) -> None:
    assert parse_rate_bps(text) == expected_bps


@pytest.mark.parametrize(
    ("text", "expected_ns"), [("200ms", 200_000_000), ("25ms", 25_000_000), ("1s", 10**9), ("500us", 500_000)]
)
def test_durations_are_in_nanoseconds(text: str, expected_ns: int) -> None:
    assert parse_duration_ns(text) == expected_ns


def test_bad_rates_and_durations_name_the_units_they_accept() -> None:
    with pytest.raises(ValueError, match="mbit"):
        parse_rate_bps("100 furlongs")
    with pytest.raises(ValueError, match="ms"):
        parse_duration_ns("3 fortnights")


@given(st.integers(min_value=0, max_value=10**6), st.sampled_from(sorted(DECIMAL | BINARY)))
def test_every_byte_unit_multiplies_exactly(count: int, unit: str) -> None:
    assert parse_bytes(f"{count}{unit}") == count * (DECIMAL | BINARY)[unit]


@given(st.integers(min_value=1, max_value=10**6), st.sampled_from(["K", "M", "G"]))
def test_a_binary_unit_is_always_larger_than_its_decimal_namesake(count: int, prefix: str) -> None:
    assert parse_bytes(f"{count}{prefix}iB") > parse_bytes(f"{count}{prefix}B")


@given(
    st.floats(min_value=0.01, max_value=100, allow_nan=False),
    st.integers(min_value=10**6, max_value=10**10),
    st.integers(min_value=10**5, max_value=10**9),
)
def test_bdp_multiples_scale_with_rate_and_rtt(multiple: float, rate_bps: int, rtt_ns: int) -> None:
    resolved = parse_size(f"{multiple!r}bdp").bytes_for(rate_bps, rtt_ns)
    assert abs(resolved - multiple * rate_bps * rtt_ns / 8e9) <= 0.5
    assert bdp_bytes(rate_bps, rtt_ns) == rate_bps * rtt_ns / 8e9


@given(st.integers(min_value=0, max_value=10**6))
def test_unit_prefixes_are_consistent_across_rates_and_durations(count: int) -> None:
    assert parse_rate_bps(f"{count}gbit") == 1000 * parse_rate_bps(f"{count}mbit") == 10**6 * parse_rate_bps(f"{count}kbit")
    assert parse_duration_ns(f"{count}s") == 1000 * parse_duration_ns(f"{count}ms")


@given(st.text(max_size=20))
def test_any_text_either_parses_or_raises_a_value_error(text: str) -> None:
    for parse in (parse_size, parse_rate_bps, parse_duration_ns):
        try:
            parse(text)
        except ValueError as error:
            assert "\n" not in str(error)
