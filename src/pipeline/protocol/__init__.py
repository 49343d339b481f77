"""What an interpreter's writer needs (with `pipeline.loop.agent_loop`): the commands the
loop yields and the replies each expects, the model events a model call answers with,
the requests a processor's hook may make (and the started ones: `Start`, `Ready`,
`Collect`), the `Driver` that holds what every interpreter keeps about a run, and what a
trace records."""

from effects.requests import CommitWrites, Request, Write, WrongAnswer, declared_answer
from effects.started import STARTED_REQUESTS, Collect, Job, Ready, Start
from pipeline.protocol.driver import LAST, Driver, RunLog, Watch, discard
from pipeline.protocol.replies import (  # the commands with the replies they expect
    MODEL_REPLY_TYPES,
    REPLIES,
    AgentLoop,
    Asking,
    AwaitHook,
    CallModel,
    CloseStream,
    Command,
    Done,
    EffectRecord,
    EffectRecorder,
    LoopCommand,
    ModelReply,
    Perform,
    ProtocolError,
    Publish,
    Pull,
    RunCancelled,
    RunTools,
    Sleep,
    ToolInvocation,
    ToolOutcome,
    checked,
    outcomes_match,
)
from pipeline.values.chunks import ModelEvent, ModelFinish
from pipeline.values.fallback import (
    CircuitCheck,
    CircuitOutcome,
    CircuitReport,
    CircuitStates,
)
from pipeline.values.model import ModelEnded, ModelFailed

__all__ = [
    # the commands, and what each is answered with
    "Command", "CallModel", "Pull", "CloseStream", "Publish", "RunTools", "Perform",
    "AwaitHook", "Sleep", "Done", "LoopCommand", "AgentLoop", "Asking", "checked",
    "ProtocolError", "RunCancelled", "ToolInvocation", "ToolOutcome", "outcomes_match",
    # a model call's events and how its stream ends
    "ModelEvent", "ModelFinish", "ModelEnded", "ModelFailed", "ModelReply",
    "MODEL_REPLY_TYPES", "LAST", "REPLIES",
    # requests of processors' hooks, started or waited for
    "Request", "WrongAnswer", "declared_answer", "Start", "Ready", "Collect", "Job",
    "STARTED_REQUESTS", "Write", "CommitWrites",
    # the requests the loop makes of the interpreter's circuit breaker (fallback models)
    "CircuitCheck", "CircuitStates", "CircuitReport", "CircuitOutcome",
    # the interpreter's half of a run, and what it is watched and recorded by
    "Driver", "RunLog", "Watch", "discard", "EffectRecord", "EffectRecorder",
]
