from hypothesis import given, settings
from hypothesis import strategies as st

from bot.providers.offline import OFFLINE_TAG, OfflineLLM, extractive_summary, identifiers
from memory.llm import Block, LLMRequest, Turn
from memory.tokens import count_tokens

TRANSCRIPT = """alice: Hi! Let's deploy calculator_v2 to #ops on 2026-03-14 at 10:30.
bob: Sure. The ticket is ISSUE-42 and the docs are at https://example.com/docs?v=2.
alice: I think the weather is nice today, we should take a walk later and enjoy it.
carol: Ping <@123456789012345678> about the parseConfig function and version 3.2.1.
bob: ok
まはー: 明日はTokyoで会おう。"""

KEEP = ["alice", "bob", "carol", "まはー", "calculator_v2", "#ops", "2026-03-14", "10:30", "ISSUE-42",
        "https://example.com/docs?v=2", "<@123456789012345678>", "parseConfig", "3.2.1", "Tokyo"]


def test_identifiers_found():
    found = identifiers(TRANSCRIPT)
    for name in KEEP:
        assert name in found, name
    assert "I" not in found and "The" not in found


def test_summary_keeps_every_name_number_and_identifier():
    summary = extractive_summary(TRANSCRIPT)
    for name in KEEP:
        assert name in summary, name
    assert "weather" not in summary  # the sentence with nothing to keep is left out


def test_summary_under_a_small_budget_lists_identifiers_before_quotes():
    summary = extractive_summary(TRANSCRIPT, budget=110)
    assert "Also mentioned:" in summary
    for name in KEEP:
        assert name in summary, name


def test_summary_never_exceeds_its_budget_and_counts_what_it_left_out():
    summary = extractive_summary(TRANSCRIPT, budget=25)
    assert count_tokens(summary) <= 25
    assert summary.endswith("more)")


def test_summary_is_deterministic():
    assert extractive_summary(TRANSCRIPT) == extractive_summary(TRANSCRIPT)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.from_regex(r"[A-Z][a-z]{2,8}_v[0-9]{1,3}", fullmatch=True), min_size=1, max_size=30),
       st.integers(min_value=20, max_value=400))
def test_identifiers_are_kept_or_counted_never_silently_lost(names, budget):
    text = "\n".join(f"user{i}: we talked about {n} today." for i, n in enumerate(names))
    summary = extractive_summary(text, budget=budget)
    assert count_tokens(summary) <= budget
    lost = [n for n in names if n not in summary]
    if lost:
        assert summary.endswith("more)")
    if budget >= 12 * len(names) + 20:
        assert not lost


async def test_offline_summary_request_summarises_the_user_material():
    result = await OfflineLLM().complete(LLMRequest(
        system=(Block("Summarise neutrally."),), turns=(Turn.text("user", TRANSCRIPT),),
        max_tokens=300, purpose="summary",
    ))
    assert "calculator_v2" in result.text and result.model == "offline"
    assert result.usage.output_tokens > 0


async def test_offline_reply_says_so_and_shows_what_it_remembers():
    request = LLMRequest(
        system=(Block("card"), Block("Long-term memory: Mahe likes tea.")),
        turns=(Turn.text("user", "[mahe] my cat is Tama"), Turn.text("assistant", "nice"),
               Turn.text("user", "[mahe] what is my cat called?")),
        max_tokens=100, persona="Stelis",
    )
    pieces = []
    result = await OfflineLLM().complete(request, on_text=pieces.append)
    assert result.text.startswith(f"{OFFLINE_TAG} Stelis here")
    assert 'You said: "what is my cat called?"' in result.text
    assert "[mahe] my cat is Tama" in result.text
    assert "Long-term memory: Mahe likes tea." in result.text
    assert pieces == [result.text]
