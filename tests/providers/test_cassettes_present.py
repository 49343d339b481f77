"""In CI the recorded traffic must be there: otherwise the conformance tests would skip."""

from __future__ import annotations

import os

import pytest

from tests.providers.cassettes import index_files, traffic_dir


@pytest.mark.skipif(not os.environ.get("CI"), reason="outside CI the traffic is optional")
def test_recorded_traffic_is_present_in_ci() -> None:
    root = traffic_dir()
    assert (root / "INDEX.md").exists(), (
        f"no recorded traffic at {root}: set PIPELINE_TRAFFIC_DIR or put shared/ beside the clone"
    )
    assert len(index_files(root)) >= 30
