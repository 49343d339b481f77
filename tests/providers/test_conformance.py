"""Every file of tests/traffic/INDEX.md, replayed over a real socket, decoded right.

For each recorded exchange the replay server sends the recorded response bytes (chunked,
split at odd sizes, gzip where recorded); the test checks what the provider made of them:
text, reasoning and signatures, tool calls (ids, names, parsed arguments), usage, finish
reason, or the typed error (status, type, code, request id, retryable). The text is also
checked whole against a naive reading of the raw bytes. Where the file records the request,
that body is read into a ModelRequest, sent through our encoder, and what arrived at the
server must mean the same as what was recorded. Sync, asyncio and trio paths all run.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

import msgspec
import pytest

from interpreters.providers import (
    AsyncHttpProvider,
    HttpProvider,
    OpenAIChatCodec,
    provider_config,
)
from interpreters.providers.codec import Codec
from interpreters.providers.provider import ProviderError
from pipeline.values.chunks import (
    FinishReason,
    ModelEvent,
    ModelFinish,
    ReasoningDelta,
    ReasoningEnd,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    Usage,
)
from pipeline.values.messages import user
from pipeline.values.model import ApiError, ModelRequest, StructuredOutput
from tests.providers import reference
from tests.providers.cassettes import Recorded, index_files, load, traffic_dir
from tests.providers.server import ReplayServer, Reply

pytestmark = pytest.mark.slow  # every provider case, sync and async, over HTTP

ROOT = traffic_dir()


@dataclass(frozen=True)
class Call:
    id: str
    name: str
    args: dict[str, object]


@dataclass(frozen=True)
class Ok:
    finish: FinishReason
    usage: Usage
    response_id: str | None = None
    text: str | None = None
    """The whole text, exactly (else the start/end checks, plus the naive reading)."""
    text_start: str = ""
    text_end: str = ""
    reasoning_start: str = ""
    signature_start: str | None = None
    calls: tuple[Call, ...] = ()


@dataclass(frozen=True)
class Err:
    status: int
    error_type: str | None
    message_has: str
    retryable: bool
    code: str | None = None
    request_id: str | None = None
    reasoning_before: str = ""
    """Reasoning streamed before a mid-stream error (kept by the caller, marked broken)."""


@dataclass(frozen=True)
class Case:
    route: str
    expect: tuple[Ok | Err, ...]
    check_request: bool = True
    """False only where the recorded request cannot be expressed (said why below)."""
    stream: bool | None = None
    """None: as the recorded request says."""
    options: dict[str, object] = field(default_factory=dict)
    """Codec option overrides the recorded client used (e.g. the developer role)."""


def U(i: int, o: int, r: int = 0, c: int = 0, w: int = 0) -> Usage:
    return Usage(input_tokens=i, output_tokens=o, reasoning_tokens=r, cached_input_tokens=c,
                 cache_write_tokens=w)


STUDENT = {
    "name": "David Nguyen",
    "major": "computer science",
    "school": "Stanford University",
    "grades": 3.8,
    "clubs": ["Chess Club", "South Asian Student Association"],
}
OPENAI_FILES = "openai+openai-python/.inline-snapshot/external/"
PA = "pydantic+pydantic-ai/tests/"
DD = "DataDog+dd-trace-py/tests/contrib/"
LLMA = "simonw+llm-anthropic/tests/cassettes/test_anthropic/"
PAG = PA + "models/cassettes/test_google/"
VG = "vercel+ai/packages/google/src/__fixtures__/"
RS = PA + "models/cassettes/test_openai_responses/"
VRS = "vercel+ai/packages/openai/src/responses/__fixtures__/"
PLAN = (
    "Plan:\n1) Determine required first-letter acrostics for lines: odd lines -> SAMIRA; even "
    "lines -> DAWOOD (12 total lines).\n2) For each line, select a world capital whose name "
    "begins with the required first letter.\n3) Compose each line so that the first letter of "
    "every word spells that chosen capital (word-initial acrostic), while keeping imagery "
    "poetic and coherent.\n4) Double-check all acrostics (line-initial and word-initial) for "
    "accuracy.\n5) Deliver the 12-line poem."
)
BR = PA + "models/cassettes/test_bedrock/"

CASES: dict[str, Case] = {
    # --- OpenAI Chat Completions: success ------------------------------------------------
    PA + "cassettes/test_temporal/test_temporal_agent_with_hitl_tool.yaml": Case("openai", (
        Ok("tool-calls", U(71, 46), "chatcmpl-C9f7f1SbHRzcwlJwrYKdSonTRWPvV", calls=(
            Call("call_jYdIdRZHxZTn5bWCq5jlMrJi", "delete_file", {"path": ".env"}),
            Call("call_TmlTVWQbzrXCZ4jNsCVNbNqu", "create_file", {"path": "test.txt"}),
        )),
        Ok("stop", U(133, 19), "chatcmpl-C9f7iBeeNNBazDCMa7RSx3EFtiZoR",
           text="The file `.env` has been deleted and `test.txt` has been created successfully."),
    )),
    PA + "models/cassettes/test_openai/test_openai_tool_output.yaml": Case("openai", (
        Ok("tool-calls", U(68, 12), calls=(
            Call("call_iXFttys57ap0o16JSlC8yhYo", "get_user_country", {}),)),
        Ok("tool-calls", U(89, 36), calls=(
            Call("call_gmD2oUZUzSoCkmNmp3JPUF7R", "final_result",
                 {"city": "Mexico City", "country": "Mexico"}),)),
    )),
    DD + "openai/cassettes/v1/chat_completion_tool_call.yaml": Case("openai", (
        Ok("tool-calls", U(157, 57), "chatcmpl-835hhNkhB9OBwmSNkrCXncoUudsEU", calls=(
            Call("call_FJStsEjxdODw9tBmQRRkm6vY", "extract_student_info", STUDENT),)),
    )),
    OPENAI_FILES + "e2aad469…cbfd.bin": Case("openai", (
        Ok("stop", U(14, 30), "chatcmpl-ABfw031mOJeYCSHe4yI2ZjOA6kMJL",
           text="I'm unable to provide real-time weather updates. To get the current weather "
                "in San Francisco, I recommend checking a reliable weather website or a "
                "weather app."),
    ), check_request=False),  # no request recorded (only summarised in INDEX.md)
    OPENAI_FILES + "f82268f2…d9b.bin": Case("openai", (
        Ok("tool-calls", U(149, 60), "chatcmpl-ABfwAwrNePHUgBBezonVC6MX3zd63", calls=(
            Call("call_JMW1whyEaYG438VE1OIflxA2", "GetWeatherArgs",
                 {"city": "Edinburgh", "country": "GB", "units": "c"}),
            Call("call_DNYTawLBoN8fj3KN6qU9N1Ou", "get_stock_price",
                 {"ticker": "AAPL", "exchange": "NASDAQ"}),
        )),
    ), check_request=False),
    OPENAI_FILES + "4cc50a61…866d.bin": Case("openai", (
        Ok("length", U(79, 1), text='{"'),
    ), check_request=False),
    OPENAI_FILES + "173417d5…5353.bin": Case("openai", (
        # A refusal is text the caller sees, and the finish says the answer was refused.
        Ok("content-filter", U(79, 11), text="I'm sorry, I can't assist with that request."),
    ), check_request=False),
    PA + "models/cassettes/test_openai/test_run_stream_sync_streams_real_model.yaml": Case(
        "openai", (
            Ok("tool-calls", U(53, 15), "chatcmpl-Dx0XpqH8w09uBXwq1zFGYdETjtnEl", calls=(
                Call("call_ZR5UUuTt3pf61kjwAJIYdVMj", "get_capital", {"country": "UK"}),)),
            Ok("stop", U(78, 9), text="The capital of the UK is London."),
        )),
    "simonw+llm/tests/cassettes/test_tools/test_tool_use_basic.yaml": Case("openai", (
        Ok("tool-calls", U(54, 20), calls=(
            Call("call_1EYWDzueHEp8OsB8jJSEp7WB", "multiply", {"a": 1231, "b": 2331}),)),
        Ok("stop", U(87, 26),
           text="The result of \\( 1231 \\times 2331 \\) is \\( 2,869,461 \\)."),
    )),
    DD + "openai/cassettes/v1/chat_completion_tool_call_streamed.yaml": Case("openai", (
        Ok("tool-calls", U(166, 43), "chatcmpl-A6jf5xUGAkKbqbBWuBy8GDvZW7q0J", calls=(
            Call("call_FJStsEjxdODw9tBmQRRkm6vY", "extract_student_info", STUDENT),)),
    ), options={"stream_usage": False}),  # that 2023 client sent no stream_options
    # --- OpenAI-compatible servers --------------------------------------------------------
    PA + "models/cassettes/test_openrouter/test_openrouter_stream_error.yaml": Case(
        "openrouter", (
            Err(200, "stream_error", "Token limit reached", retryable=False, code="400",
                reasoning_before="We need to respond to a greeting. The user"),
        )),
    PA + "models/cassettes/test_openrouter/test_openrouter_errors_raised.yaml": Case(
        "openrouter", tuple(
            Err(429, None, "temporarily rate-limited upstream", retryable=True, code="429")
            for _ in range(3)
        )),
    "crewAIInc+crewAI/lib/crewai/tests/cassettes/agents/"
    "test_agent_with_knowledge_with_no_crewai_knowledge.yaml": Case("openrouter", tuple(
        Err(401, None, "No cookie auth credentials found", retryable=False, code="401")
        for _ in range(2)
    )),
    PA + "models/cassettes/test_groq/test_tool_use_failed_error.yaml": Case("groq", (
        Err(400, "invalid_request_error", "Tool call validation failed", retryable=False,
            code="tool_use_failed"),
        Ok("tool-calls", U(301, 52, r=22), "chatcmpl-b089cbdd-ca65-41a1-9409-639d476f87c0",
           reasoning_start="We need to call with correct param: name field.", calls=(
               Call("fc_311ba17b-89f9-48d3-8fd9-7e74a1264855", "get_something_by_name",
                    {"name": "test"}),)),
        Ok("stop", U(336, 96, r=59, c=256), text_start="The first call failed due to",
           text_end='returned: "Something with name: test".',
           reasoning_start="We need to respond to user request."),
    )),
    PA + "models/cassettes/test_ollama/test_ollama_local_native_output_uses_json_schema.yaml":
        Case("ollama", (
            Ok("stop", U(136, 15), "chatcmpl-150", text='{ "city": "Paris", "country": "France" }',
               reasoning_start="Okay, the user is asking for the capital of France."),
        )),
    # --- OpenAI errors ---------------------------------------------------------------------
    # The recorded client asked for n=2, which this library refuses before sending (one
    # choice is all the loop reads): the response is checked, with a request it can send.
    DD + "openai/cassettes/v1/chat_completion_error.yaml": Case("openai", (
        Err(401, "invalid_request_error", "Incorrect API key provided", retryable=False,
            code="invalid_api_key", request_id="55f4f12fef392b7fbc0c647e97a8e6b2"),
    ), check_request=False),
    PA + "models/cassettes/test_openai/test_openai_o1_mini_system_role[developer].yaml": Case(
        "openai", (
            Err(400, "invalid_request_error", "does not support 'developer'", retryable=False,
                code="unsupported_value"),
        ), options={"system_role": "developer"}),
    PA + "cassettes/test_model_name_suggestions/test_model_name_suggestion[openai-chat].yaml":
        Case("openai", (
            Err(404, "invalid_request_error", "does not exist", retryable=False,
                code="model_not_found"),
        )),
    "vercel+ai/packages/openai/src/chat/__fixtures__/reasoning-model-legacy-parameter-error.json":
        Case("openai", (
            Err(400, "invalid_request_error", "Use 'max_completion_tokens' instead",
                retryable=False, code="unsupported_parameter"),
        ), check_request=False, stream=False),  # body only
    # --- Anthropic Messages: success --------------------------------------------------------
    PA + "models/cassettes/test_anthropic/test_multiple_parallel_tool_calls.yaml": Case(
        "anthropic", (
            Ok("tool-calls", U(423, 202), "msg_011S3wxtqL5CVescWqS3zeg2",
               text="I'll help you find out who is the youngest by retrieving information about "
                    "each family member. I'll retrieve their entity information to compare "
                    "their ages.",
               calls=tuple(
                   Call(i, "retrieve_entity_info", {"name": n}) for i, n in (
                       ("toolu_0167cfEnoQaPviGdVXA95zcu", "Alice"),
                       ("toolu_01EEe2V5HD1Ac4rKiUR4HD2T", "Bob"),
                       ("toolu_01XFyAjstT3966qvRynZyVPo", "Charlie"),
                       ("toolu_013mnQZbgtK2oe3Mo3XKJsx3", "Daisy"),
                   ))),
            Ok("stop", U(771, 77), "msg_01JVqZPgDwmnyb2kKC3MwCVf",
               text_start="Based on the retrieved information",
               text_end="the youngest among the four family members."),
        )),
    DD + "anthropic/cassettes/anthropic_completion_tools.yaml": Case("anthropic", (
        Ok("tool-calls", U(599, 152), "msg_01QA7vDgvzfZ1mU5o8nwfkri",
           text_start="<thinking>\nThe get_weather tool is directly relevant",
           text_end="</thinking>", calls=(
               Call("toolu_01DYJo37oETVsCdLTTcCWcdq", "get_weather",
                    {"location": "San Francisco, CA"}),)),
    )),
    PA + "models/cassettes/test_anthropic/test_anthropic_tool_with_thinking.yaml": Case(
        "anthropic", (
            Ok("tool-calls", U(398, 155), "msg_01WvueFjZVbHcj4H4zUzeGv2",
               text="I'll help you find the largest city in your country. First, let me "
                    "determine which country you're from.",
               reasoning_start='The user is asking about the largest city in "the user country".',
               signature_start="EqEECkYICxgCKkAo3UA4WwDbB8ih",
               calls=(Call("toolu_01YGzqpRE16Vricda3Aqcejo", "get_user_country", {}),)),
            Ok("stop", U(566, 126), "msg_01SZ8KP8HhB1TxP6Ybbv6iKz",
               text_start="Based on the information that you're from Mexico",
               text_end="cultural center of Mexico."),
        )),
    "vercel+ai/packages/anthropic/src/__fixtures__/anthropic-tool-no-args.json": Case(
        "anthropic", (
            Ok("tool-calls", U(602, 93), "msg_01GCBaV8gyWAYgMVggRqZbuQ",
               text_start="<thinking>\nThe updateIssueList tool",
               text_end="Okay, I will update the current issue list:",
               calls=(Call("toolu_01LRmxn9vGM1d2DZSDBowdZ1", "updateIssueList", {}),)),
        ), check_request=False, stream=False),  # body only
    LLMA + "test_stream_events_text.yaml": Case("anthropic", (
        Ok("stop", U(10, 4), "msg_01T8kTq7cYyYJeQ5DxcVUc6D", text="Hello"),
    )),
    DD + "anthropic/cassettes/anthropic_completion_tools_stream.yaml": Case("anthropic", (
        Ok("tool-calls", U(599, 135), "msg_01RQXWh4UaLp6wsR9R8i8RZ3",
           text_start="<thinking>\nThe get_weather tool is relevant for answering",
           text_end="calling the get_weather tool.\n</thinking>", calls=(
               Call("toolu_01DYJo37oETVsCdLTTcCWcdq", "get_weather",
                    {"location": "San Francisco, CA"}),)),
    )),
    LLMA + "test_tools.yaml": Case("anthropic", (
        Ok("tool-calls", U(542, 62), "msg_01V2noLbAb2NgKnjaNw6Cn3w", calls=(
            Call("toolu_01LtHJmixrs9NcWQkK8hu8hj", "pelican_name_generator", {}),
            Call("toolu_01N8a4jWyf116qKTMqKKmjyt", "pelican_name_generator", {}),
        )),
        Ok("stop", U(678, 82), "msg_01XMATm4UFnjP841TckVuNF4",
           text_start="Here are two great names for your pet pelican:",
           text_end="feathered friend! \U0001f985"),
    )),
    LLMA + "test_stream_events_thinking.yaml": Case("anthropic", (
        Ok("stop", U(46, 133), "msg_01Eg56TYRnKCEgWtZu2yjR1t",
           text='1. **Pouch** - references their iconic bill pouch\n2. **Pelé** - playful '
                'take on "pelican"',
           reasoning_start="The user wants two names for a pet pelican, and they want me",
           signature_start="EuYDCmMIDBgCKkC05Zda4P"),
    )),
    PA + "models/cassettes/test_anthropic/test_anthropic_model_thinking_part_stream.yaml": Case(
        "anthropic", (
            Ok("stop", U(43, 282), "msg_01ALwQ87pTS7hH1PjSdC9wJD",
               text_start="Here are the basic steps for safely crossing the street",
               text_end="prioritize safety over speed when crossing streets.",
               reasoning_start="This is a straightforward question about pedestrian safety",
               signature_start="EvMCCkYICx"),
        )),
    "vercel+ai/packages/anthropic/src/__fixtures__/anthropic-json-tool.1.chunks.txt": Case(
        "anthropic", (
            Ok("tool-calls", U(849, 47), "msg_01K2JbSUMYhez5RHoK9ZCj9U", calls=(
                Call("toolu_01KFbKqPYSuAKujiL6mTfzYA", "json", {"elements": [
                    {"location": "San Francisco", "temperature": 58, "condition": "sunny"}]}),)),
        ), check_request=False, stream=True),  # payloads only
    # --- Anthropic errors ------------------------------------------------------------------
    DD + "anthropic/cassettes/anthropic_completion_error.yaml": Case("anthropic", (
        Err(400, "invalid_request_error", "Input does not match the expected shape",
            retryable=False, request_id="req_01BjwuzUpsYgKjQJguJyvKb3"),
    ), check_request=False),  # the recorded request is malformed on purpose
    PA + "models/cassettes/test_anthropic/"
    "test_anthropic_explicit_effort_xhigh_unsupported_model_errors.yaml": Case("anthropic", (
        Err(400, "invalid_request_error", "does not support effort level 'xhigh'",
            retryable=False, request_id="req_011Ca7jT9AHpgXgdv8igm4z9"),
    )),
    DD + "anthropic/cassettes/anthropic_completion_invalid_api_key.yaml": Case("anthropic", (
        Err(401, "authentication_error", "invalid x-api-key", retryable=False,
            request_id="req_013JyjhVcnhy8mfJkvBTqMNB"),
    )),
    # --- OpenAI Responses: success ----------------------------------------------------------
    RS + "test_openai_responses_model_simple_response.yaml": Case("openai-responses", (
        Ok("stop", U(14, 8), "resp_68c2e8c147ac819491bcd667055eadbc02e845978fbbb592",
           text="The capital of France is Paris."),
    )),
    RS + "test_openai_responses_model_simple_response_with_tool_call.yaml": Case(
        "openai-responses", (
            Ok("tool-calls", U(40, 18), "resp_04907f5d3de791830068fbaa19bb908195a91378279dba0f14",
               calls=(Call("call_YfwRsW8sUxDKipwyhWTzOXCA", "get_capital",
                           {"country": "PotatoLand"}),)),
            Ok("stop", U(67, 11), text="The capital of PotatoLand is Potato City."),
        )),
    RS + "test_openai_responses_stream.yaml": Case("openai-responses", (
        Ok("tool-calls", U(255, 16), "resp_67e554a155508191900ee113293c4c830794405d35281ae2",
           calls=(Call("call_kL0PCQV7M2WMoVX8V8OtYSAL", "get_capital", {"country": "France"}),)),
        Ok("stop", U(278, 9), "resp_67e554a21aa88191b65876ac5e5bbe0406c52f0e511c76ed",
           text="The capital of France is Paris."),
    )),
    RS + "test_openai_responses_streaming_usage.yaml": Case("openai-responses", (
        Ok("tool-calls", U(53, 469, r=448), signature_start="rs_0050471a34b36ae60068c97bac4dcc8",
           calls=(Call("call_CWXgs68YprAjp6t0371hiPOI", "final_result", {"result": 6666}),)),
    )),
    RS + "test_native_output.yaml": Case("openai-responses", (
        Ok("tool-calls", U(66, 12), calls=(
            Call("call_tTAThu8l2S9hNky2krdwijGP", "get_user_country", {}),)),
        Ok("stop", U(89, 16), text='{"city":"Mexico City","country":"Mexico"}'),
    )),
    RS + "test_openai_responses_reasoning_effort.yaml": Case("openai-responses", (
        Ok("stop", U(88, 547, r=128), "resp_67e5393080ec81918116f16210e1395c0e395386ebcf3a62",
           text_start="Ingredients for the dough:",
           text_end="Enjoy your homemade Uruguayan alfajores!",
           signature_start="rs_67e539329f808191ae793066c0ee2080"),
    )),
    RS + "test_openai_responses_thinking_with_tool_calls.yaml": Case("openai-responses", (
        Ok("tool-calls", U(124, 1926, r=1792),
           reasoning_start="**Creating a structured poem**\n\nI need to craft a 12-line poem",
           signature_start="rs_68c42d29124881968e24c1ca8c1fc7860e8bc41441c948f6 gAAAAABoxC0_",
           calls=(Call("call_gL7JE6GDeGGsFubqO2XGytyO", "update_plan", {"plan": PLAN}),)),
        Ok("stop", U(2087, 124, c=2048), text_start="Softly old fountains illumine alleys\n",
           text_end="Dusty alleys murmur, amber spices curl under starlight"),
    )),
    RS + "test_openai_responses_thinking_part_iter.yaml": Case("openai-responses", (
        Ok("stop", U(13, 1680, r=1408), "resp_68c42d0fb418819dbfa579f69406b49508fbf9b1584184ff",
           text_start="I'm not a road safety professional, but here are some generally",
           text_end="familiarize yourself with the rules specific to your area. Stay safe!",
           reasoning_start="**Providing street crossing instructions**\n\nThe user is asking",
           signature_start="rs_68c42d1d0878819d8266007cd3d1402c08fbf"),
    )),
    "vercel+ai/packages/open-responses/src/responses/__fixtures__/lmstudio-tool-call.1.chunks.txt":
        Case("openai-responses", (
            Ok("tool-calls", U(182, 61, r=48, c=2),
               "resp_cc7bfe18e2f2eca93006515c0fd19cfed16e46a93a60444a",
               text="I'll get the current weather information for San Francisco for you.",
               reasoning_start="The user is asking for the weather in San Francisco.",
               signature_start="rs_3yo6zy4vu4hq6iegqwhn1",
               calls=(Call("call_2025306790300011", "weather", {"location": "San Francisco"}),)),
        ), check_request=False, stream=True),  # payloads only
    VRS + "openai-reasoning-encrypted-content.1.json": Case("openai-responses", (
        Ok("stop", U(865, 163, r=128), "resp_0f35ed53160b395301693cc957829881909359e7f80cdd20b5",
           text="12 + 7 = 19\n19 \u00d7 3 = 57\n57 \u00d7 10 = 570\n\nFinal result: 570",
           reasoning_start="**Reporting final result**\n\nThe tool returned 570",
           signature_start="rs_0f35ed53160b395301693cc95817ac8190b978637daea4987e gAAAA"),
    ), check_request=False, stream=False),  # body only
    # --- OpenAI Responses: errors -----------------------------------------------------------
    # The recorded client sent temperature -1, which ModelSettings refuses before any
    # request: the response is checked, with a request this library can send.
    RS + "test_openai_responses_model_http_error.yaml": Case("openai-responses", (
        Err(400, "invalid_request_error", "decimal below minimum value", retryable=False,
            code="decimal_below_min_value"),
    ), check_request=False),
    VRS + "openai-error.1.chunks.txt": Case("openai-responses", (
        # An error event in a 200 stream, before any output: the quota will not come back.
        Err(200, "insufficient_quota", "You exceeded your current quota", retryable=False,
            code="insufficient_quota"),
    ), check_request=False, stream=True),  # payloads only
    VRS + "reasoning-model-temperature-error.json": Case("openai-responses", (
        Err(400, "invalid_request_error", "'temperature' is not supported with this model",
            retryable=False),
    ), check_request=False, stream=False),  # body only
    # --- Bedrock Converse: success ---------------------------------------------------------
    BR + "test_bedrock_model.yaml": Case("bedrock", (
        Ok("stop", U(7, 30), text="Hello! How can I assist you today? Whether you have "
           "questions, need information, or just want to chat, I'm here to help."),
    )),
    BR + "test_bedrock_model_max_tokens.yaml": Case("bedrock", (
        Ok("length", U(13, 5), text="The capital of France is"),
    )),
    BR + "test_bedrock_model_retry.yaml": Case("bedrock", (
        Ok("tool-calls", U(426, 66), text_start="<thinking> To determine the capital",
           text_end="</thinking>\n", calls=(
               Call("tooluse_Ze_bgl9CSqu8aJv7XD-_Dw", "get_capital", {"country": "France"}),)),
        Ok("stop", U(531, 76), text_start="<thinking> It appears that there was an error"),
    )),
    BR + "test_bedrock_model_structured_output.yaml": Case("bedrock", (
        Ok("tool-calls", U(571, 22), calls=(Call(
            "tooluse_Mj06ft-ITJik1Otgpkc1uA", "temperature",
            {"city": "London", "date": "2022-01-01"}),)),
        Ok("stop", U(627, 67), text_start="\n<thinking> The tool has provided the temperature"),
        Ok("tool-calls", U(821, 31), calls=(Call(
            "tooluse_qVHAm8Q9QMGoJRkk06_TVA", "final_result",
            {"date": "2022-01-01", "city": "London", "temperature": "30°C"}),)),
    )),
    # Written, then read from the cache. Not re-encoded: the recorded client put a cache
    # point inside the user message (after a document), where a PromptCache puts none.
    BR + "test_bedrock_cache_write_and_read.yaml": Case("bedrock", (
        Ok("stop", U(1324, 5, w=1322), text="21"),
        Ok("stop", U(1324, 5, c=1322), text="21"),
    ), check_request=False),
    BR + "test_bedrock_model_stream.yaml": Case("bedrock", (
        Ok("stop", U(13, 82), text_start="The capital of France is Paris.",
           text_end='referred to as "The City of Light" or "The City of Love."'),
    )),
    BR + "test_bedrock_model_iter_stream.yaml": Case("bedrock", (
        Ok("tool-calls", U(471, 91), text_start="<thinking> To find the temperature",
           calls=(Call("tooluse_lAG_zP8QRHmSYOwZzzaCqA", "get_temperature",
                       {"city": "Paris"}),)),
        Ok("stop", U(577, 18),
           text="The current temperature in Paris, the capital of France, is 30°C."),
    )),
    BR + "test_bedrock_model_thinking_part_stream.yaml": Case("bedrock", (
        Ok("stop", U(36, 73), text="Hello! It's nice to meet you. How can I help you today?",
           reasoning_start='The user has greeted me with a simple "Hello".',
           signature_start="Eu0CCkgIBxABGAIqQJDccbDQkr81"),
    )),
    # --- Bedrock Converse: errors ----------------------------------------------------------
    BR + "test_bedrock_error.yaml": Case("bedrock", (
        Err(400, None, "The provided model identifier is invalid.", retryable=False),
    )),
    BR + "test_bedrock_streaming_error.yaml": Case("bedrock", (
        Err(400, None, "The provided model identifier is invalid.", retryable=False),
    )),
    # --- Google Gemini: success ------------------------------------------------------------
    PAG + "test_google_model.yaml": Case("google", (
        Ok("stop", U(9, 43, 34), "bzlXaa_EE_aHqtsPi_zw8Ao",
           text="Hello! How can I help you today?"),
    ), stream=False),
    PAG + "test_google_model_stream.yaml": Case("google", (
        Ok("stop", U(13, 8), "w1peaMz6INOvnvgPgYfPiQY", text="The capital of France is Paris.\n"),
    ), stream=True),
    # Gemini 3 signs its function call: the signature comes back on that call in turn 2.
    PAG + "test_google_streaming_tool_call_thought_signature.yaml": Case("google", (
        Ok("tool-calls", U(29, 212, 202), "QUVVadTSNJ6_qtsPvN7J8Q0",
           signature_start="EpwICpkIAXLI2nxlU6gs",
           calls=(Call("call_QUVVadTSNJ6_qtsPvN7J8Q0_0", "get_country", {}),)),
        Ok("stop", U(257, 8), "REVVabaiCdq4qtsPnZu96Qo",
           text="The capital of Mexico is Mexico City."),
    ), stream=True),
    # No ids from Gemini 2.0: each call gets one made of the response id and its place.
    PAG + "test_google_tool_output.yaml": Case("google", (
        Ok("tool-calls", U(33, 5), "LlteaIDvD9m7nvgPz5Sb0Aw",
           calls=(Call("call_LlteaIDvD9m7nvgPz5Sb0Aw_0", "get_user_country", {}),)),
        Ok("tool-calls", U(47, 8), "LlteaOzCOPOdnvgPrJbnoQg",
           calls=(Call("call_LlteaOzCOPOdnvgPrJbnoQg_0", "final_result",
                       {"city": "Mexico City", "country": "Mexico"}),)),
    ), stream=False),
    PAG + "test_google_model_thinking_part_iter.yaml": Case("google", (
        Ok("stop", U(34, 1256, 787), "beHBaJfEMIi-qtsP3769-Q8",
           text_start="This is a great question! Safely crossing the street",
           text_end="Always assume a driver might not see you.",
           reasoning_start="**Clarifying User Goals**\n\nI'm currently focused",
           signature_start="CiIB0e2Kb6Syj1a961Ef"),
    ), stream=True),
    PAG + "test_google_native_output.yaml": Case("google", (
        Ok("stop", U(8, 20), "EfsgaZT5JPbXz7IPqtGJkQ8",
           text='{\n  "city": "Mexico City",\n  "country": "Mexico"\n}'),
    ), stream=False),
    VG + "google-reasoning.json": Case("google", (
        Ok("stop", U(9, 311, 282), "YH6LaZT7ENmPxN8P-r2J8Aw",
           text='There are **3** "r"s in strawberry.\n\nHere is the breakdown: '
                "st**r**awbe**rr**y.",
           signature_start="EvsFCvgFAb4+9vtgYAdO"),
    ), check_request=False, stream=False),  # body only
    VG + "google-text.chunks.txt": Case("google", (
        Ok("stop", U(9, 208, 185), "bH6LaZW8Fp_3nsEPqtaSwQ4",
           text='There are **3** "r"s in strawberry.\n\nst**r**awbe**rr**y',
           signature_start="EqsFCqgFAb4+9vvtAF5n"),
    ), check_request=False, stream=True),  # payloads only
    VG + "google-reasoning-gemini3.chunks.txt": Case("google", (
        Ok("stop", U(9, 325, 302), "M3iLaY-AI7zTxN8P3Piw4Qg",
           text='There are **3** "r"s in strawberry.\n\nSt**r**awbe**rr**y',
           signature_start="EpAICo0IAb4+9vuku3oD"),
    ), check_request=False, stream=True),  # payloads only
    VG + "google-tool-call-gemini3.chunks.txt": Case("google", (
        Ok("tool-calls", U(29, 819, 804), "QHiLaa6LBrb8vdIPoNztsAg",
           signature_start="EpEgCo4gAb4+9vvWwdN+",
           calls=(Call("call_QHiLaa6LBrb8vdIPoNztsAg_0", "weather",
                       {"location": "San Francisco"}),)),
    ), check_request=False, stream=True),  # payloads only
    # --- Google Gemini: blocked and rejected -----------------------------------------------
    PAG + "test_google_model_safety_settings.yaml": Case("google", (
        Err(200, "content_blocked", "SAFETY (HARM_CATEGORY_HATE_SPEECH)", retryable=False,
            code="SAFETY"),
    ), stream=False),
    VG + "google-429-retry-info.json": Case("google", (
        Err(429, "RESOURCE_EXHAUSTED", "You exceeded your current quota", retryable=True,
            code="429"),
    ), check_request=False, stream=False),  # body only
}

FILES = index_files(ROOT) if (ROOT / "INDEX.md").exists() else []
SPLITS: dict[str, list[int] | int | None] = {"sync": [1, 7, 64, 3, 512], "async": 37}


def test_every_index_file_has_expectations() -> None:
    assert FILES, "INDEX.md lists no files"
    assert sorted(FILES) == sorted(CASES), "INDEX.md and the expectations disagree"


# --- running one exchange ------------------------------------------------------------


def codec_for(case: Case) -> tuple[str, Callable[[], Codec]]:
    model_id = f"{case.route}/m"

    def make() -> Codec:
        codec = provider_config(model_id, base_url="http://x", api_key="k").codec()
        if case.options:
            assert isinstance(codec, OpenAIChatCodec)
            return OpenAIChatCodec(msgspec.structs.replace(codec.options, **case.options))
        return codec

    return model_id, make


@dataclass(frozen=True)
class Wire:
    """How the recorded requests of one wire format are read, compared and addressed."""

    path: str
    read: Callable[[dict[str, reference.Json], str], ModelRequest]
    normalize: Callable[[dict[str, reference.Json]], dict[str, reference.Json]]
    model_in_url: bool = False
    """The path names the model and the call (`{model}`, `{call}`): Gemini's."""


