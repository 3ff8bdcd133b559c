"""`python -m bench NAME --backend both` pairs the two backends' lines of the same size."""

from bench.__main__ import ratios


def test_ratios_pair_lines_of_the_same_size_that_both_measured():
    sqlite = [{"messages": 1000, "p50_ms": 2.0, "p50_ms_without_recall": 1.0, "recall_p50_ms": 1.0,
               "p50_ms_question": 3.0},
              {"messages": 10000, "server_channels": 1000, "lone_p50_ms": 3.0}]
    postgresql = [{"messages": 1000, "p50_ms": 5.0, "p50_ms_without_recall": 1.5, "recall_p50_ms": 3.5,
                   "p50_ms_question": 4.5},
                  {"messages": 10000, "server_channels": 1000, "lone_p50_ms": 9.0}]
    assert ratios("context_latency", sqlite, postgresql) == [
        {"bench": "context_latency", "messages": 1000, "postgresql_over_sqlite_p50_ms": 2.5,
         "postgresql_over_sqlite_p50_ms_without_recall": 1.5, "postgresql_over_sqlite_recall_p50_ms": 3.5,
         "postgresql_over_sqlite_p50_ms_question": 1.5}]


def test_cache_efficiency_prints_each_line_as_it_is_measured_and_quick_runs_less(monkeypatch, capsys):
    """A long benchmark shows its first figures at once, not after every strategy at every budget has run."""
    import json

    from bench import cache_efficiency
    from bench.__main__ import main

    asked = []

    async def simulate(strategy, budget, turns, seed, tools):
        printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        asked.append((strategy, budget, turns, len(printed)))
        return {"strategy": strategy, "budget": budget, "cost_per_turn": 100.0 if strategy == "stelis" else 150.0}

    monkeypatch.setattr(cache_efficiency, "simulate", simulate)
    assert main(["cache_efficiency", "--quick"]) == 0
    strategies = len(cache_efficiency.STRATEGIES)
    assert [a[:3] for a in asked[:2]] == [("stelis", 8_000, 400), ("stelis_server", 8_000, 400)]
    assert {a[1] for a in asked} == {8_000, 16_000} and len(asked) == 2 * strategies
    assert all(a[3] == 1 for a in asked[1:])  # the line before each run was already out
    last = json.loads(capsys.readouterr().out)
    assert last["strategy"] == "naive" and last["cost_vs_stelis"] == 1.5

    asked.clear()
    main(["cache_efficiency"])
    assert {a[2] for a in asked} == {cache_efficiency.TURNS} and len(asked) == 3 * strategies


def test_cache_efficiency_runs_the_turns_seed_and_strategies_asked_for(monkeypatch, capsys):
    """The held-out comparison's length (600 turns) and another conversation are one command away; the full
    engine runs first whatever order it is named in, as the others' costs are given relative to it."""
    import json

    import pytest

    from bench import cache_efficiency
    from bench.__main__ import main

    asked = []

    async def simulate(strategy, budget, turns, seed, tools):
        asked.append((strategy, budget, turns, seed, tools))
        return {"strategy": strategy, "budget": budget, "cost_per_turn": 100.0 if strategy == "stelis" else 90.0}

    monkeypatch.setattr(cache_efficiency, "simulate", simulate)
    assert main(["cache_efficiency", "--turns", "600", "--seed", "601", "--strategies", "letta,stelis"]) == 0
    assert asked == [(s, b, 600, 601, True) for b in cache_efficiency.BUDGETS for s in ("stelis", "letta")]
    letta = [json.loads(line) for line in capsys.readouterr().out.splitlines()][1]
    assert letta["strategy"] == "letta" and letta["cost_vs_stelis"] == 0.9

    asked.clear()
    main(["cache_efficiency", "--strategies", "naive", "--chat-only"])  # no full engine to compare with: no ratio
    assert [(a[0], a[3], a[4]) for a in asked] == [("naive", cache_efficiency.SEED, False)] * 3
    assert all("cost_vs_stelis" not in json.loads(line) for line in capsys.readouterr().out.splitlines())

    for wrong, said in ((["--strategies", "letta,memgpt"], "unknown strategy memgpt"),
                        (["--turns", "0"], "must be at least 1"), (["--strategies", ","], "(none given)")):
        with pytest.raises(SystemExit):
            main(["cache_efficiency", *wrong])
        assert said in capsys.readouterr().err
    assert len(asked) == 3  # nothing ran on bad input


def test_memory_quality_measures_other_conversations_from_another_seed(monkeypatch, capsys):
    import json

    import pytest

    from bench import memory_quality
    from bench.__main__ import main
    from bench.conversations import generate

    measured = []

    async def measure(conv, budget):
        measured.append((conv.turns[0].text, budget))
        return memory_quality.Scores(), memory_quality.Scores(), {}

    monkeypatch.setattr(memory_quality, "measure", measure)
    for argv, seeds in (([], range(3)), (["--seed", "10"], range(10, 13))):
        measured.clear()
        assert main(["memory_quality", "--quick", *argv]) == 0
        firsts = [generate(seed).turns[0].text for seed in seeds]
        assert measured == [(first, budget) for budget in memory_quality.BUDGETS for first in firsts]
        lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert {line["data"] for line in lines} == {f"generated, seeds {seeds[0]}-{seeds[-1]}"}
    assert len({generate(seed).turns[0].text for seed in range(13)}) == 13  # each seed is another conversation
    with pytest.raises(SystemExit):
        main(["memory_quality", "--data", "locomo.json", "--seed", "10"])
    assert "with --data they are the file's" in capsys.readouterr().err
    assert len(measured) == 3 * len(memory_quality.BUDGETS)  # nothing more was measured on bad input


