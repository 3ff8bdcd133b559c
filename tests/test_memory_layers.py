"""How a memory text too long for its room is shortened (memory/layers.py)."""

from memory.layers import shorten
from memory.tokens import cached_tokens


def test_a_shortened_memory_keeps_its_informative_lines_wherever_they_are_and_says_what_it_left_out():
    lines = ["## Long-term memory (v9, 1 May to 9 June 2024)"]
    lines += [f"ben: ok sure, sounds good [v{i}]" for i in range(1, 20)]
    lines += ["Kai: Kai moved to Montevideo on 3 May 2024 for a job at Quanta Labs [v20]",
              "Mira: Mira's sister Odile turns 41 on 12 June [v21]"]
    lines += [f"ana: yes I agree, nice [v{i}]" for i in range(22, 40)]
    text = "\n".join(lines)
    short = shorten(text, 120)
    assert cached_tokens(short) <= 120
    assert short.splitlines()[0] == lines[0]  # the header says what the memory is
    assert "Montevideo" in short and "Odile turns 41" in short  # from the middle, not only the ends
    kept = [line for line in short.splitlines()[1:] if line in lines]
    assert kept == [line for line in lines if line in kept]  # in their order
    left_out = len(lines) - 1 - len(kept)
    assert f"(… {left_out} line(s) left out here; recall and /memory show have them)" in short
    assert shorten(text, 10_000) == text  # room for everything: unchanged


async def test_each_shared_channel_shows_its_newest_versions_oldest_first_and_a_tight_room_drops_the_oldest(store):
    """Seed 004: the other shared channels' last versions, grouped by channel, oldest first."""
    from memory.layers import memory_layers
    from memory.records import Scope

    here = await store.root_thread("P", Scope.channel(1, 10), 0.8)
    for channel, name in ((20, "garden"), (30, "kitchen")):
        root = await store.root_thread("P", Scope.channel(1, channel), 0.8)
        await store.ensure_memory_channel(root)
        await store.set_channel_flags(root.id, public=1, name=name)
        for v in range(1, 4):
            await store.add_record("P", "channel", channel, "short_term", f"{name} fact number {v}", v, v)
    layers = await memory_layers(store, here, here, versions=5, shared=3)
    for name in ("garden", "kitchen"):
        shown = [line for line in layers.text.splitlines() if line.startswith(f"{name} fact")]
        assert shown == [f"{name} fact number {v}" for v in (1, 2, 3)]  # every version, oldest first
    assert layers.text.index("#garden") < layers.text.index("garden fact number 1")  # grouped under the channel
    tight = await memory_layers(store, here, here, versions=5, shared=3, budget=layers.tokens - 30)
    assert "fact number 3" in tight.text and tight.text.count("fact number 1") < 2  # an oldest went first
    assert "kitchen fact number 3" in tight.text and "garden fact number 3" in tight.text  # each newest stays


async def test_the_layers_are_read_in_the_same_few_statements_however_many_channels_share(store, monkeypatch):
    """Issue 32: the pins, this conversation's, its Discord thread's and the server's versions, then every shared
    channel's, each read at once: a prompt's memory costs the same few round trips in a busy server."""
    from dataclasses import replace

    from memory.layers import memory_layers
    from memory.records import Scope

    here = await store.root_thread("P", Scope.channel(1, 10), 0.8)
    thread = replace(here, id=here.id + 1000, discord_thread_id=11)  # a public Discord thread of it
    await store.add_record("P", "thread", 11, "short_term", "the thread's own")
    await store.add_record("P", "workspace", 1, "long_term", "the server's memory")
    await store.add_record("P", "channel", 10, "long_term", "this channel's memory")
    await store.pin("P", "channel", 10, "a pinned fact")
    reads: list[str] = []
    real = type(store)._rows

    async def counted(self, sql, params=()):
        reads.append(sql)
        return await real(self, sql, params)

    monkeypatch.setattr(type(store), "_rows", counted)
    statements = []
    for channels in (1, 4):
        for channel in range(20, 20 + channels):
            root = await store.root_thread("P", Scope.channel(1, channel), 0.8)
            await store.ensure_memory_channel(root)
            await store.set_channel_flags(root.id, public=1, name=f"c{channel}")
            await store.add_record("P", "channel", channel, "short_term", f"c{channel} said so")
        reads.clear()
        layers = await memory_layers(store, thread, here, versions=3, shared=5)
        statements.append(len(reads))
        assert all(f"c{c} said so" in layers.text for c in range(20, 20 + channels))
        for text in ("the thread's own", "the server's memory", "this channel's memory", "a pinned fact"):
            assert text in layers.text
    assert statements[0] == statements[1] <= 4