WIRES = {
    "openai-chat": Wire("/v1/chat/completions", reference.openai_request,
                        reference.normalize_openai),
    "anthropic": Wire("/v1/messages", reference.anthropic_request,
                      reference.normalize_anthropic),
    "openai-responses": Wire("/v1/responses", reference.responses_request,
                             reference.normalize_responses),
    "bedrock-converse": Wire("/v1/model/m/converse", reference.bedrock_request,
                             reference.normalize_bedrock),
    "gemini": Wire("/v1/models/{model}:{call}", reference.gemini_request,
                   reference.normalize_gemini, model_in_url=True),
}


def _wire(case: Case) -> str:
    return provider_config(f"{case.route}/m", base_url="http://x", api_key="k").wire


def _request(case: Case, ex: Recorded) -> tuple[ModelRequest, bool]:
    """The request to send (the recorded one, read back) and whether to stream."""
    body = ex.request if case.check_request else None
    stream = case.stream if case.stream is not None else bool(
        (ex.request or {}).get("stream") or (ex.uri or "").endswith("/converse-stream"))
    if body is None:
        return ModelRequest(model=f"{case.route}/m", system=(),
                            messages=(user("hi", id="u1"),)), stream
    wire = WIRES[_wire(case)]
    if wire.model_in_url:  # Gemini names the model in its URL, not in the body
        body = {**body, "model": _url_model(ex)}
    return wire.read(body, case.route), stream


