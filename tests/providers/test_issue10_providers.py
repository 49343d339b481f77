"""Issue 10 on the provider side: thinking tokens, `n > 1`, error frames before content."""

from __future__ import annotations

import pytest

from interpreters.provider import ProviderError
from interpreters.providers import AnthropicCodec, OpenAIChatCodec
from interpreters.providers.codec import Encoded
from pipeline.chunks import ModelFinish, Usage
from pipeline.messages import user
from pipeline.model import ModelRequest
from tests.providers.helpers import sse
from tests.providers.test_codecs import decode


def _an_usage(**usage: object) -> bytes:
    return sse(
        {"type": "message_start", "message": {"id": "msg", "model": "m", "usage": {
            "input_tokens": 10, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": usage},
        {"type": "message_stop"},
    )


def test_anthropic_thinking_tokens_count_as_reasoning_tokens() -> None:
    raw = _an_usage(output_tokens=70, output_tokens_details={"thinking_tokens": 50})
    fin = decode(AnthropicCodec(), Encoded(b""), raw)[-1]
    assert isinstance(fin, ModelFinish)
    assert fin.usage == Usage(input_tokens=10, output_tokens=70, reasoning_tokens=50)


def test_anthropic_thinking_tokens_in_a_whole_body() -> None:
    body = (b'{"type":"message","id":"m","model":"c","content":[{"type":"text","text":"x"}],'
            b'"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":9,'
            b'"output_tokens_details":{"thinking_tokens":4}}}')
    fin = AnthropicCodec().decode_body(Encoded(b""), body, status=200, request_id=None)[-1]
    assert isinstance(fin, ModelFinish)
    assert fin.usage.reasoning_tokens == 4


@pytest.mark.parametrize("codec", [OpenAIChatCodec(), AnthropicCodec()])
@pytest.mark.parametrize("section", ["openai", "anthropic", "openai-compatible"])
def test_n_above_one_is_a_configuration_error(
    codec: OpenAIChatCodec | AnthropicCodec, section: str
) -> None:
    req = ModelRequest(model="x/m", system=(), messages=(user("hi", id="u"),),
                       provider_options={section: {"n": 3}})
    sections = codec.options.option_sections
    if section not in sections:
        codec.encode(req, model="m", stream=True)  # not this codec's section: ignored
        return
    with pytest.raises(ProviderError) as info:
        codec.encode(req, model="m", stream=True)
    err = info.value.error
    assert (err.error_type, err.retryable, err.status) == ("configuration", False, None)
    assert "n" in err.message and "3" in err.message


def test_n_of_one_is_fine() -> None:
    req = ModelRequest(model="x/m", system=(), messages=(user("hi", id="u"),),
                       provider_options={"openai": {"n": 1}})
    OpenAIChatCodec().encode(req, model="m", stream=True)
