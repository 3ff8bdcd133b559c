"""A reply's tail stays in place on a server that caches what the model wrote (issue 27, point 10).

llama.cpp keeps the tokens it generated in its slot; when the next prompt repeats the previous prompt
and the reply word for word, only the new message is evaluated. The tail (time, recall) sits between
the message and the reply, so it must stay where it was for that to hold.
"""

from __future__ import annotations

from bot.providers.openai_llm import to_chat_messages
from memory.context import Assembly
from memory.records import NewMessage
from tests.context_helpers import answer, assembler, say
from tests.test_context import root

REPLY = "Of course. " + "The lighthouse tour leaves from the north pier and the Osprey seats sixteen. " * 4


def chatml(assembly: Assembly) -> str:
    """The prompt as a ChatML model reads it, up to where its answer begins."""
    return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n"
                   for m in to_chat_messages(assembly.request)) + "<|im_start|>assistant\n"


async def _conversation(store, keep_tails: bool, turns: int = 40) -> list[tuple[Assembly, bool]]:
    """Each reply request, and whether it read its predecessor and that one's reply as its own prefix."""
    r = await root(store)
    asm = assembler(store, context_tokens=2048)
    asm.keep_tails = keep_tails
    seen: list[tuple[Assembly, bool]] = []
    before = ""
    for i in range(turns):
        await say(store, r.id, f"message {i}: the tide table says high water at {i % 12 + 1} o'clock")
        current = await asm.assemble(r.id)
        seen.append((current, bool(before) and chatml(current).startswith(before)))
        await answer(store, r.id, REPLY)
        before = chatml(current) + REPLY
    return seen


async def test_the_next_request_repeats_the_last_prompt_and_its_reply_so_only_the_new_message_is_evaluated(store):
    replies = await _conversation(store, keep_tails=True)
    cuts = [i for i, (a, _) in enumerate(replies) if a.cut]
    assert cuts, "the conversation is long enough for the 2k window to be cut"
    steady = [reused for i, (a, reused) in enumerate(replies) if i and not a.cut]
    assert all(steady)
    for a, _ in replies:  # the kept tails are counted: every request stays inside its budget
        assert sum(v for k, v in a.parts.items() if k not in ("output", "free")) <= asm_input(a)
        assert a.parts["history"] >= a.parts["tail"]


def asm_input(assembly: Assembly) -> int:
    return 2048 * 95 // 100 - 200  # the helpers' Budget(context, 200 output), less the 5 % margin


async def test_without_a_server_that_caches_answers_the_tail_moves_on_and_takes_no_room(store):
    replies = await _conversation(store, keep_tails=False, turns=12)
    assert not any(reused for _, reused in replies)  # the cloud case: the tail is paid again every turn
    last = replies[-1][0]
    assert sum("[Now: " in b.text for t in last.request.turns for b in t.blocks) == 1


async def test_a_thing_recalled_once_is_not_recalled_again_while_its_tail_is_in_the_window(store):
    r = await root(store)
    asm = assembler(store, context_tokens=2048)
    asm.keep_tails = True
    await say(store, r.id, "my sister Odalys lives in Valparaiso and breeds alpacas", name="ana")
    for i in range(60):  # far out of a 2k window
        await say(store, r.id, f"small talk {i} " + "and so on " * 10, name="ben")
        await answer(store, r.id, "I see.")
    await say(store, r.id, "where does Odalys live?")
    first = await asm.assemble(r.id)
    recalled = [b.text for b in first.request.turns[-1].blocks if b.text.startswith("[Recall:")]
    assert recalled and "Valparaiso" in recalled[0]
    await answer(store, r.id, "In Valparaiso.")
    await say(store, r.id, "and does Odalys live alone?")
    second = await asm.assemble(r.id)
    text = "\n".join(b.text for t in second.request.turns for b in t.blocks)
    assert text.count("Valparaiso and breeds alpacas") == 1  # shown once: in the first reply's kept tail
    assert chatml(second).startswith(chatml(first) + "In Valparaiso.")


async def test_an_erased_message_leaves_the_kept_tails_that_recalled_it(store):
    r = await root(store)
    await store.append(r.id, NewMessage(
        "user", "the spare key of the boathouse is under the blue stone", author_name="ana", external_id=77))
    await _recalled_then_erased(store, r.id, 77, small_talk=60)


async def _recalled_then_erased(store, thread_id: int, external_id: int, small_talk: int) -> None:
    """A kept tail recalls the boathouse key; once that message is erased, the next request holds none of it."""
    asm = assembler(store, context_tokens=2048)
    asm.keep_tails = True
    for i in range(small_talk):
        await say(store, thread_id, f"small talk {i} " + "and so on " * 10, name="ben")
        await answer(store, thread_id, "I see.")
    await say(store, thread_id, "where is the spare key of the boathouse?")
    first = await asm.assemble(thread_id)
    assert "blue stone" in "\n".join(b.text for b in first.request.turns[-1].blocks)
    await answer(store, thread_id, "Under a stone.")
    assert await store.delete_message(external_id)
    await say(store, thread_id, "thanks")
    after = await asm.assemble(thread_id)
    assert "blue stone" not in "\n".join(b.text for t in after.request.turns for b in t.blocks)


async def test_a_reply_asked_again_for_the_same_message_carries_one_tail(store):
    r = await root(store)
    asm = assembler(store, context_tokens=2048)
    asm.keep_tails = True
    for i in range(3):
        await say(store, r.id, f"message {i}")
        await asm.assemble(r.id)
        await answer(store, r.id, REPLY)
    await say(store, r.id, "and one more")
    first = await asm.assemble(r.id)
    again = await asm.assemble(r.id)  # the model failed, or refused it for length: planned and sent once more
    last_turn = [b.text for b in again.request.turns[-1].blocks]
    assert sum(text.startswith("[Now: ") for text in last_turn) == 1
    assert again.parts["history"] == first.parts["history"]  # the window counts the message once, without a tail
    await answer(store, r.id, REPLY)
    await say(store, r.id, "thanks")
    after = await asm.assemble(r.id)
    assert chatml(after).startswith(chatml(again) + REPLY)


async def test_a_message_erased_in_another_channel_leaves_the_kept_tails_that_recalled_it(store):
    """Recall reaches the server's public channels: a kept tail quoting one of their messages goes when it is
    erased there, though nothing of this channel changed."""
    from memory.records import Scope

    r = await root(store)
    there = await store.root_thread("Stelis", Scope.channel(1, 3), 0.8)
    await store.ensure_memory_channel(there)
    await store.set_channel_flags(there.id, public=1, name="boats")
    await store.append(there.id, NewMessage(
        "user", "the spare key of the boathouse is under the blue stone", author_name="ana", external_id=78))
    await _recalled_then_erased(store, r.id, 78, small_talk=6)