def _url_model(ex: Recorded) -> str:
    assert ex.uri is not None
    return ex.uri.split("/models/", 1)[1].split(":", 1)[0]


Outcome = tuple[list[ModelEvent], ApiError | None]


def _run_sync(server: ReplayServer, case: Case, request: ModelRequest, stream: bool) -> Outcome:
    cfg = provider_config(request.model, base_url=server.url + "/v1", api_key="sk-test-key")
    events: list[ModelEvent] = []
    with HttpProvider(cfg.endpoint, codec_for(case)[1](), stream=stream) as p:
        try:
            for e in p.stream(request):
                events.append(e)
        except ProviderError as err:
            return events, err.error
    return events, None


async def _run_async(
    server: ReplayServer, case: Case, request: ModelRequest, stream: bool
) -> Outcome:
    cfg = provider_config(request.model, base_url=server.url + "/v1", api_key="sk-test-key")
    events: list[ModelEvent] = []
    async with AsyncHttpProvider(cfg.endpoint, codec_for(case)[1](), stream=stream) as p:
        try:
            async for e in p.astream(request):
                events.append(e)
        except ProviderError as err:
            return events, err.error
    return events, None


# --- checking ------------------------------------------------------------------------


def _naive_text(ex: Recorded, wire: str) -> str | None:
    """The text by the simplest possible reading of the raw body (an independent oracle)."""
    if wire == "bedrock-converse":
        return _naive_event_stream_text(ex.decoded_body)
    raw = ex.decoded_body.decode()
    if raw.lstrip().startswith("{"):
        return None  # one JSON body: its text is checked by the expectations alone
    out: list[str] = []
    for line in raw.splitlines():
        if not line.startswith("data:") or line.strip() == "data: [DONE]":
            continue
        d = json.loads(line[5:])
        if wire == "gemini":
            for c in d.get("candidates", ()):
                parts = (c.get("content") or {}).get("parts", ())
                out.extend(p.get("text", "") for p in parts if not p.get("thought"))
        elif wire == "openai-responses":
            kind = d.get("type")
            out.append(d["delta"] if kind in ("response.output_text.delta",
                                              "response.refusal.delta") else "")
        elif wire == "anthropic":
            delta = d.get("delta") or {}
            out.append(delta.get("text", "") if delta.get("type") == "text_delta" else "")
        else:
            for ch in d.get("choices", ()):
                delta = ch.get("delta") or {}
                out.append((delta.get("content") or "") + (delta.get("refusal") or ""))
    return "".join(out)


