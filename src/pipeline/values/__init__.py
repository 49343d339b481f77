"""The values a run is made of: messages and their parts, the chunks a run streams,
a model call's settings, a run's result and its errors, and the bounds on what comes in.

Frozen data and the pure checks over it; nothing here knows the loop. The values an app
or a processor uses most are exported by `pipeline` itself (`Message`, `TextDelta`,
`RunResult`...); this namespace has the rest."""

from pipeline.values.bounds import (
    MAX_CONVERT_CHARS,
    MAX_JSON_DEPTH,
    MAX_TOOL_ARGS_BYTES,
    MAX_TOOL_CALLS_PER_RESPONSE,
    MAX_TOOL_RESULT_BYTES,
)
from pipeline.values.chunks import (
    ErrorChunk,
    Finish,
    FinishReason,
    OutputPartial,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    ServerToolCall,
    ServerToolResult,
    SourceChunk,
    StepFinish,
    StepReset,
    StepStart,
    TextEnd,
    TextStart,
    ToolApprovalRequest,
    ToolApprovalResponse,
    ToolCall,
    ToolCallDelta,
    ToolError,
    ToolResult,
    Tripwire,
    Usage,
)
from pipeline.values.fallback import (
    DEFAULT_FAIL_OVER,
    FailoverPolicy,
    FailureKind,
    Fallback,
    FallbackModel,
    ModelAttempt,
    failure_kind,
)
from pipeline.values.messages import (
    INSTRUCTIONS_TAG,
    DataPart,
    FilePart,
    JsonObject,
    Part,
    ReasoningPart,
    Role,
    RunInput,
    ServerToolCallPart,
    ServerToolResultPart,
    Source,
    SourcePart,
    StepStartPart,
    ToolCallPart,
    ToolResultPart,
)
from pipeline.values.model import (
    ApiError,
    OutputMode,
    PromptCache,
    StructuredOutput,
    ToolChoice,
    ToolChoiceTool,
    ToolSpec,
)
from pipeline.values.output_type import (
    OutputDecodeError,
    TypedOutput,
)
from pipeline.values.result import (
    AgentNode,
    ApiFailed,
    Cancelled,
    GatedCall,
    InvalidInput,
    JudgeCall,
    KeptChild,
    OutputInvalid,
    OutputResult,
    PendingApproval,
    ProcessorFailed,
    Review,
    ReviewNote,
    RunError,
    RunFailedError,
    Spending,
    Status,
    StepResult,
    StepTool,
    StreamFailed,
    SuspendedRun,
    Suspension,
)

__all__ = [
    "ErrorChunk", "Finish", "FinishReason", "ReasoningDelta", "ReasoningEnd", "ReasoningStart",
    "SourceChunk", "StepFinish", "StepStart", "TextEnd", "TextStart", "ToolApprovalRequest",
    "ToolApprovalResponse", "ToolCall", "ToolCallDelta", "ToolError", "ToolResult", "Tripwire",
    "Usage", "DataPart", "FilePart", "INSTRUCTIONS_TAG", "JsonObject", "Part", "ReasoningPart",
    "Role", "RunInput", "Source", "SourcePart", "StepStartPart", "ToolCallPart",
    "ToolResultPart", "ApiError", "PromptCache", "StructuredOutput", "ToolChoice",
    "ToolChoiceTool", "ToolSpec", "ApiFailed", "Cancelled", "GatedCall", "InvalidInput",
    "JudgeCall", "OutputInvalid", "OutputResult", "PendingApproval", "Review", "ReviewNote",
    "ProcessorFailed", "RunError", "RunFailedError", "Spending", "Status", "StepResult",
    "StepTool", "StreamFailed", "SuspendedRun", "Suspension", "OutputDecodeError",
    "TypedOutput", "MAX_CONVERT_CHARS", "MAX_JSON_DEPTH", "MAX_TOOL_ARGS_BYTES",
    "MAX_TOOL_CALLS_PER_RESPONSE", "MAX_TOOL_RESULT_BYTES", "ServerToolCall",
    "ServerToolResult", "ServerToolCallPart", "ServerToolResultPart", "AgentNode", "KeptChild",
    # fallback models, and what a step's attempts leave
    "Fallback", "FallbackModel", "FailoverPolicy", "FailureKind", "DEFAULT_FAIL_OVER",
    "ModelAttempt", "failure_kind", "StepReset",
    # output modes and typed partial output
    "OutputMode", "OutputPartial",
]
