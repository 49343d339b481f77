"""The vocabulary of the library: effect values and commands.

Effects are what a processor hook returns; commands are what the agent loop hands an
interpreter. Both are frozen, tagged msgspec Structs and carry no behaviour. They are
generic in their payloads so that this package depends on nothing: `pipeline` fills in
the message, chunk and request types.
"""

from effects.commands import (
    AwaitHook,
    CallModel,
    CloseStream,
    Command,
    Done,
    Perform,
    Publish,
    Pull,
    RunTools,
    Sleep,
)
from effects.values import (
    UNCHANGED,
    Abort,
    Continue,
    Effect,
    Emit,
    Out,
    Replace,
    Retry,
    Skip,
    Unchanged,
)

__all__ = [
    "UNCHANGED",
    "Abort",
    "AwaitHook",
    "CallModel",
    "CloseStream",
    "Command",
    "Continue",
    "Effect",
    "Emit",
    "Done",
    "Out",
    "Perform",
    "Publish",
    "Pull",
    "Replace",
    "Retry",
    "RunTools",
    "Skip",
    "Sleep",
    "Unchanged",
]
