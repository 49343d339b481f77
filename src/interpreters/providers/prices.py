"""Prices from `genai-prices`, the maintained price table (an optional extra:
`pip install "pipeline-agents[prices]"`).

    interp = SyncInterpreter(resolve=Resolver(), price=genai_prices())
    result = interp.run(agent, "hi")
    result.cost            # Cost(total=Decimal('0.000021'), ...) or None

Only the table bundled with the installed package is used (no update is fetched: the
library runs offline). A model is priced on its provider's price list: the `price_id` of
its route's row in the table of routes (providers/table.py; `openai/`, `anthropic/`,
`groq/`, `mistral/`, `openrouter/` have one); the model the provider said answered is
priced when it said one. A route without a price id (the self-hosted `ollama/`, `vllm/`,
`openai-compatible/`), an id without a known prefix, or a model the table does not list
gives None: no cost, never a wrong one.
"""

from __future__ import annotations

from datetime import UTC, datetime

from interpreters.providers.table import ROUTES, split_model
from pipeline.values.cost import Cost, PriceQuery, Pricer


class PricesNotInstalled(ImportError):
    """genai-prices is not installed."""


def genai_prices() -> Pricer:
    """A pricer over genai-prices' bundled table."""
    try:
        import genai_prices as gp
    except ImportError as e:
        raise PricesNotInstalled(
            'pricing needs genai-prices: pip install "pipeline-agents[prices]"'
        ) from e

    def price(q: PriceQuery) -> Cost | None:
        route, name = split_model(q.model)
        provider = ROUTES[route].price_id if route is not None else None
        if provider is None:
            return None
        usage = gp.Usage(
            input_tokens=q.usage.input_tokens,
            output_tokens=q.usage.output_tokens,
            cache_read_tokens=q.usage.cached_input_tokens,
            cache_write_tokens=q.usage.cache_write_tokens,
        )
        when = datetime.fromtimestamp(q.at, UTC)
        for ref in _refs(q.response_model, name):
            try:
                calc = gp.calc_price(
                    usage, ref, provider_id=provider, genai_request_timestamp=when
                )
            except LookupError:
                continue
            return Cost(calc.total_price, calc.input_price, calc.output_price)
        return None

    return price


def _refs(response_model: str | None, name: str) -> tuple[str, ...]:
    # The model that answered is the one billed; only when the provider did not say
    # which is the requested one priced.
    if response_model:
        return (response_model,)
    return (name,)


__all__ = ["PricesNotInstalled", "genai_prices", "split_model"]
