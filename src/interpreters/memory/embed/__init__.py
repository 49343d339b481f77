"""Embedders: texts to vectors for semantic recall, one module per wire format
(OpenAI-compatible `/embeddings`, Gemini, Bedrock) and a scripted one for tests."""

from interpreters.memory.embed.bedrock import BedrockEmbedder
from interpreters.memory.embed.exchange import EmbeddingError
from interpreters.memory.embed.gemini import GeminiEmbedder
from interpreters.memory.embed.openai import (
    AsyncEmbedder,
    AsyncOpenAIEmbedder,
    OpenAIEmbedder,
    ScriptedEmbedder,
)

__all__ = [
    "AsyncEmbedder", "AsyncOpenAIEmbedder", "BedrockEmbedder", "EmbeddingError",
    "GeminiEmbedder", "OpenAIEmbedder", "ScriptedEmbedder",
]
