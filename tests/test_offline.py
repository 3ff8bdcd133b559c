import re

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.providers.offline import OFFLINE_TAG, OfflineLLM
from memory.extractive import extractive_summary
from memory.identifiers import identifiers
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
    assert "Hi!" not in summary and "ok" not in summary.split()  # greetings and backchannel are left out


def test_summary_under_a_small_budget_quotes_the_most_informative_and_lists_the_rest():
    summary = extractive_summary(TRANSCRIPT, budget=110)
    assert count_tokens(summary) <= 110
    assert "alice: Let's deploy calculator_v2 to #ops on 2026-03-14 at 10:30." in summary
    assert "weather" not in summary  # the sentence with nothing to keep loses to those with facts
    assert "Also mentioned:" in summary
    lost = [name for name in KEEP if name not in summary]
    assert not lost or summary.endswith("more)")


def test_summary_fills_its_budget_with_distinct_informative_sentences():
    facts = [f"[{who}]: I moved to {city} in {year} and adopted a dog named {dog}."
             for who, city, year, dog in zip(["ana", "ben", "cy"] * 10, [f"City{i}" for i in range(30)],
                                              range(1990, 2020), [f"Dog{i}" for i in range(30)], strict=False)]
    chatter = ["[ana]: haha yes", "[ben]: lol same", "[cy]: Good morning everyone!"] * 20
    summary = extractive_summary("\n".join(x for pair in zip(facts, chatter, strict=False) for x in pair), 300)
    assert 0.8 * 300 <= count_tokens(summary) <= 300  # the budget is used, not left half empty
    assert "haha" not in summary and "morning" not in summary
    quoted = [line for line in summary.splitlines() if "moved to" in line]
    assert len(quoted) == len(set(quoted)) >= 8 and all(line.startswith(("ana: ", "ben: ", "cy: ")) for line in quoted)


def test_summary_says_who_and_when_and_never_quotes_boilerplate_or_offline_replies():
    material = "\n".join([
        "[Monday, 8 May 2023]",
        "[Caroline]: I went to the LGBTQ support group yesterday and it was powerful. (yesterday: 7 May 2023) "
        "Thanks for asking.",
        f"[Stelis]: {OFFLINE_TAG} Stelis here: no language model is configured, so I can listen.",
        "You said: \"something\"",
        "[Tuesday, 9 May 2023]",
        "[Melanie]: I painted a lake sunrise for my art class.",
        "# Memory of this conversation",
        "Also mentioned: Foo, Bar",
    ])
    summary = extractive_summary(material, 200)
    assert summary.splitlines()[:2] == ["[8 May 2023]", "Caroline: I went to the LGBTQ support group yesterday "
                                                         "and it was powerful. (yesterday: 7 May 2023)"]
    assert "[9 May 2023]\nMelanie: I painted a lake sunrise for my art class." in summary
    for junk in (OFFLINE_TAG, "You said", "# Memory"):
        assert junk not in summary
    # An earlier summary's name list is carried as names, never quoted as a sentence.
    assert [line for line in summary.splitlines() if "Foo" in line] == ["Also mentioned: Foo, Bar"]


def test_a_resummary_carries_the_names_and_the_count_an_earlier_summary_could_not_fit():
    earlier = "[ana]: I met Kenji at the station.\nAlso mentioned: Haruto, Yui (+7 more)"
    assert extractive_summary(earlier, 200).endswith("Also mentioned: Haruto, Yui (+7 more)")
    tight = extractive_summary(earlier + "\n" + "\n".join(f"[ana]: Name{i} came by." for i in range(40)), 60)
    more = re.search(r"Also mentioned: .* \(\+(\d+) more\)$", tight).group(1)
    named = len(set(re.findall(r"Name\d+|Haruto|Yui", tight)))
    assert named + int(more) - 7 == 42  # every name is shown or counted, with the earlier 7 still counted


