"""Model output that becomes memory is checked (issue 27, points 3-4): answers real small models gave are
refused, asked once more, then replaced by the extractive summary; a good answer is kept as it is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory.llm import LLMRequest, LLMResult
from memory.summarise import Line, summarise
from memory.vetting import echoes, refusal

ANSWERS = json.loads((Path(__file__).parent / "fixtures" / "real_model_answers.json").read_text(encoding="utf-8"))
TRANSCRIPT = [Line.of("[Tuesday, 24 November 2026]"),
              Line.of("[kai]: the lighthouse tour is on Saturday at 9, meet at the north pier"),
              Line.of("[lena]: I'll bring the tide table")]


class Answers:
    """A model that gives these answers in turn (then the last again), recording each request."""

    name = "recorded"

    def __init__(self, *names: str):
        self.answers = [ANSWERS[n] for n in names]
        self.requests: list[LLMRequest] = []

    async def complete(self, request: LLMRequest, on_text=None) -> LLMResult:
        answer = self.answers[min(len(self.requests), len(self.answers) - 1)]
        self.requests.append(request)
        return LLMResult(answer["text"], stop_reason=answer["finish_reason"])

    async def aclose(self) -> None:
        return None


class Saying(Answers):
    """A model that always answers `text`, finished."""

    def __init__(self, text: str):
        super().__init__("good")
        self.answers = [{"text": text, "finish_reason": "stop"}]


async def _summary(llm: Answers) -> str:
    return await summarise(llm, "Write the next short-term memory of this conversation.", TRANSCRIPT,
                           chunk_tokens=2000, max_tokens=120)


BAD = ["echoed_instructions", "invented_example_person", "cut_at_max_tokens", "empty", "combined_garbage",
       "combined_echo"]


@pytest.mark.parametrize("bad", BAD)
async def test_a_bad_answer_is_asked_again_and_a_good_second_one_is_kept(bad):
    llm = Answers(bad, "good")
    assert await _summary(llm) == ANSWERS["good"]["text"].strip()
    assert len(llm.requests) == 2 and llm.requests[0] == llm.requests[1]


@pytest.mark.parametrize("bad", BAD)
async def test_two_bad_answers_leave_the_extractive_summary_never_the_garbage(bad):
    llm = Answers(bad)
    kept = await _summary(llm)
    assert len(llm.requests) == 2
    assert "north pier" in kept and "kai" in kept  # what was said, quoted with who said it
    assert "memory notes" not in kept and "Kyoto" not in kept and "<transcript>" not in kept
    assert kept != ANSWERS[bad]["text"].strip()


def test_what_each_refusal_says():
    llm = Answers("good")
    request = LLMRequest(system=(), turns=(), max_tokens=600)
    material = "\n".join(line.text for line in TRANSCRIPT)
    said = {name: refusal(LLMResult(a["text"], stop_reason=a["finish_reason"]), request, material)
            for name, a in ANSWERS.items() if isinstance(a, dict) and "text" in a}
    assert said["good"] is None
    assert said["cut_at_max_tokens"] == "cut off at 600 tokens (length)"
    assert said["empty"] == "empty"
    assert "Mahe" in (said["invented_example_person"] or "") and "Kyoto" in (said["invented_example_person"] or "")
    assert llm.requests == []


async def test_a_summary_may_repeat_its_pinned_facts_and_the_material_word_for_word():
    """Data in the request (pins, earlier versions, the transcript) is not an instruction to echo."""
    pinned = "- kai: the lighthouse tour is on Saturday at 9, meet at the north pier"

    llm = Saying("kai: the lighthouse tour is on Saturday at 9, meet at the north pier")
    kept = await summarise(llm, f"Write the memory.\n\nPinned facts:\n{pinned}", TRANSCRIPT, chunk_tokens=2000,
                           max_tokens=120)
    assert len(llm.requests) == 1 and kept.startswith("kai: the lighthouse tour")


async def test_a_long_term_merge_that_echoes_is_never_stored():
    from memory.settings import MemorySettings, MemoryWorkSettings, ShortTermSettings, StelisSettings
    from memory.short_term import merge

    llm = Answers("echoed_instructions")
    settings = MemorySettings(ShortTermSettings(), MemoryWorkSettings(), StelisSettings())
    merged = await merge(llm, "channel general", None, [("v1", ANSWERS["good"]["text"])], [], settings)
    assert len(llm.requests) == 2 and "memory notes" not in merged and "north pier" in merged


async def test_a_new_version_may_repeat_facts_of_the_earlier_versions_it_was_shown():
    """Earlier versions are data in the request (indented under their `- vN:` line), not instructions."""
    from memory.records import MemoryRecord
    from memory.templates import render

    earlier = MemoryRecord(id=1, persona="p", scope="channel", scope_id=1, type="short_term", version=1,
                           content="[23 November 2026]\nkai: every single bicycle going past the pier\nlena: the tide",
                           first_seq=1, last_seq=2, metadata={}, created_at=0.0)
    earlier_versions = render("short_term_context.md.j2", previous=[earlier], pins=[])

    llm = Saying("kai: every single bicycle going past the pier\nkai: the tour is on Saturday at 9")
    kept = await summarise(llm, render("short_term_request.md.j2"), TRANSCRIPT, chunk_tokens=2000, max_tokens=120,
                           context=[earlier_versions])
    assert len(llm.requests) == 1 and kept.startswith("kai: every single bicycle")
    assert "every single bicycle" in llm.requests[0].turns[0].blocks[0].text  # the version it was shown


async def test_a_merge_too_large_for_the_context_is_merged_extractively_not_retried_for_ever():
    from memory.llm import RequestTooLarge
    from memory.settings import MemorySettings, MemoryWorkSettings, ShortTermSettings, StelisSettings
    from memory.short_term import merge

    class TooSmall(Answers):
        async def complete(self, request, on_text=None):
            self.requests.append(request)
            raise RequestTooLarge("the request needs about 3000 tokens of the model's 2048")

    llm = TooSmall("good")
    settings = MemorySettings(ShortTermSettings(), MemoryWorkSettings(), StelisSettings())
    merged = await merge(llm, "channel general", None, [("v1", ANSWERS["good"]["text"])], [], settings)
    assert len(llm.requests) == 1 and "north pier" in merged


async def test_a_combined_summary_that_copies_the_part_headers_it_was_given_is_refused():
    llm = Answers("good", "good", "combined_echo")  # two parts, then the combining answer (twice)
    lines = [Line.of(f"[kai]: message {i} about the lighthouse tour and the north pier, and the tide")
             for i in range(60)]
    kept = await summarise(llm, "Write the memory.", lines, chunk_tokens=500, max_tokens=200)
    combining = [r for r in llm.requests if "[part 1 of" in str(r.turns)]
    assert len(combining) == 2  # refused once, asked again, refused again
    assert "[part" not in kept and "This is part" not in kept and "north pier" in kept


async def test_the_extractive_summary_that_replaces_a_refused_one_never_quotes_the_requests_markup():
    # As in a 2k `make e2e` run: the persona's own replies repeated "[part 2 of 2]", the model's summaries
    # were refused twice, and the extractive one kept quoting the wrapping as what was said.
    lines = [Line.of("[Rin]: I'll be happy to help you find the Osprey again."),
             Line.of("[Rin]: [part 2 of 2]"),
             Line.of("[Rin]: [part 1 of 2] <transcript>The tour starts at the north pier.</transcript>")]
    kept = await summarise(Answers("echoed_instructions"), "Write the memory.", lines, chunk_tokens=2000,
                           max_tokens=200)
    assert "Osprey" in kept and "north pier" in kept
    assert echoes(kept, "", "") is None and "[part" not in kept and "transcript>" not in kept


class Failing(Answers):
    """A model that cannot answer: down, or the request too large for it."""

    def __init__(self, error: Exception):
        super().__init__("good")
        self.error = error

    async def complete(self, request: LLMRequest, on_text=None) -> LLMResult:
        self.requests.append(request)
        raise self.error


async def test_a_failing_model_is_an_error_except_while_an_erasure_finishes_its_rewrite():
    from memory.llm import LLMError, RequestTooLarge
    from memory.vetting import finishing

    down = Failing(LLMError("The model is overloaded (529) after 3 retries; try again in a minute."))
    with pytest.raises(LLMError):
        await _summary(down)
    with finishing():
        kept = await _summary(down)
    assert "north pier" in kept and "kai" in kept  # the extractive summary of what is there
    with pytest.raises(LLMError):  # the erasure's context ends with it
        await _summary(down)
    too_large = Failing(RequestTooLarge("the request needs 9,000 tokens; the model holds 4,096"))
    with finishing(), pytest.raises(RequestTooLarge):  # the model is there: asked again in smaller parts
        await _summary(too_large)
    assert len(too_large.requests) > 1
