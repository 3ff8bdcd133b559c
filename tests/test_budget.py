"""One budget (DESIGN.md section 5): the plan's arithmetic from 2k to 200k, and dates that keep the cache."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory.backends import open_store
from memory.budget import MIN_TAIL, MOST_ASKED, MOST_RECALL, Budget, ContextError, plan
from memory.context import Assembler, Persona
from memory.records import NewMessage, Scope
from memory.settings import ContextSettings, StelisSettings
from tests.context_helpers import stable_prefix

CONTEXTS = st.integers(min_value=2_048, max_value=200_000)


@given(CONTEXTS, st.integers(min_value=1, max_value=200_000), st.integers(min_value=0, max_value=60_000))
def test_every_planned_part_fits_the_input_and_the_reply_keeps_its_reserve(context, max_output, system):
    budget = Budget(context, min(max_output, context - 1))
    assert 0 < budget.output <= context // 4
    assert budget.input + budget.output <= context
    try:
        p = plan(budget, system)
    except ContextError as exc:
        assert system > budget.input * 2 // 3 - 1 or budget.input - system < 256
        assert "llm.context_tokens" in str(exc) and "persona.card" in str(exc)
        return
    windows = p.windows(p.memory)  # memory at its share: the worst case for the windows
    # A full window still leaves the tail its minimum and recall its floor; an emptier one leaves them more.
    assert p.system + p.memory + MIN_TAIL + p.recall_floor + windows == p.input
    assert 0 < p.recall_floor <= p.recall or p.recall == 0
    assert min(p.memory, p.tail, p.recall) >= 0 and windows >= 0.5 * p.rest


@given(CONTEXTS)
def test_a_small_persona_card_leaves_most_of_any_budget_to_the_conversation(context):
    budget = Budget(context, 1_024)
    p = plan(budget, 300)
    assert p.windows(0) + p.recall >= 0.6 * (budget.input - 300)  # no fixed reserves eat a small context
    assert p.memory == int((budget.input - 300) * ContextSettings().memory_share)


def test_recall_keeps_to_a_few_hit_lines_for_a_remark_and_a_question_may_have_more():
    # The tail is paid in full every turn: a 200k context must not send 19k tokens of recall with each reply.
    small, large = plan(Budget(4_096, 512), 300), plan(Budget(200_000, 1_024), 300)
    assert small.recall_room(False) == int(small.rest * ContextSettings().recall_share) < MOST_RECALL
    assert large.recall_room(False) == MOST_RECALL and large.recall_floor <= MOST_RECALL
    # a question may take what the window leaves (the layout bounds it), but no more than a search's hits fill
    assert small.recall_room(True) == large.recall_room(True) == MOST_ASKED
    assert small.windows(0) + small.recall_floor + MIN_TAIL + small.system == small.input  # planned on the floor


def test_a_persona_card_that_leaves_no_room_is_refused_with_the_keys_to_change():
    with pytest.raises(ContextError, match=r"persona\.card or raise llm\.context_tokens"):
        plan(Budget(2_048, 256), 1_700)


async def test_day_lines_render_from_stored_times_byte_for_byte_on_any_later_day(tmp_path):
    start = 1_683_540_000.0  # Monday 8 May 2023, 10:00 UTC
    now = [start]
    store = await open_store(tmp_path / "dates.sqlite3", clock=lambda: now[0])
    thread = await store.root_thread("Stelis", Scope.console(), 1.0)
    for day in range(3):
        for hour in range(3):
            now[0] = start + day * 86_400 + hour * 3_600
            await store.append(thread.id, NewMessage("user", f"day {day} hour {hour}", author_name="mahe"))

    def assembler(at: float) -> Assembler:
        return Assembler(store, None, Persona("Stelis", "You are Stelis."), Budget(8_000, 200), ContextSettings(),
                         StelisSettings(chunk_tokens=800), clock=lambda: at)

    first = await assembler(start + 3 * 86_400).assemble(thread.id, persist=False)
    later = await assembler(start + 30 * 86_400).assemble(thread.id, persist=False)
    prefix = stable_prefix(first)
    assert prefix == stable_prefix(later)  # the day the request is built never changes the cached bytes
    text = "\n".join(prefix)
    for line in ("[Monday, 8 May 2023]", "[Tuesday, 9 May 2023]", "[Wednesday, 10 May 2023]"):
        assert text.count(line) == 1  # once, where the day changes
    assert text.index("[Tuesday, 9 May 2023]") < text.index("day 1 hour 0") < text.index("[Wednesday")
    await store.close()