def test_a_merge_keeps_provenance_and_never_quotes_its_headers():
    material = ("[existing long-term memory v19]\n[8 May 2023]\nCaroline: Caroline adopted a cat named Miso. [v3]\n\n"
                "[v20]\n[12 May 2023]\nMelanie: Melanie signed up for a pottery class in Kyoto.")
    merged = extractive_summary(material, 300)
    assert "existing long-term memory" not in merged and "[v20]\n" not in merged
    assert "Caroline: Caroline adopted a cat named Miso. [v3]" in merged
    assert "Melanie: Melanie signed up for a pottery class in Kyoto. [v20]" in merged


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


async def test_offline_reply_says_it_is_offline_and_shows_what_memory_holds_with_its_layer():
    request = LLMRequest(
        system=(Block("card"), Block("# Memory of this conversation\n## Long-term memory (v2)\n- Mahe likes tea.\n"
                                     "- Mahe's cat is called Tama.\n### Memory 1 of 1 (newest), v5, messages 1-9\n"
                                     "[Monday, 8 May 2023]\n[Stelis thread: cat names]\nmahe: the cat sleeps a lot")),
        turns=(Turn.text("user", "[Monday, 8 May 2023]\n[mahe] my cat is Tama"),
               Turn.text("assistant", f"{OFFLINE_TAG} Stelis here."),
               Turn(role="user", blocks=(Block("[Now: Monday, 8 May 2023, 10:00 UTC]"),
                                         Block("[mahe] what is my cat called?"),
                                         Block("[Recall: from earlier, found for the message above]\n"
                                               "Sunday, 7 May 2023, #pets:\n- mahe: the cat is a tabby")))),
        max_tokens=100, persona="Stelis",
    )
    pieces = []
    result = await OfflineLLM().complete(request, on_text=pieces.append)
    lines = result.text.splitlines()
    assert lines[0] == (f"{OFFLINE_TAG} Stelis here. No language model is configured, so I cannot answer; this is "
                        "what I remember that fits:")
    assert lines[1] == "- Mahe's cat is called Tama. (long-term memory v2)"  # the layer each line came from
    assert "- mahe: the cat sleeps a lot (short-term memory v5)" in lines
    assert "- the cat is a tabby (recall: Sunday, 7 May 2023, mahe (#pets))" in lines
    assert not any("tea" in ln or "Stelis thread" in ln for ln in lines)  # not about the cat; never an anchor line
    assert lines[-1].startswith("(1 earlier message(s) from people here and 1 of mine in view")  # not its own
    assert pieces == [result.text]
    nothing = await OfflineLLM().complete(LLMRequest(system=(Block("card"),), turns=(Turn.text("user", "[m] hi"),),
                                                     max_tokens=50, persona="Stelis"))
    assert "nothing in my memory matches that yet" in nothing.text


async def test_offline_reply_finds_what_was_said_in_view_and_shows_one_fact_once():
    """Told a locker code, asked for it: it is in the window (recall leaves that out), so the reply shows it; the
    same fact in a version and the long-term memory is shown once."""
    asked = Turn.text("user", "[Tuesday, 24 November 2026]\n[you] my locker code is 4417\n"
                              "[you] what is my locker code?")
    request = LLMRequest(system=(Block("card"),), turns=(asked,), max_tokens=100, persona="Stelis")
    lines = (await OfflineLLM().complete(request)).text.splitlines()
    assert "- my locker code is 4417 (said here by you, Tuesday, 24 November 2026)" in lines

    memory = Block("# Memory of this conversation\n## Long-term memory (v2)\nyou: my locker code is 4417 [v1]\n"
                   "### Memory 1 of 1 (newest), v1, messages 1-2\nyou: my locker code is 4417")
    again = LLMRequest(system=(Block("card"), memory), turns=(Turn.text("user", "[you] what is my locker code?"),),
                       max_tokens=100, persona="Stelis")
    text = (await OfflineLLM().complete(again)).text
    assert text.count("4417") == 1 and "memory v1)" in text  # the newest layer that holds it

    within = LLMRequest(system=(Block("card"), memory), turns=(Turn.text(
        "user", "[you] hi, my locker code is 4417 and the gym opens at six\n[you] what is my locker code?"),),
        max_tokens=100, persona="Stelis")
    text = (await OfflineLLM().complete(within)).text
    assert text.count("4417") == 1  # the message holds the summary's sentence: one fact, shown once
