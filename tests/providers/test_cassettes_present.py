"""The recorded traffic is vendored: every clone has it, so the conformance tests never skip."""

from __future__ import annotations

from tests.providers.cassettes import index_files, traffic_dir


def test_recorded_traffic_is_present() -> None:
    root = traffic_dir()
    assert (root / "INDEX.md").exists(), f"no recorded traffic at {root}"
    assert (root / "NOTICE.md").exists(), "the vendored traffic needs its notice"
    assert len(index_files(root)) >= 30
