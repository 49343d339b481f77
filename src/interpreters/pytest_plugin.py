"""Moved to `interpreters.sim.pytest_plugin`.

This path works for one more release and warns when imported: change the import."""

import warnings

from interpreters.sim.pytest_plugin import (
    async_simulator as async_simulator,
)
from interpreters.sim.pytest_plugin import (
    simulator as simulator,
)
from interpreters.testing import AsyncSimulatorFactory as AsyncSimulatorFactory
from interpreters.testing import SimulatorFactory as SimulatorFactory

warnings.warn(
    "interpreters.pytest_plugin moved to interpreters.sim.pytest_plugin; import it from there",
    DeprecationWarning,
    stacklevel=2,
)
