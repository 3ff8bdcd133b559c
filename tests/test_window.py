import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory.budget import summary_room
from memory.observation import reduce_observation
from memory.settings import ContextSettings
from memory.window import (
    Item,
    LockedBufferTooLarge,
    fill_target,
    head_end,
    lock_limit,
    locked_start,
    plan_cut,
    plan_trim,
    protected_size,
    trim_pays,
    window_size,
)


def unchecked(**values: object) -> ContextSettings:
    """Window math at values config.yaml refuses (no summary at all), to test the arithmetic alone."""
    return ContextSettings.model_construct(**values)


POLICY = unchecked(low_water=0.6, high_water=0.9, locked_turns=2, summary_tokens=0)


def test_window_sizes_for_depths_0_to_3_follow_the_seed():
    assert [window_size(100_000, [0.8] * d) for d in range(4)] == [100_000, 80_000, 64_000, 51_200]
    assert window_size(100_000, [0.5, 0.8]) == 40_000  # each thread's own ratio, root to leaf
    assert protected_size(100_000, 0.8) == 20_000
    assert protected_size(80_000, 0.8) == 16_000
    assert window_size(100_000, [0.8]) + protected_size(100_000, 0.8) == 100_000


def items(*spec):
    """(tokens, starts_turn) pairs."""
    return [Item(i + 1, t, s) for i, (t, s) in enumerate(spec)]


def test_nothing_is_cut_while_the_window_fits():
    assert plan_cut(items((10, True), (10, False), (10, True)), budget=30, policy=POLICY) is None


def test_a_spare_delays_the_overflow_but_the_cut_is_planned_within_the_budget():
    history = items(*[(10, i % 2 == 0) for i in range(12)])  # six turns of 20
    roomy = unchecked(low_water=0.6, high_water=0.9, locked_turns=2, summary_tokens=0, turns_per_cut=1)
    assert plan_cut(history, budget=100, policy=roomy, spare=20) is None
    # the newest turns the lock limit (90) holds: four of them
    assert plan_cut(history, budget=100, policy=roomy, spare=19) == plan_cut(history, budget=100, policy=roomy) == 4


def test_one_cut_down_to_the_low_water_mark_at_a_turn_start():
    history = items(*[(10, i % 2 == 0) for i in range(60)])  # user/assistant pairs of 10 tokens
    roomy = unchecked(low_water=0.6, high_water=0.9, locked_turns=2, summary_tokens=0, turns_per_cut=8)
    cut = plan_cut(history, budget=400, policy=roomy)  # low_water leaves room for 8 turns
    kept = history[cut:]
    assert kept[0].starts_turn
    assert sum(i.tokens for i in kept) <= 0.6 * 400
    assert sum(i.tokens for i in history[cut - 2:]) > 0.6 * 400  # cut as little as that allows


def test_a_window_of_a_few_turns_is_cut_to_leave_room_for_half_of_turns_per_cut():
    """A 2k model's window holds a handful of turns: cut only to low_water, the next cut would come two turns
    later, and each cut is sent again whole (shared/findings/real-models.md: a third of its prompt tokens)."""
    history = items(*[(10, i % 2 == 0) for i in range(20)])  # 10 turns of 20 in a 150-token window
    cut = plan_cut(history, budget=150, policy=POLICY)
    kept = sum(i.tokens for i in history[cut:])
    assert 150 - kept >= POLICY.turns_per_cut // 2 * 20 and history[cut].starts_turn and kept >= 20


def test_a_window_of_a_few_turns_keeps_low_water_while_that_leaves_cut_room_turns():
    """Where re-sending a window is billed (cut_room_turns 2), a small window still carries low_water after a cut
    (here more: the newest turns its lock limit holds, leaving room for two)."""
    history = items(*[(10, i % 2 == 0) for i in range(20)])  # 10 turns of 20 in a 150-token window
    fewer = plan_cut(history, budget=150, policy=POLICY)  # room for half of turns_per_cut: 6 turns
    two = plan_cut(history, budget=150, policy=POLICY.model_copy(update={"cut_room_turns": 2}))
    kept = sum(i.tokens for i in history[two:])
    assert kept > sum(i.tokens for i in history[fewer:])
    assert 150 - kept >= 2 * 20 and kept >= POLICY.low_water * 150 and history[two].starts_turn
    # low_water still gives way where even two turns would not fit after it
    big_turns = items(*[(30, i % 2 == 0) for i in range(20)])
    assert fill_target(big_turns, 150, POLICY.model_copy(update={"cut_room_turns": 2})) < POLICY.low_water


