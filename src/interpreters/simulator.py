"""Moved to `interpreters.testing`.

This path works for one more release and warns when imported: change the import."""

import warnings

from interpreters.sim.clock import (
    until_idle as until_idle,
)
from interpreters.sim.simulator import (
    CANCELLABLE as CANCELLABLE,
)
from interpreters.sim.simulator import (
    S as S,
)
from interpreters.sim.simulator import (
    ScriptedStream as ScriptedStream,
)
from interpreters.sim.simulator import (
    SimulatorBase as SimulatorBase,
)
from interpreters.sim.simulator import (
    T as T,
)
from interpreters.testing import Fail as Fail
from interpreters.testing import Say as Say
from interpreters.testing import ScriptedCall as ScriptedCall
from interpreters.testing import ScriptedModel as ScriptedModel
from interpreters.testing import ScriptedRoutes as ScriptedRoutes
from interpreters.testing import SimRun as SimRun
from interpreters.testing import Simulator as Simulator
from interpreters.testing import VirtualClock as VirtualClock
from interpreters.testing import call as call

warnings.warn(
    "interpreters.simulator moved to interpreters.testing; import it from there",
    DeprecationWarning,
    stacklevel=2,
)
