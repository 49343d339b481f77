"""Embedders: texts to vectors for semantic recall, one module per wire format
(OpenAI-compatible `/embeddings`, Gemini, Bedrock) and a scripted one for tests.

Each is loaded when first used: the scripted one (as `interpreters.testing` imports it)
needs no HTTP client."""

from typing import TYPE_CHECKING

from pipeline.lazy import lazy_names

if TYPE_CHECKING:
    from interpreters.memory.embed.bedrock import BedrockEmbedder
    from interpreters.memory.embed.gemini import GeminiEmbedder
    from interpreters.memory.embed.openai import AsyncOpenAIEmbedder, OpenAIEmbedder
    from interpreters.memory.embed.scripted import ScriptedEmbedder
    from interpreters.memory.store import AsyncEmbedder, EmbeddingError

__getattr__ = lazy_names(__name__, {
    "AsyncEmbedder": "interpreters.memory.store",
    "AsyncOpenAIEmbedder": "interpreters.memory.embed.openai",
    "BedrockEmbedder": "interpreters.memory.embed.bedrock",
    "EmbeddingError": "interpreters.memory.store",
    "GeminiEmbedder": "interpreters.memory.embed.gemini",
    "OpenAIEmbedder": "interpreters.memory.embed.openai",
    "ScriptedEmbedder": "interpreters.memory.embed.scripted",
})

__all__ = [
    "AsyncEmbedder", "AsyncOpenAIEmbedder", "BedrockEmbedder", "EmbeddingError",
    "GeminiEmbedder", "OpenAIEmbedder", "ScriptedEmbedder",
]
