"""What a blue-green replay's gates return when green passed them: the inputs of the approval prompt.

Shared by the prompt's unit tests and the notification tests, so both judge the same run.
"""

from __future__ import annotations

from typing import Any

REQUEST: dict[str, Any] = {
    "green_deployment_id": "green-2",
    "blue_deployment_id": "blue",
    "version": "2.1.0",
    "revenue_tolerance": "0.01",
    "count_tolerance": 0,
    "max_offsets_behind": 100,
}
CAUGHT_UP: dict[str, Any] = {"offsets_behind": 7, "seconds": 42.0}
QUALITY: dict[str, Any] = {
    "success": True,
    "expectations": 23,
    "failed_checks": [],
    "stats": {"gold_windows_in_interval": 48, "bronze_records_read": 1200},
    "failures": [],
}
DIFF: dict[str, Any] = {
    "passed": True,
    "common_from": "2026-11-22T09:00:00",
    "common_until": "2026-11-22T10:00:00",
    "windows_compared": 48,
    "mismatched_windows": 0,
    "blue_revenue": "12345.67",
    "green_revenue": "12345.68",
    "blue_orders": 1200,
    "green_orders": 1200,
    "sample": [],
}
