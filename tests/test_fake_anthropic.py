"""The fake server's own rules: it must catch what the real API rejects, and cache like it."""

import pytest

from tests.fake_anthropic import FakeAnthropic, RequestRejected, validate_request


def body(*messages, system=None, **extra):
    out = {"model": "m", "max_tokens": 10, "messages": list(messages), **extra}
    if system is not None:
        out["system"] = system
    return out


def user(*blocks):
    return {"role": "user", "content": list(blocks)}


def assistant(*blocks):
    return {"role": "assistant", "content": list(blocks)}


def text(t, cache=None):
    block = {"type": "text", "text": t}
    if cache:
        block["cache_control"] = {"type": "ephemeral", "ttl": cache}
    return block


def tool_use(i):
    return {"type": "tool_use", "id": i, "name": "run", "input": {}}


def tool_result(i):
    return {"type": "tool_result", "tool_use_id": i, "content": "ok"}


RUN = [{"name": "run", "description": "runs it", "input_schema": {"type": "object", "properties": {}}}]


@pytest.mark.parametrize(("request_body", "message"), [
    (body(assistant(text("hi"))), 'first message must use the "user" role'),
    (body(user(text("a")), user(text("b"))), "roles must alternate"),
    (body(user(text(""))), "must be non-empty"),
    (body(user(text("  \n"))), "non-whitespace text"),
    (body(user(text("q")), assistant(tool_use("t1")), user(text("no result")), tools=RUN), "without `tool_result`"),
    (body(user(tool_result("zz")), tools=RUN), "unexpected `tool_use_id`"),
    (body(user(text("q")), assistant(tool_use("t1")), user(text("x"), tool_result("t1")), tools=RUN),
     "must come first"),
    (body(user(text("q")), assistant(tool_use("t1")), tools=RUN), "no results"),
    (body(user(text("q")), assistant(tool_use("t1")), user(tool_result("t1"))), "must define tools"),
    (body(user(text("q")), tool_choice={"type": "auto"}), "tool_choice may only be specified while providing tools"),
    (body(user(text("q")), tools=[{**RUN[0], "name": "no spaces allowed"}]), "tools.0.name"),
    (body(user(text("q")), tools=[{**RUN[0], "parameters": {}}]), "Extra inputs are not permitted"),
    (body(user(text("q")), tools=RUN, tool_choice={"type": "tool", "name": "fly"}), "no tool named 'fly'"),
    (body(user(*[text(f"b{i}", "5m") for i in range(5)])), "maximum of 4 blocks with cache_control"),
    (body(user(text("a", "5m"), text("b", "1h"))), "ttl='1h'"),
    (body(user(text("a")), system=[text("")]), "system.0: text content blocks must be non-empty"),
    ({"model": "m", "max_tokens": 0, "messages": [user(text("a"))]}, "max_tokens"),
])
def test_rule_breaking_requests_are_rejected(request_body, message):
    with pytest.raises(RequestRejected, match=message):
        validate_request(request_body)


def test_a_valid_tool_exchange_passes():
    validate_request(body(
        user(text("q")), assistant(text("let me look"), tool_use("t1"), tool_use("t2")),
        user(tool_result("t2"), tool_result("t1"), text("thanks")), assistant(text("done")),
        user(text("ok")), system=[text("card", "1h")], tools=RUN, tool_choice={"type": "any"},
    ))


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_cache_reads_the_prefix_written_at_a_breakpoint():
    server = FakeAnthropic(min_cacheable_tokens=50)
    card = "persona card words " * 40
    first = server.account(body(user(text("hi")), system=[text(card, "5m")]))
    second = server.account(body(user(text("hello")), system=[text(card, "5m")]))
    assert first["cache_read_input_tokens"] == 0 and first["cache_creation_input_tokens"] > 50
    assert second["cache_read_input_tokens"] == first["cache_creation_input_tokens"]
    assert second["cache_creation_input_tokens"] == 0
    changed = server.account(body(user(text("hello")), system=[text(card + "!", "5m")]))
    assert changed["cache_read_input_tokens"] == 0


def test_short_prefixes_are_not_cached():
    server = FakeAnthropic(min_cacheable_tokens=1024)
    for _ in range(2):
        usage = server.account(body(user(text("tiny")), system=[text("short card", "5m")]))
        assert usage["cache_read_input_tokens"] == usage["cache_creation_input_tokens"] == 0


def test_lookback_finds_a_prefix_at_most_20_blocks_before_the_breakpoint():
    server = FakeAnthropic(min_cacheable_tokens=10)
    history = [text(f"message number {i} with some words") for i in range(40)]
    marked = [*history[:10], {**history[10], "cache_control": {"type": "ephemeral"}}]
    server.account(body(user(*marked)))
    near = [*history[:30], {**history[30], "cache_control": {"type": "ephemeral"}}]
    far = [*history[:32], {**history[32], "cache_control": {"type": "ephemeral"}}]
    assert server.account(body(user(*far)))["cache_read_input_tokens"] == 0
    assert server.account(body(user(*near)))["cache_read_input_tokens"] > 0


def test_entries_expire_after_their_ttl():
    clock = Clock()
    server = FakeAnthropic(min_cacheable_tokens=10, clock=clock)
    card = "card " * 50
    server.account(body(user(text("a")), system=[text(card, "5m")]))
    clock.now += 299
    assert server.account(body(user(text("a")), system=[text(card, "5m")]))["cache_read_input_tokens"] > 0
    clock.now += 301  # the hit refreshed it for 5 minutes; now past that
    assert server.account(body(user(text("a")), system=[text(card, "5m")]))["cache_read_input_tokens"] == 0
    server.account(body(user(text("a")), system=[text(card, "1h")]))
    clock.now += 3000
    assert server.account(body(user(text("a")), system=[text(card, "1h")]))["cache_read_input_tokens"] > 0


def test_usage_adds_up_to_the_whole_request():
    server = FakeAnthropic(min_cacheable_tokens=10)
    b = body(user(text("one " * 30, "5m")), assistant(text("two")), user(text("three")), system=[text("s " * 30, "1h")])
    u1 = server.account(b)
    u2 = server.account(b)
    total = sum(u1[k] for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"))
    assert total == sum(u2[k] for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"))
    assert u2["cache_read_input_tokens"] == u1["cache_creation_input_tokens"] and u2["input_tokens"] > 0