def _naive_event_stream_text(raw: bytes) -> str | None:
    """The text of an AWS event stream, read frame by frame by its lengths alone."""
    if raw.lstrip().startswith(b"{"):
        return None
    out, at = [], 0
    while at < len(raw):
        total = int.from_bytes(raw[at:at + 4], "big")
        headers = int.from_bytes(raw[at + 4:at + 8], "big")
        payload = json.loads(raw[at + 12 + headers:at + total - 4])
        out.append((payload.get("delta") or {}).get("text", ""))
        at += total
    return "".join(out)


def _check(exp: Ok | Err, ex: Recorded, case: Case, outcome: Outcome) -> None:
    events, error = outcome
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    reasoning = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    if isinstance(exp, Err):
        assert error is not None, f"expected an error, got {events[-3:]}"
        assert (error.status, error.error_type, error.code, error.retryable) == (
            exp.status, exp.error_type, exp.code, exp.retryable)
        assert exp.message_has in error.message
        assert error.request_id == exp.request_id
        assert reasoning.startswith(exp.reasoning_before)
        assert not any(isinstance(e, ModelFinish) for e in events), "a failed call never finishes"
        return
    assert error is None, f"unexpected {error!r}"
    finishes = [e for e in events if isinstance(e, ModelFinish)]
    assert len(finishes) == 1 and events[-1] is finishes[0], "exactly one ModelFinish, last"
    fin = finishes[0]
    assert fin.finish_reason == exp.finish
    assert fin.usage == exp.usage
    if exp.response_id is not None:
        assert fin.response_id == exp.response_id
    if exp.text is not None:
        assert text == exp.text
    assert text.startswith(exp.text_start) and text.endswith(exp.text_end)
    naive = _naive_text(ex, _wire(case))
    if naive is not None:
        assert text == naive
    assert reasoning.startswith(exp.reasoning_start)
    assert bool(reasoning) == bool(exp.reasoning_start)
    sigs = [e.signature for e in events if isinstance(e, ReasoningEnd) and e.signature]
    if exp.signature_start is None:
        assert not sigs
    else:
        assert len(sigs) == 1 and sigs[0].startswith(exp.signature_start)
    calls = [Call(e.tool_call_id, e.tool_name, dict(e.args))
             for e in events if isinstance(e, ToolCall)]
    assert calls == list(exp.calls)
    # Streamed argument fragments add up to the parsed arguments.
    for c in exp.calls:
        frags = "".join(e.args_delta for e in events
                        if isinstance(e, ToolCallDelta) and e.tool_call_id == c.id)
        if frags:
            assert json.loads(frags) == c.args


