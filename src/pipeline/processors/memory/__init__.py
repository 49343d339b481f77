"""Memory processors (history, semantic recall, working memory, summaries) and the
requests they make of a store (answered by `interpreters.memory`)."""

from pipeline.processors.memory.processors import (
    InvalidThreadId,
    MessageHistory,
    MessageIdClash,
    SemanticRecall,
    WorkingMemory,
    WorkingMemoryState,
)
from pipeline.processors.memory.summary import Summarization

__all__ = [
    "InvalidThreadId", "MessageHistory", "MessageIdClash", "SemanticRecall", "Summarization",
    "WorkingMemory", "WorkingMemoryState",
]
