"""Guards: processors that find what must not pass (PII, prompt injection, unsafe text,
a leaked system prompt, another language, disguised characters) and hold text back
until it is checked."""