def _check_request(server: ReplayServer, case: Case, ex: Recorded, n_before: int) -> None:
    seen = server.seen[n_before]
    assert seen.method == "POST"
    wire = WIRES[_wire(case)]
    path = wire.path
    if wire.model_in_url:
        assert case.stream is not None and seen.headers["x-goog-api-key"] == "sk-test-key"
        path = path.format(
            model=_url_model(ex) if ex.uri and case.check_request else "m",
            call="streamGenerateContent?alt=sse" if case.stream else "generateContent")
    assert seen.path.removesuffix("-stream") == path  # Bedrock: /converse-stream
    if not case.check_request or ex.request is None:
        return
    sent = json.loads(seen.body)
    assert wire.normalize(sent) == wire.normalize(ex.request)


def _exchanges(name: str) -> list[tuple[int, Recorded, Ok | Err, Case]]:
    case = CASES[name]
    cassette = load(ROOT, name)
    assert len(cassette.exchanges) == len(case.expect), name
    return [(i, ex, exp, case) for i, (ex, exp) in
            enumerate(zip(cassette.exchanges, case.expect, strict=True))]


@pytest.mark.parametrize("name", FILES)
def test_replay_sync(server: ReplayServer, name: str) -> None:
    for _i, ex, exp, case in _exchanges(name):
        request, stream = _request(case, ex)
        server.queue(Reply(ex.status, ex.headers, ex.body, chunks=SPLITS["sync"]))
        before = len(server.seen)
        _check(exp, ex, case, _run_sync(server, case, request, stream))
        _check_request(server, case, ex, before)