def test_the_cut_never_enters_the_locked_buffer_even_above_low_water():
    history = items((10, True), (10, False), (50, True), (50, False), (10, True), (10, False))
    roomy = unchecked(low_water=0.6, high_water=0.9, locked_turns=2, summary_tokens=0, turns_per_cut=1)
    cut = plan_cut(history, budget=300, policy=roomy, summary_tokens=200)
    assert cut == locked_start(history, 2, 150) == 2


def test_the_locked_buffer_yields_when_it_would_fill_more_than_high_water():
    history = items((10, True), (10, False), (50, True), (50, False), (10, True), (10, False))
    assert locked_start(history, 2) == 2
    assert locked_start(history, 2, limit=60) == 4  # the two turns need 120: only the newest is locked
    assert plan_cut(history, budget=120, policy=POLICY, summary_tokens=20) == 4


def test_a_cut_keeps_the_newest_ten_turns_the_lock_limit_holds_where_the_fill_would_keep_fewer():
    """A small window beside long memory: the fill (of window and memory) is below its locked turns, and a cut
    that kept those alone left the request the memory, the summary and a handful of turns. A cut keeps as many
    of the newest ten as the lock limit holds (a trim re-sends its locked turns, so locks `locked_turns` only)."""
    policy = unchecked(low_water=0.6, high_water=0.9, turns_per_cut=8, locked_turns=2, summary_tokens=0)
    history = items(*[(10, i % 2 == 0) for i in range(40)])  # 20 turns of 20 in a 200-token window
    assert lock_limit(history, 200, policy, 0) == 120  # room for half of turns_per_cut after it
    beside = plan_cut(history, 200, policy, shown=300)  # the fill alone: room for 8 turns, two of them
    assert fill_target(history, 200, policy, shown=300) == pytest.approx(0.2)
    assert sum(i.tokens for i in history[beside:]) == 120 and history[beside].starts_turn
    assert beside < locked_start(history, 2)
    # ten turns at the most, however much the lock limit would hold ...
    wide = unchecked(low_water=0.2, high_water=0.9, turns_per_cut=20, locked_turns=2, summary_tokens=0)
    long = items(*[(10, i % 2 == 0) for i in range(80)])
    assert sum(i.tokens for i in long[plan_cut(long, 500, wide):]) == 10 * 20
    # ... or the locked turns where more are locked
    assert plan_cut(long, 500, wide.model_copy(update={"locked_turns": 12})) == locked_start(long, 12)
    # a trim keeps its head and only the locked turns
    head, start = plan_trim(history, 200, policy)
    assert 0 < head < start == locked_start(history, 2, lock_limit(history, 200, policy, 0))


def test_only_a_newest_turn_larger_than_the_window_is_an_error():
    history = items((10, True), (100, True), (100, False))
    with pytest.raises(LockedBufferTooLarge, match="the newest turn alone needs 200 tokens but the window holds 150"):
        plan_cut(history, budget=150, policy=POLICY)


def test_summary_tokens_count_against_the_budget():
    history = items((10, True), (10, False), (10, True), (10, False), (10, True), (10, False))
    roomy = unchecked(low_water=0.6, high_water=0.9, locked_turns=2, summary_tokens=0, turns_per_cut=1)
    assert plan_cut(history, budget=85, policy=roomy) is None
    assert plan_cut(history, budget=85, policy=roomy, summary_tokens=30) == 2


def test_a_trim_keeps_a_head_of_whole_turns_and_only_the_locked_turns_after_it():
    history = items(*[(10, i % 2 == 0) for i in range(30)])  # 15 turns of 20 tokens
    head, start = plan_trim(history, budget=300, policy=POLICY)
    assert history[head].starts_turn and history[start].starts_turn
    assert start == locked_start(history, 2, int(300 * POLICY.high_water))  # nothing more is sent again
    assert sum(i.tokens for i in history[:head]) + sum(i.tokens for i in history[start:]) <= 0.6 * 300
    assert head == 14  # the longest head within the fill: 140 tokens, and the locked 40 make 0.6 * 300


def test_a_new_head_ends_where_the_cache_holds_the_prefix():
    history = items(*[(10, i % 2 == 0) for i in range(30)])
    # Items sent inside one request (after a cut) hold no cached prefix: the head ends after them ...
    assert plan_trim(history, budget=300, policy=POLICY, cached=11)[0] == 14  # the longest within the fill
    assert plan_trim(history, budget=300, policy=POLICY, cached=15)[0] == 16  # over the fill, still room
    # ... or at the breakpoint a cut put for it.
    assert plan_trim(history, budget=300, policy=POLICY, cached=15, marked=4)[0] == 4
    # A head that leaves no room (or nothing to drop before the locked turns) is no trim.
    assert plan_trim(history, budget=300, policy=POLICY, cached=26) is None
    assert plan_trim(history, budget=300, policy=POLICY, head=26) is None


