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


class _Slow:
    """A store whose usage writes take a moment and are counted (or refused)."""

    def __init__(self, store, refuse=False):
        self.store, self.refuse, self.writes = store, refuse, []

    async def add_usage(self, persona, spent):
        import asyncio

        from memory.store import StoreError

        self.writes.append(len(spent))
        await asyncio.sleep(0.01)
        if self.refuse:
            raise StoreError("the database is gone")
        await self.store.add_usage(persona, spent)


async def test_calls_ending_together_are_recorded_in_a_few_writes_and_each_is_stored_before_its_record_returns(
        make_config, caplog):
    """Issue 32: a burst of replies made one usage write each; now one write at a time takes all that ended
    meanwhile, and a call still returns only once its usage is stored."""
    import asyncio

    from bot.services.spending import Spending

    engine = await Engine.open(make_config(snapshots={"interval_seconds": 0}), OfflineLLM())
    slow = _Slow(engine.store)
    spending = Spending(slow, "P", DEFAULT_PRICES, engine.clock)  # type: ignore[arg-type]
    request = LLMRequest(system=(), turns=(), max_tokens=10)

    async def one(guild: int, model: str) -> int:
        with logs.tagged(guild=guild):
            await spending.record(request, LLMResult("x", Usage(100, 10, 1_000, 5), model=model))
        return sum(u.calls for u in await engine.store.usage_since("P", guild, "2000-01-01"))

    seen = await asyncio.gather(*(one(1 + n % 2, f"m{n % 3}") for n in range(60)))
    assert sum(slow.writes) <= 12 and len(slow.writes) <= 3  # (server, model) pairs per write, not calls
    assert all(calls >= 1 for calls in seen)  # each call's own usage was there when its record returned
    rows = [u for guild in (1, 2) for u in await engine.store.usage_since("P", guild, "2000-01-01")]
    assert sum(u.calls for u in rows) == 60 and sum(u.cache_read for u in rows) == 60_000 and len(rows) == 6

    # a caller cancelled while its write is under way leaves it to finish; shutdown waits for it
    task = asyncio.ensure_future(one(3, "m0"))
    await asyncio.sleep(0)
    task.cancel()
    await spending.drain()
    assert [u.calls for u in await engine.store.usage_since("P", 3, "2000-01-01")] == [1]

    slow.refuse = True  # the database refuses: logged, and the reply it paid for goes on
    await asyncio.gather(*(one(4, "m0") for _ in range(5)))
    assert "model usage of 5 call(s) not recorded: the database is gone" in caplog.text
    await engine.close()
