"""Built-in processors: guards and history tools, each a pure processor in its own module.

Heavy detector libraries are optional (`pip install 'pipeline-agents[guards]'`) and
imported only by the processor that needs them, when it is created.
"""

from pipeline.processors.language_detector import LanguageDetector as LanguageDetector
from pipeline.processors.language_detector import Py3LangidBackend as Py3LangidBackend
from pipeline.processors.moderation import ModerationProcessor as ModerationProcessor
from pipeline.processors.prompt_injection import PromptInjectionDetector as PromptInjectionDetector
from pipeline.processors.token_counting import ApproxTokenCounter as ApproxTokenCounter
from pipeline.processors.token_counting import EncodingCounter as EncodingCounter
from pipeline.processors.token_counting import TokenCounter as TokenCounter
from pipeline.processors.token_limiter import TokenLimiterProcessor as TokenLimiterProcessor
from pipeline.processors.tool_call_filter import ToolCallFilter as ToolCallFilter
from pipeline.processors.unicode_normalizer import UnicodeNormalizer as UnicodeNormalizer