def test_a_trim_is_taken_only_when_it_costs_less_per_turn_than_the_cut():
    history = items(*[(10, i % 2 == 0) for i in range(30)])
    cut = plan_cut(history, budget=290, policy=POLICY)
    assert trim_pays(history, 290, 0, 0, (12, 26), cut)  # sends 40 again and leaves 130 free
    assert not trim_pays(history, 290, 0, 0, (24, 26), cut)  # sends 40 again for 10 free: worse than the cut


def test_a_big_window_with_small_turns_is_left_fuller_after_a_cut():
    policy = unchecked(low_water=0.6, high_water=0.9, turns_per_cut=12, locked_turns=6, summary_tokens=0)
    history = items(*[(40, i % 2 == 0) for i in range(2_000)])  # turns of 80 tokens
    small, large = fill_target(history, 4_000, policy), fill_target(history, 100_000, policy)
    assert small == 0.76 and large == 0.9
    cut = plan_cut(history, 50_000, policy)
    assert 0.85 * 50_000 <= sum(i.tokens for i in history[cut:]) <= 0.9 * 50_000


def test_by_default_a_cut_keeps_under_four_fifths_so_requests_average_four_fifths():
    """What a cut keeps is sent again uncached; the turns until the next cut are what it freed."""
    policy = unchecked(summary_tokens=0)
    history = items(*[(40, i % 2 == 0) for i in range(2_000)])
    for budget in (4_000, 20_000, 60_000):
        kept = sum(i.tokens for i in history[plan_cut(history, budget, policy):])
        assert policy.low_water * budget - 80 <= kept <= policy.high_water * budget
    # Re-sent per token freed at a cut, at the most; most overflows are trims, which re-send only the locked turns.
    assert policy.high_water / (1 - policy.high_water) <= 3.2 and policy.trims >= 4
    assert (policy.low_water + 1) / 2 >= 0.8  # the window's average fill between overflows


def test_memory_shown_before_the_window_counts_as_kept_by_a_cut():
    """The waters are of the window and the memory before it: a request is about as full after a cut whether what
    it carries is memory or verbatim turns, so a channel without memory yet keeps more of its window."""
    policy = unchecked(low_water=0.6, high_water=0.9, turns_per_cut=20, cut_room_turns=2, locked_turns=2,
                       summary_tokens=0)
    history = items(*[(10, i % 2 == 0) for i in range(60)])  # 600 tokens, turns of 20
    alone = sum(i.tokens for i in history[plan_cut(history, 500, policy):])
    beside = sum(i.tokens for i in history[plan_cut(history, 400, policy, shown=100):])
    assert alone == 300 and beside == 200  # 0.6 of 500: of the window alone, then with the 100 of memory
    assert fill_target(history, 400, policy, shown=100) == pytest.approx(0.5)
    # the room a cut leaves for the next turns does not change: only the waters are of the larger whole
    big = unchecked(low_water=0.9, high_water=0.95, turns_per_cut=12, locked_turns=2, summary_tokens=0)
    assert fill_target(history, 400, big, shown=100) == fill_target(history, 400, big) == 1 - 6 * 20 / 400
    head, start = plan_trim(history, 500, policy, cached=2)
    shorter, same = plan_trim(history, 400, policy, cached=2, shown=100)
    assert same == start and sum(i.tokens for i in history[:head]) - sum(i.tokens for i in history[:shorter]) == 100