@pytest.mark.anyio
@pytest.mark.parametrize("name", FILES)
async def test_replay_async(server: ReplayServer, name: str, anyio_backend: str) -> None:
    for _i, ex, exp, case in _exchanges(name):
        request, stream = _request(case, ex)
        server.queue(Reply(ex.status, ex.headers, ex.body, chunks=SPLITS["async"]))
        before = len(server.seen)
        _check(exp, ex, case, await _run_async(server, case, request, stream))
        _check_request(server, case, ex, before)


# --- cross-checks between files ----------------------------------------------------------


def test_thinking_signature_round_trips(server: ReplayServer) -> None:
    """The signature decoded from turn 1 is byte for byte what turn 2 sent back."""
    name = PA + "models/cassettes/test_anthropic/test_anthropic_tool_with_thinking.yaml"
    first, second = load(ROOT, name).exchanges
    server.queue(Reply(first.status, first.headers, first.body))
    case = CASES[name]
    req, _ = _request(case, first)
    events, err = _run_sync(server, case, req, False)
    assert err is None
    [end] = [e for e in events if isinstance(e, ReasoningEnd)]
    assert second.request is not None
    sent_back = second.request["messages"][1]["content"][0]  # type: ignore[index]
    assert sent_back["type"] == "thinking"
    assert end.signature == sent_back["signature"]


def test_json_tool_is_structured_output_text(server: ReplayServer) -> None:
    """With structured output on Anthropic, the forced `json` tool's input is the answer."""
    name = "vercel+ai/packages/anthropic/src/__fixtures__/anthropic-json-tool.1.chunks.txt"
    [ex] = load(ROOT, name).exchanges
    server.queue(Reply(ex.status, ex.headers, ex.body, chunks=5))
    req = ModelRequest(
        model="anthropic/m", system=(), messages=(user("weather?", id="u1"),),
        structured_output=StructuredOutput({"type": "object"}, name="json"),
    )
    events, err = _run_sync(server, CASES[name], req, True)
    assert err is None
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert json.loads(text) == {"elements": [
        {"location": "San Francisco", "temperature": 58, "condition": "sunny"}]}
    assert not any(isinstance(e, ToolCall | ToolCallDelta) for e in events)
    assert isinstance(events[-1], ModelFinish) and events[-1].finish_reason == "stop"
    sent = json.loads(server.seen[-1].body)
    assert sent["tool_choice"] == {"type": "tool", "name": "json"}
    assert sent["tools"][-1]["input_schema"] == {"type": "object"}
