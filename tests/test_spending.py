"""What the model costs: each call kept for the server it worked for, with an estimated price by model."""

from bot import logs
from bot.config import DEFAULT_PRICES
from bot.engine import Engine
from bot.providers.offline import OfflineLLM
from memory.llm import LLMRequest, LLMResult, Usage
from memory.records import ModelUsage, Scope


async def test_a_reply_is_counted_for_its_server_and_a_call_for_none_under_no_server(make_config):
    engine = await Engine.open(make_config(snapshots={"interval_seconds": 0}), OfflineLLM())
    here = Scope.channel(7, 70)
    await engine.conversations.hear(here, "what is on the harbour schedule?", author_name="ana")
    with logs.tagged(guild=7):
        await engine.conversations.reply((await engine.stelis.root(here)).id)
    request = LLMRequest(system=(), turns=(), max_tokens=10)
    await engine.spending.record(request, LLMResult("x", Usage(500, 20, 1_500, 0), model="claude-sonnet-5-5"))
    server = await engine.spending.of(7)
    assert [(u.calls, u.model) for u, _ in server.rows] == [(1, engine.model_name)]
    nobody = await engine.spending.of(None)
    [(_day, calls, tokens, share, cost)] = nobody.days()
    assert (calls, tokens, share) == (1, 2_020, 0.75) and cost == (500 * 3 + 20 * 15 + 1_500 * 0.3) / 1e6
    await engine.close()


def test_the_price_is_the_longest_configured_name_that_begins_the_models(make_config):
    from bot.services.spending import Spending

    prices = {**DEFAULT_PRICES, "claude-sonnet-5": DEFAULT_PRICES["claude-opus"]}
    spending = Spending(None, "P", prices, lambda: 0.0)  # type: ignore[arg-type]
    usage = ModelUsage("2026-11-24", "claude-sonnet-5-5", 1, 1_000_000, 0, 0, 0)
    assert spending.cost(usage) == DEFAULT_PRICES["claude-opus"].input
    assert spending.cost(ModelUsage("2026-11-24", "smollm2-135m", 1, 1_000_000, 0, 0, 0)) is None  # unknown: none