def test_the_head_the_next_trims_keep_ends_at_the_cuts_locked_turns_or_past_them_where_they_are_unusually_large():
    """Every trim until the next cut keeps that head: planned around a long output among the locked turns, it would
    leave each of them emptier; it reaches as far as a trim's fill leaves room for the usual locked turns."""
    policy = unchecked(low_water=0.6, high_water=0.9, turns_per_cut=20, cut_room_turns=2, locked_turns=3,
                       summary_tokens=0)
    turn = [(10, True), (10, False)]
    usual = items(*turn * 42)
    start = plan_cut(usual, 560, policy)
    assert head_end(usual, start, 560, policy) == locked_start(usual, 3, 560) == 78
    long_output = items(*turn * 39, (10, True), (10, False), (80, False), *turn)  # the middle locked turn: 100
    start = plan_cut(long_output, 560, policy)
    assert locked_start(long_output, 3, 560) == 76
    # The fill (336) less three usual turns (29 each) is 249: the head reaches over the turn before the output (200),
    # and over the output's turn too (300), stopping before it would leave the head 49 short, more than a usual turn
    end = head_end(long_output, start, 560, policy)
    assert end == 81 and long_output[end].starts_turn
    # less a new summary of 30, 219: 19 short is less than a turn, so the head stops before the output
    assert head_end(long_output, start, 560, policy, summary_tokens=30) == 78
    # less a new summary of 60, 189: not the turn before it either (200)
    assert head_end(long_output, start, 560, policy, summary_tokens=60) == 76


def test_a_head_is_not_planned_around_room_for_two_more_of_a_long_output():
    """A cut leaves room for two of its locked turns' biggest; the head outlives that output, so its fill is the
    usual one: a 150-token output among the cut's locked turns would have lowered it from 0.6 to 0.39."""
    policy = unchecked(low_water=0.6, high_water=0.9, turns_per_cut=20, cut_room_turns=2, locked_turns=3,
                       summary_tokens=0)
    turn = [(10, True), (10, False)]
    history = items(*turn * 39, (10, True), (10, False), (150, False), *turn)
    start = plan_cut(history, 560, policy)
    kept = history[start:]
    assert round(fill_target(kept, 560, policy), 2) == 0.39 and fill_target(kept, 560, policy, biggest=False) == 0.6
    end = head_end(history, start, 560, policy)
    assert end is not None and sum(i.tokens for i in history[start:end]) > 0.39 * 560


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 60), st.booleans()), min_size=1, max_size=80), st.integers(50, 600))
def test_cut_invariants(spec, budget):
    history = items(*spec)
    lock = locked_start(history, 2, lock_limit(history, budget, POLICY, 0))
    try:
        cut = plan_cut(history, budget, POLICY)
    except LockedBufferTooLarge:
        assert sum(i.tokens for i in history[lock:]) > budget
        return
    if cut is None:
        assert sum(i.tokens for i in history) <= budget or lock == 0
        return
    assert 0 < cut <= lock
    assert history[cut].starts_turn
    assert sum(i.tokens for i in history[cut:]) <= budget


@settings(max_examples=120, deadline=None)
@given(st.sampled_from([2_048, 4_096, 8_192, 16_384, 32_000, 100_000, 200_000]), st.integers(20, 400),
       st.integers(0, 2**32 - 1))
def test_a_cut_is_never_followed_by_another_on_the_next_turn(context, turn, seed):
    """Replaying a conversation of similar turns at any budget: cuts are spaced, never turn after turn."""
    rng = random.Random(seed)
    budget = int(context * 0.6)  # about what a root window gets once memory, tail and recall are planned
    turn = min(turn, budget // 5)  # a bigger turn is reduced when shown (window.MESSAGE_SHARE)
    policy = ContextSettings(summary_tokens=1_200)
    room = summary_room(budget, ContextSettings(), policy.summary_tokens)
    window: list[Item] = []
    summary, cuts, seq = 0, [], 0
    for n in range(300):
        size = rng.randint(max(1, turn // 2), turn)
        seq += 2
        window += [Item(seq - 1, size // 3, True), Item(seq, size - size // 3, False)]
        cut = plan_cut(window, budget, policy, summary, room)
        if cut is not None:
            window, summary = window[cut:], room
            cuts.append(n)
        assert summary + sum(i.tokens for i in window) <= budget
    assert all(b - a > 1 for a, b in itertools.pairwise(cuts))


def test_observation_reduction_keeps_head_and_tail_with_the_omitted_count():
    log = "\n".join(f"line {i}" for i in range(1, 8101))
    reduced = reduce_observation(log, max_lines=120, keep_lines=50)
    lines = reduced.splitlines()
    assert lines[0] == "[Data Truncated]"
    assert "line 1" in lines and "line 50" in lines and "line 51" not in lines
    assert "... (8000 lines omitted) ..." in lines
    assert "line 8051" in lines and "line 8100" in lines and "line 8050" not in lines
    assert reduce_observation("short\noutput", 120, 50) == "short\noutput"


def test_one_enormous_line_is_reduced_too():
    blob = "x" * 200_000
    reduced = reduce_observation(blob, max_lines=120, keep_lines=2)
    assert reduced.startswith("[Data Truncated]") and "characters omitted" in reduced and len(reduced) < 10_000
