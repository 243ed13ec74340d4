"""The console's words for durations, counts and metric rows."""

from tbconsole.common.formatting import format_count, format_duration


def test_durations_and_counts():
    assert format_duration(None) == "–" and format_duration(59) == "59s" and format_duration(61) == "1m01s"
    assert format_duration(3 * 3600 + 120) == "3h02m"
    assert format_count(1234) == "1.2k" and format_count(12) == "12" and format_count(2_500_000) == "2.5M"


def test_metric_rows_carry_their_units():
    from tbconsole.ui.present.wording import METRIC_ROWS

    rows = {row.label: row for row in METRIC_ROWS}
    assert rows["step time"].shown(201.0) == "3m21s"
    assert rows["tokens"].shown(123_456) == "123k"
    assert rows["entropy"].shown(None) == "–"
