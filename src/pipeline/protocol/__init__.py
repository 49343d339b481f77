"""What an interpreter's writer needs: the commands' replies and the `Driver`."""

from pipeline.protocol.driver import Driver, RunLog, Watch, discard
from pipeline.protocol.replies import (
    MODEL_REPLY_TYPES,
    AgentLoop,
    Asking,
    EffectRecord,
    EffectRecorder,
    LoopCommand,
    ModelEnded,
    ModelFailed,
    ModelReply,
    ProtocolError,
    RunCancelled,
    ToolInvocation,
    ToolOutcome,
    checked,
    outcomes_match,
)

__all__ = [
    "MODEL_REPLY_TYPES", "AgentLoop", "Asking", "Driver", "EffectRecord", "EffectRecorder",
    "LoopCommand", "ModelEnded", "ModelFailed", "ModelReply", "ProtocolError", "RunCancelled",
    "RunLog", "ToolInvocation", "ToolOutcome", "Watch", "checked", "discard", "outcomes_match",
]
