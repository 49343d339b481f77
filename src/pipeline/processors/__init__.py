"""Built-in processors: guards and history tools, each a pure processor in its own module.

Heavy detector libraries are optional extras (`pip install 'pipeline-agents[guards]'`),
imported only by the processor that needs them, when it is created, never when this
package is imported.
"""

from __future__ import annotations

from pipeline.processors.batch import BatchPartsProcessor
from pipeline.processors.budget import Budget
from pipeline.processors.guards.holdback import Held
from pipeline.processors.guards.injection import PromptInjectionDetector
from pipeline.processors.guards.language import LanguageDetector, Py3LangidBackend
from pipeline.processors.guards.moderation import ModerationProcessor
from pipeline.processors.guards.pii import PIIDetector
from pipeline.processors.guards.pii_detectors import Finding, MissingDependency
from pipeline.processors.guards.scrubber import SystemPromptScrubber
from pipeline.processors.guards.unicode import UnicodeNormalizer
from pipeline.processors.memory.processors import MessageHistory, SemanticRecall, WorkingMemory
from pipeline.processors.memory.summary import Summarization
from pipeline.processors.options import ProcessorConfigError
from pipeline.processors.reviewer import ApprovalReviewer
from pipeline.processors.token_counting import ApproxTokenCounter, EncodingCounter, TokenCounter
from pipeline.processors.token_limiter import TokenLimiterProcessor
from pipeline.processors.tool_call_filter import ToolCallFilter

__all__ = [
    "ApprovalReviewer",
    "ApproxTokenCounter",
    "BatchPartsProcessor",
    "Budget",
    "EncodingCounter",
    "Finding",
    "Held",
    "LanguageDetector",
    "MessageHistory",
    "MissingDependency",
    "ModerationProcessor",
    "PIIDetector",
    "ProcessorConfigError",
    "Py3LangidBackend",
    "PromptInjectionDetector",
    "SemanticRecall",
    "Summarization",
    "SystemPromptScrubber",
    "TokenCounter",
    "TokenLimiterProcessor",
    "ToolCallFilter",
    "UnicodeNormalizer",
    "WorkingMemory",
]
