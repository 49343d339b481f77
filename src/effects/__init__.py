"""The vocabulary of the library: effect values, commands and requests.

Effects are what a processor hook returns; commands are what the agent loop hands an
interpreter; requests are the I/O a generator hook asks for. All are frozen msgspec
Structs and carry no behaviour (effects and commands tagged). They are generic in their
payloads so that this package depends on nothing: `pipeline` fills in the message, chunk
and request types.
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
from effects.requests import CommitWrites, Request, RequestClass, Write, WrongAnswer, ask
from effects.started import Collect, Job, Ready, Start, collect, ready, start
from effects.values import (
    UNCHANGED,
    Abort,
    AskApproval,
    Continue,
    Effect,
    Emit,
    Out,
    Replace,
    Retry,
    Skip,
    SkipCall,
    Unchanged,
)

__distribution__ = "pipeline-agents"
"""Whose `effects` this is (`interpreters` refuses another distribution's)."""

__all__ = [
    "UNCHANGED",
    "Abort",
    "AskApproval",
    "AwaitHook",
    "CallModel",
    "CloseStream",
    "Collect",
    "Command",
    "CommitWrites",
    "Continue",
    "Effect",
    "Emit",
    "Done",
    "Job",
    "Out",
    "Perform",
    "Publish",
    "Pull",
    "Ready",
    "Replace",
    "Request",
    "RequestClass",
    "Retry",
    "RunTools",
    "Skip",
    "SkipCall",
    "Sleep",
    "Start",
    "Unchanged",
    "Write",
    "WrongAnswer",
    "ask",
    "collect",
    "ready",
    "start",
]
