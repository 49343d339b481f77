"""Built-in processors: guards and history tools, each a pure processor in its own module.

Heavy detector libraries are optional extras (`pip install 'pipeline-agents[guards]'`),
imported only by the processor that needs them, when it is created, never when this
package is imported.
"""

from __future__ import annotations

from pipeline.processors.batch import BatchPartsProcessor
from pipeline.processors.budget import Budget
from pipeline.processors.holdback import Held
from pipeline.processors.language_detector import LanguageDetector, Py3LangidBackend
from pipeline.processors.memory import MessageHistory, SemanticRecall, WorkingMemory
from pipeline.processors.memory_summary import Summarization
from pipeline.processors.moderation import ModerationProcessor
from pipeline.processors.options import ProcessorConfigError
from pipeline.processors.pii import PIIDetector
from pipeline.processors.pii_detectors import Finding, MissingDependency
from pipeline.processors.prompt_injection import PromptInjectionDetector
from pipeline.processors.scrubber import SystemPromptScrubber
from pipeline.processors.token_counting import ApproxTokenCounter, EncodingCounter, TokenCounter
from pipeline.processors.token_limiter import TokenLimiterProcessor
from pipeline.processors.tool_call_filter import ToolCallFilter
from pipeline.processors.unicode_normalizer import UnicodeNormalizer

__all__ = [
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