def test_cache_efficiency_script_is_another_conversation_for_another_seed():
    from bench.cache_efficiency import RARE_SHARE, script

    first, again, other = (script(30, RARE_SHARE, seed) for seed in (600, 600, 601))
    assert [s.reply for s in first] == [s.reply for s in again]
    assert [s.reply for s in first] != [s.reply for s in other]
    said = [m.role for step in first for m in step.said]
    assert "tool" in said and said.count("user") == 30
    chat = [m.role for step in script(30, RARE_SHARE, tools=False) for m in step.said]
    assert chat == ["user"] * 30


async def test_memory_quality_previews_a_question_without_storing_or_erasing_anything(make_config):
    """The benchmark asks each question through a preview: had it fallen back to storing and erasing it (as it
    silently did once the engine's forwarding methods went), every question would cost rewrites and summaries."""
    from bench.memory_quality import SCOPE, preview
    from bot.engine import Engine
    from bot.providers.offline import OfflineLLM

    engine = await Engine.open(make_config(snapshots={"interval_seconds": 0}), OfflineLLM())
    await engine.conversations.hear(SCOPE, "Kai moved to Montevideo in May", author_name="kai")
    root = await engine.stelis.root(SCOPE)
    before = await engine.store.count_messages(root.id)
    request = await preview(engine, "where did Kai move?")
    assert "where did Kai move?" in str(request)
    assert await engine.store.count_messages(root.id) == before and (await engine.store.thread(root.id)).revision == 0
    await engine.close()


async def test_bench_startup_fills_servers_with_pending_memory_work_and_times_a_reply_after(monkeypatch, tmp_path):
    """bench startup's database is what it says: every conversation with its history and memory work pending."""
    import random

    from bench import startup
    from memory.backends import open_store

    store = await open_store(tmp_path / "s.sqlite3")
    await startup.fill(store, 2, random.Random(1))
    channels = await store.upcoming_deadlines(store.clock() + 10 * 86_400)
    assert len(channels) == 1 + 2 * startup.CHANNELS  # every conversation has a deadline
    assert await store.count_rows("messages") == len(channels) * startup.MESSAGES and store.unindexed == 0
    await store.close()
    monkeypatch.setattr(startup, "SAMPLES", 1)
    lines = await startup.run((0, 2))
    assert [line["servers"] for line in lines] == [0, 2] and lines[0]["ready_ratio"] == 1.0
    assert all(line["first_reply_ms"] > 0 and line["recall_warm_ms"] >= line["ready_ms"] for line in lines)


def test_cache_efficiency_can_script_a_question_every_few_turns():
    from bench.cache_efficiency import script
    from memory.recall import asks

    plain, asking = script(9, 0.2), script(9, 0.2, ask_every=3)
    assert not any(asks(step.said[-1].content) for step in plain)
    assert [n for n, step in enumerate(asking) if asks(step.said[-1].content)] == [0, 3, 6]
    assert [step.reply for step in plain] == [step.reply for step in asking]  # the same conversation otherwise


def test_lines_of_one_size_measured_two_ways_are_each_paired_with_their_own():
    sqlite = [{"channels": 100, "memory_work": "none", "wall_s": 1.0},
              {"channels": 100, "memory_work": "versions", "wall_s": 2.0}]
    postgresql = [{"channels": 100, "memory_work": "none", "wall_s": 1.5},
                  {"channels": 100, "memory_work": "versions", "wall_s": 3.0}]
    assert ratios("concurrency", sqlite, postgresql) == [
        {"bench": "concurrency", "channels": 100, "memory_work": "none", "postgresql_over_sqlite_wall_s": 1.5},
        {"bench": "concurrency", "channels": 100, "memory_work": "versions", "postgresql_over_sqlite_wall_s": 1.5}]


async def test_cache_efficiency_reports_what_recall_adds_to_each_turn_paid_in_full():
    """Recall's hits are new text by design: the line says how many tokens of each turn they were, for Stelis (whose
    replies carry them after the last breakpoint) and none for a design without recall."""
    from bench.cache_efficiency import simulate

    stelis = await simulate("stelis", 8000, 40)
    letta = await simulate("letta", 8000, 40)
    assert 0 < stelis["recall_tokens_per_turn"] < stelis["avg_prompt"]
    assert letta["recall_tokens_per_turn"] == 0
    # the script's tool outputs run to 200 lines: Stelis shows a long one as head and tail, Letta-style whole
    assert 0 < stelis["reduced_tokens_per_request"] < stelis["avg_prompt"]
    assert letta["reduced_tokens_per_request"] == 0


async def test_the_letta_style_stand_in_never_sends_more_than_its_budget_as_its_requests_are_counted():
    """Letta counts what it keeps with the provider's counter, each message's framing included; counting the
    texts alone, the stand-in once sent requests over the budget both designs are given."""
    import random

    from bench.letta_style import LettaStyle
    from bot.fitting import request_tokens
    from bot.providers.offline import OfflineLLM
    from memory.records import NewMessage

    rng = random.Random(7)
    manager = LettaStyle(OfflineLLM(), "You are Stelis.", input_budget=2_000, context_window=2_400, max_tokens=400)
    sizes = []
    for turn in range(300):
        manager.add(NewMessage("user", " ".join(rng.choice(("ok", "lunch", "kyoto", "at", "noon")) for _ in
                                                range(rng.randint(1, 12)))))
        request = await manager.request()
        sizes.append(request_tokens(request))
        manager.add(NewMessage("assistant", f"noted {turn}"))
    assert manager.summaries >= 3  # the budget was reached again and again
    assert max(sizes) <= 2_000 and max(sizes) > 1_500  # filled up to the budget, never over it
