"""The reprocess repairs a range only once the app will not write its windows again."""

from __future__ import annotations

import json
from pathlib import Path

from revenue_platform.reprocessing import windows_closed
from revenue_platform.streaming.finality import app_watermark


def plan(progress_file: Path) -> dict[str, str]:
    return {
        "deployment_id": "blue",
        "range_start": "2026-11-22T09:00:00+00:00",
        "range_end": "2026-11-22T10:00:00+00:00",
        "progress_file": str(progress_file),
    }


def test_no_progress_yet_means_wait(tmp_path: Path) -> None:
    assert app_watermark(str(tmp_path / "missing.json")) is None
    assert not windows_closed(plan(tmp_path / "missing.json"))
    garbled = tmp_path / "garbled.json"
    garbled.write_text("{not json")
    assert not windows_closed(plan(garbled))


def test_the_range_is_closed_once_the_watermark_reaches_its_end(tmp_path: Path) -> None:
    progress = tmp_path / "blue__revenue.json"
    for watermark, closed in (
        (None, False),
        ("1970-01-01T00:00:00.000Z", False),
        ("2026-11-22T09:59:59.999Z", False),
        ("2026-11-22T10:00:00.000Z", True),
        ("2026-11-23T08:00:00.000Z", True),
    ):
        progress.write_text(json.dumps({"watermark": watermark, "batch_id": 7}))
        assert windows_closed(plan(progress)) is closed, watermark


def test_a_quiet_stream_closes_the_range_once_the_app_read_all_of_kafka_a_watermark_delay_after_it(
    tmp_path: Path,
) -> None:
    progress = tmp_path / "blue__revenue.json"
    idle_plan = {**plan(progress), "watermark": "30 seconds"}
    # The watermark of an idle stream stands still, before the range end.
    for caught_up, closed in (
        (None, False),
        ("2026-11-22T10:00:00+00:00", False),
        ("2026-11-22T10:00:29.999000+00:00", False),
        ("2026-11-22T10:00:30+00:00", True),
        ("2026-11-22T11:15:00+00:00", True),
    ):
        progress.write_text(json.dumps({"watermark": "2026-11-22T09:41:00.000Z", "caught_up_at": caught_up}))
        assert windows_closed(idle_plan) is closed, caught_up
    # A plan without the deployment's watermark delay waits for the watermark alone.
    assert not windows_closed(plan(progress))
