"""The public paths that moved keep working for one release: importing one warns and
gives the very objects of the new home."""

from __future__ import annotations

import importlib
import sys
import warnings

import pytest

MOVED = {
    "interpreters.simulator": (
        "interpreters.testing", ("Simulator", "Say", "ScriptedModel", "call"),
    ),
    "interpreters.approvals_sql": ("interpreters.approvals", ("SQLiteApprovalStore",
                                                              "open_approval_store")),
    "interpreters.otel": ("interpreters.observers.otel", ("OTelObserver",)),
    "interpreters.prices": ("interpreters.providers.prices", ("genai_prices",)),
    "interpreters.pytest_plugin": ("interpreters.sim.pytest_plugin", ("simulator",
                                                                      "async_simulator")),
}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_warns_and_gives_the_new_objects(old: str) -> None:
    new, names = MOVED[old]
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=f"{old} moved to"):
        module = importlib.import_module(old)
    home = importlib.import_module(new)
    for name in names:
        assert getattr(module, name) is getattr(home, name)


def test_the_simulator_names_of_interpreters_moved_to_testing() -> None:
    import interpreters
    import interpreters.testing

    with pytest.warns(DeprecationWarning, match="interpreters.Say moved to interpreters.testing"):
        say = interpreters.Say
    assert say is interpreters.testing.Say
    assert "Say" not in interpreters.__all__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
            interpreters.Nothing  # noqa: B018
