"""Built-in processors: guards and history tools, each a pure processor in its own module.

Heavy detector libraries are optional extras (`pip install 'pipeline-agents[guards]'`),
imported only by the processor that needs them, when it is created, never when this
package is imported. Each processor's own module is loaded when its name is first used:
an interpreter answering the memory processors' requests (`processors.memory.requests`)
does not load every guard.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.lazy import lazy_names

if TYPE_CHECKING:
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

__getattr__ = lazy_names(__name__, {
    "ApprovalReviewer": "pipeline.processors.reviewer",
    "ApproxTokenCounter": "pipeline.processors.token_counting",
    "BatchPartsProcessor": "pipeline.processors.batch",
    "Budget": "pipeline.processors.budget",
    "EncodingCounter": "pipeline.processors.token_counting",
    "Finding": "pipeline.processors.guards.pii_detectors",
    "Held": "pipeline.processors.guards.holdback",
    "LanguageDetector": "pipeline.processors.guards.language",
    "MessageHistory": "pipeline.processors.memory.processors",
    "MissingDependency": "pipeline.processors.guards.pii_detectors",
    "ModerationProcessor": "pipeline.processors.guards.moderation",
    "PIIDetector": "pipeline.processors.guards.pii",
    "ProcessorConfigError": "pipeline.processors.options",
    "PromptInjectionDetector": "pipeline.processors.guards.injection",
    "Py3LangidBackend": "pipeline.processors.guards.language",
    "SemanticRecall": "pipeline.processors.memory.processors",
    "Summarization": "pipeline.processors.memory.summary",
    "SystemPromptScrubber": "pipeline.processors.guards.scrubber",
    "TokenCounter": "pipeline.processors.token_counting",
    "TokenLimiterProcessor": "pipeline.processors.token_limiter",
    "ToolCallFilter": "pipeline.processors.tool_call_filter",
    "UnicodeNormalizer": "pipeline.processors.guards.unicode",
    "WorkingMemory": "pipeline.processors.memory.processors",
})

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
