"""The functional core: messages, chunks, processors and the agent loop. No I/O.

The names agent and processor authors need are re-exported here; each lives in one small
module. What an interpreter's author needs besides `agent_loop` (the commands' replies,
`AgentLoop`, `ToolInvocation`, `ToolOutcome`, `EffectRecord`...) is in `pipeline.protocol.replies`.
"""

from pipeline.agent import Agent, PrepareStep
from pipeline.loop.run import agent_loop
from pipeline.processor import (
    ApiErrorArgs,
    ApiErrorResult,
    AskModel,
    BaseProcessor,
    FlushArgs,
    FlushResult,
    FunctionProcessor,
    InputArgs,
    InputResult,
    InputStepArgs,
    InputStepResult,
    ModelAnswer,
    OutputResultArgs,
    OutputResultResult,
    OutputStepArgs,
    OutputStepResult,
    Processor,
    ProcessorAbort,
    StatefulProcessor,
    StepChange,
    StepSettings,
    StreamArgs,
    StreamResult,
    ToolCallArgs,
    ToolCallResult,
    ToolResultArgs,
    ToolResultResult,
    abort,
    processor,
)
from pipeline.processors.options import ProcessorConfigError
from pipeline.tools import Tool, make_tool, tool
from pipeline.tools.context import ToolContext, ToolWriter
from pipeline.values.chunks import (
    Chunk,
    DataChunk,
    ErrorChunk,
    Finish,
    FinishReason,
    ModelEvent,
    ModelFinish,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    SourceChunk,
    StepFinish,
    StepStart,
    TextDelta,
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
from pipeline.values.context import RunContext
from pipeline.values.cost import Cost, PriceQuery, Pricer
from pipeline.values.messages import (
    INSTRUCTIONS_TAG,
    DataPart,
    FilePart,
    Message,
    MessageList,
    Part,
    ReasoningPart,
    RunInput,
    SourcePart,
    StepStartPart,
    SystemMessage,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    user,
)
from pipeline.values.model import (
    ApiError,
    ModelRequest,
    ModelSettings,
    PromptCache,
    StructuredOutput,
    ToolChoice,
    ToolChoiceTool,
    ToolSpec,
)
from pipeline.values.output_type import OutputInvalid, TypedOutput
from pipeline.values.result import (
    ApiFailed,
    Cancelled,
    InvalidInput,
    OutputResult,
    ProcessorFailed,
    RunError,
    RunFailedError,
    RunResult,
    StepResult,
    StreamFailed,
)
from pipeline.values.retry import RetryPolicy
from pipeline.values.validate import InvalidInputError

__distribution__ = "pipeline-agents"
"""Whose `pipeline` this is (`interpreters` refuses another distribution's)."""

__all__ = [
    "INSTRUCTIONS_TAG",
    "Agent", "ApiError", "ApiErrorArgs", "ApiErrorResult", "ApiFailed",
    "AskModel", "BaseProcessor", "Cancelled", "Chunk", "DataChunk", "DataPart",
    "ErrorChunk", "FilePart", "Finish", "FinishReason",
    "FlushArgs", "FlushResult", "ToolCallArgs", "ToolCallResult", "ToolResultArgs",
    "ToolResultResult", "FunctionProcessor", "InputArgs",
    "InputResult", "InputStepArgs", "InputStepResult", "Message", "MessageList", "ModelAnswer",
    "ModelEvent", "ModelFinish",
    "ModelRequest", "ModelSettings", "PromptCache", "OutputResult", "OutputResultArgs",
    "OutputResultResult", "OutputStepArgs", "OutputStepResult", "Part", "PrepareStep",
    "Processor", "ProcessorFailed", "ReasoningDelta", "ReasoningEnd", "ReasoningPart",
    "ReasoningStart", "RetryPolicy", "RunContext", "RunError", "RunFailedError", "RunInput",
    "RunResult", "SourceChunk", "SourcePart", "StatefulProcessor", "StepChange", "StepFinish",
    "StepResult", "StepSettings", "StepStart", "StepStartPart", "StreamArgs", "StreamFailed",
    "StreamResult",
    "StructuredOutput", "SystemMessage", "TextDelta", "TextEnd", "TextPart", "TextStart",
    "Tool", "ToolCall", "ToolCallDelta", "ToolCallPart", "ToolChoice", "ToolChoiceTool",
    "ToolApprovalRequest", "ToolApprovalResponse", "ToolError", "ToolResult", "ToolResultPart",
    "ToolSpec",
    "ProcessorAbort", "Tripwire", "Usage", "abort", "agent_loop", "make_tool", "processor", "tool",
    "user",
    "OutputInvalid", "ToolContext", "ToolWriter", "TypedOutput",
]
__all__ += ["InvalidInput", "InvalidInputError"]  # caller input checked at the door
__all__ += ["ProcessorConfigError"]  # a built-in processor's option not understood
__all__ += ["Cost", "PriceQuery", "Pricer"]  # what a run costs, and a price function's type
