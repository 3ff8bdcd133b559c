import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory.observation import reduce_observation
from memory.window import Item, LockedBufferTooLarge, WindowPolicy, locked_start, plan_cut, protected_size, window_size

POLICY = WindowPolicy(low_water=0.6, locked_turns=2, summary_tokens=0)


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


def test_one_cut_down_to_the_low_water_mark_at_a_turn_start():
    history = items(*[(10, i % 2 == 0) for i in range(20)])  # user/assistant pairs of 10 tokens
    cut = plan_cut(history, budget=150, policy=POLICY)
    kept = history[cut:]
    assert kept[0].starts_turn
    assert sum(i.tokens for i in kept) <= 0.6 * 150
    assert sum(i.tokens for i in history[cut - 2:]) > 0.6 * 150  # cut as little as that allows


def test_the_cut_never_enters_the_locked_buffer_even_above_low_water():
    history = items((10, True), (10, False), (50, True), (50, False), (10, True), (10, False))
    cut = plan_cut(history, budget=120, policy=POLICY)
    assert cut == locked_start(history, 2) == 2


def test_a_locked_buffer_larger_than_the_window_is_a_clear_error():
    history = items((10, True), (100, True), (100, False))
    with pytest.raises(LockedBufferTooLarge, match="the last 2 turns alone need 210 tokens but the window holds 150"):
        plan_cut(history, budget=150, policy=POLICY)


def test_summary_tokens_count_against_the_budget():
    history = items((10, True), (10, False), (10, True), (10, False), (10, True), (10, False))
    assert plan_cut(history, budget=65, policy=POLICY) is None
    assert plan_cut(history, budget=65, policy=POLICY, summary_tokens=10) == 2


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 60), st.booleans()), min_size=1, max_size=80), st.integers(50, 600))
def test_cut_invariants(spec, budget):
    history = items(*spec)
    try:
        cut = plan_cut(history, budget, POLICY)
    except LockedBufferTooLarge:
        assert sum(i.tokens for i in history[locked_start(history, 2):]) > budget
        return
    if cut is None:
        assert sum(i.tokens for i in history) <= budget or locked_start(history, 2) == 0
        return
    assert 0 < cut <= locked_start(history, 2)
    assert history[cut].starts_turn
    assert sum(i.tokens for i in history[cut:]) <= budget


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
