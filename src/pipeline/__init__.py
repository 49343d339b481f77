"""What apps and processors are written with: the agent and its tools, messages, the
processor base classes and hooks (each hook's args and the effects it may return), the
few chunks a processor usually looks at, and what a run costs.

Every other value a run is made of (chunk and part types, results and run errors, model
settings) is in `pipeline.values`; the built-in processors in `pipeline.processors`;
what an interpreter's writer needs in `pipeline.protocol` and `pipeline.loop`.
"""

from effects import Abort, AskApproval, Continue, Emit, Out, Replace, Retry, Skip, SkipCall
from pipeline.agent import Agent
from pipeline.processor import (
    ApiErrorArgs,
    ApiErrorResult,
    ApprovedArgs,
    ApprovedResult,
    AskModel,
    FlushArgs,
    FlushResult,
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
    ProcessorPlacementWarning,
    StatefulProcessor,
    StepChange,
    StreamArgs,
    StreamResult,
    ToolCallArgs,
    ToolCallResult,
    ToolResultArgs,
    ToolResultResult,
    abort,
    processor,
)
from pipeline.tools import Tool, tool
from pipeline.tools.context import ToolContext
from pipeline.values.chunks import Chunk, DataChunk, TextDelta
from pipeline.values.context import RunContext
from pipeline.values.cost import Cost, PriceQuery, Pricer
from pipeline.values.messages import Message, MessageList, SystemMessage, TextPart, user
from pipeline.values.model import ModelRequest, ModelSettings
from pipeline.values.openai_input import from_openai
from pipeline.values.result import RunResult
from pipeline.values.retry import RetryPolicy
from pipeline.values.validate import InvalidInputError

__distribution__ = "pipeline-agents"
"""Whose `pipeline` this is (`interpreters` refuses another distribution's)."""


def __getattr__(name: str) -> str:
    # `__version__`: the installed distribution's, read from its metadata when asked (one
    # source of truth, pyproject.toml's `version`; reading it costs an import otherwise).
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version(__distribution__)
        except PackageNotFoundError:  # a source tree that was never installed
            return "unknown"
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    # the agent, its tools, what a run is given and gives back
    "Agent", "Tool", "tool", "ToolContext", "RunContext", "RunResult",
    "Message", "MessageList", "SystemMessage", "TextPart", "user", "from_openai",
    "InvalidInputError",
    # processors and their hooks: each hook's args and the result it may return
    "Processor", "StatefulProcessor", "processor", "abort", "ProcessorPlacementWarning",
    "InputArgs", "InputResult", "InputStepArgs", "InputStepResult", "StepChange",
    "ApiErrorArgs", "ApiErrorResult", "StreamArgs", "StreamResult", "FlushArgs",
    "FlushResult", "OutputStepArgs", "OutputStepResult", "OutputResultArgs",
    "OutputResultResult", "ToolCallArgs", "ToolCallResult", "ToolResultArgs",
    "ToolResultResult", "ApprovedArgs", "ApprovedResult", "AskModel", "ModelAnswer",
    # the effects a hook returns
    "Continue", "Replace", "Abort", "Retry", "Skip", "Emit", "Out", "SkipCall", "AskApproval",
    # what stream hooks and model settings deal in most
    "Chunk", "TextDelta", "DataChunk", "ModelRequest", "ModelSettings", "RetryPolicy",
    # what a run costs, and a price function's type
    "Cost", "PriceQuery", "Pricer",
]
