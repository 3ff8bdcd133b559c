import pytest

from bot.engine import Engine
from bot.providers.offline import OfflineLLM
from memory.anchors import is_anchor, render_anchor
from memory.records import Scope

CHANNEL = Scope.channel(1, 100)


@pytest.fixture
async def engine(make_config):
    e = await Engine.open(make_config(snapshots={"interval_seconds": 0}), OfflineLLM())
    yield e
    await e.close()


async def test_discord_thread_lifecycle_as_a_branch(engine):
    root = await engine.stelis.root(CHANNEL)
    first = await engine.branches.session(CHANNEL, 555, "Novel chapter 1")
    assert first.discord_thread_id == 555 and first.parent_thread_id == root.id and first.branch_id == "discord-555"
    anchor = await engine.store.message_by_seq(first.anchor_seq)
    assert anchor.thread_id == root.id and is_anchor(anchor)
    assert (await engine.branches.session(CHANNEL, 555, "ignored")).id == first.id  # same session while active
    await engine.conversations.hear(CHANNEL, "write the opening of calculator_v2 saga", author_name="mahe",
                                    thread_id=first.id)
    await engine.conversations.reply(first.id)

    archived = await engine.branches.archive(555)
    assert archived.status == "completed" and archived.chronicle_summary
    branch = await engine.store.branch("discord-555")
    assert branch.status == "suspended"
    from_parent = render_anchor(await engine.store.message_by_seq(first.anchor_seq), {root.id})
    assert "## Chronicle" in from_parent and "calculator_v2" in from_parent

    resumed = await engine.branches.session(CHANNEL, 555, "Novel chapter 1")
    assert resumed.id != first.id and resumed.branch_id == "discord-555"
    opening = (await engine.store.tail(resumed.id, 5))[0]
    assert is_anchor(opening) and opening.metadata["stelis_thread_id"] == first.id
    context = (await engine.conversations.context(resumed.id)).request
    text = "\n".join(b.text for t in context.turns for b in t.blocks)
    assert f"- ID: stelis:{first.id}" in text and "## Chronicle" in text and "## Last exchanges" in text
    assert (await engine.store.branch("discord-555")).status == "active"

    deleted = await engine.branches.delete(555)
    assert deleted.status == "aborted" and (await engine.store.branch("discord-555")).status == "completed"
    assert await engine.branches.delete(999) is None


async def test_edits_and_deletes_change_the_next_context(engine):
    root = await engine.stelis.root(CHANNEL)
    await engine.conversations.hear(CHANNEL, "my cat is Tama", author_name="mahe", external_id=11)
    await engine.conversations.hear(CHANNEL, "secret: 1234", author_name="mahe", external_id=12)
    await engine.conversations.hear(CHANNEL, "what do you know?", author_name="mahe", external_id=13)
    await engine.forgetting.edit_message(11, "my cat is Mochi")
    assert await engine.forgetting.delete_message(12)
    text = "\n".join(b.text for t in (await engine.conversations.context(root.id)).request.turns for b in t.blocks)
    assert "Mochi" in text and "Tama" not in text and "1234" not in text
    assert await engine.conversations.last_seen(root.id) == 13


async def test_the_working_memory_lists_open_branches_in_the_tail(make_config, monkeypatch):
    from bot.providers.offline import OfflineLLM
    from memory.records import Scope

    engine = await Engine.open(make_config(snapshots={"interval_seconds": 0}), OfflineLLM())
    general, other_server = Scope.channel(1, 10), Scope.channel(2, 20)
    await engine.conversations.hear(general, "hello", author_name="mahe")
    await engine.branches.session(general, 7001, "Novel: chapter 3")
    await engine.branches.session(other_server, 7002, "Elsewhere")
    await engine.store.update_branch("discord-7001", brief_state="writing the arrival at the tower")
    root = (await engine.stelis.root(general)).id

    def tail(assembly):
        return assembly.request.turns[-1].blocks[-1].text

    shown = tail(await engine.conversations.context(root))
    assert "[Current situation: what you have going on here, latest first]" in shown
    assert "- Novel: chapter 3 (task, active, last active" in shown and "writing the arrival at the tower" in shown
    assert "Elsewhere" not in shown  # another server's branches stay there
    reads = []
    real = engine.store.recent_branches

    async def counted(*args):
        reads.append(args)
        return await real(*args)

    monkeypatch.setattr(engine.store, "recent_branches", counted)
    await engine.conversations.context(root)
    assert reads == []  # nothing changed: no read
    await engine.branches.archive(7001)
    assert "(task, suspended," in tail(await engine.conversations.context(root)) and len(reads) == 1
    await engine.close()

    # a bot busy in more conversations than it keeps windows for still keeps the working memory of the others
    from memory.context import WINDOWS_KEPT

    busy = await Engine.open(make_config(snapshots={"interval_seconds": 0}), OfflineLLM())
    roots = []
    for n in range(WINDOWS_KEPT + 1):
        scope = Scope.channel(3, 300 + n)
        await busy.conversations.hear(scope, "hello", author_name="mahe")
        roots.append((await busy.stelis.root(scope)).id)
        await busy.conversations.context(roots[-1])
    reads.clear()
    real = busy.store.recent_branches  # what `counted` calls from now on
    monkeypatch.setattr(busy.store, "recent_branches", counted)
    for root_id in roots[-WINDOWS_KEPT:]:
        await busy.conversations.context(root_id)
    assert reads == []  # the newest 64 are still known: the 65th did not drop them all
    public = [Scope.channel(4, 400 + n) for n in range(3)]  # a server's public channels all see the same branches
    for scope in public:
        await busy.admin.describe(scope, name=f"c{scope.channel_id}", public=True)
        await busy.conversations.hear(scope, "hello", author_name="mahe")
    await busy.branches.session(public[0], 7003, "Shared plan")
    shown = [tail(await busy.conversations.context((await busy.stelis.root(scope)).id)) for scope in public]
    assert all("Shared plan" in text for text in shown) and len(reads) == 1  # one read for the three
    private = Scope.channel(4, 499)  # a private channel of that server sees them; they never see its branch
    await busy.admin.describe(private, name="staff", public=False)
    await busy.conversations.hear(private, "hello", author_name="mahe")
    await busy.branches.session(private, 7004, "Staff only plan")
    inside = tail(await busy.conversations.context((await busy.stelis.root(private)).id))
    outside = tail(await busy.conversations.context((await busy.stelis.root(public[1])).id))
    assert "Staff only plan" in inside and "Shared plan" in inside and "Staff only plan" not in outside
    await busy.close()

    quiet = await Engine.open(make_config(snapshots={"interval_seconds": 0}, context={"working_memory": 0}),
                              OfflineLLM())
    assert "Current situation" not in tail(await quiet.conversations.context((await quiet.stelis.root(general)).id))
    await quiet.close()


async def test_branch_tools_list_and_update_branches_of_this_server_only(make_config):
    from bot.providers.offline import OfflineLLM
    from bot.services.tool_calls import scope_of
    from memory.llm import ToolCall
    from memory.records import Scope

    engine = await Engine.open(make_config(snapshots={"interval_seconds": 0}), OfflineLLM())
    general, other_server = Scope.channel(1, 10), Scope.channel(2, 20)
    await engine.branches.session(general, 7101, "Novel")
    await engine.branches.session(other_server, 7102, "Elsewhere")
    root = await engine.stelis.root(general)
    box = engine.conversations.toolbox
    allowed = ["branch_list", "branch_update"]

    async def call(name, **args):
        return await box.answer(ToolCall("t", name, args), scope_of(root), root.id, allowed)

    listed = await call("branch_list")
    assert listed.startswith("discord-7101 [task, active] Novel") and "Elsewhere" not in listed
    assert await call("branch_update", branch="discord-7101", brief_state="chapter 3 drafted",
                      status="suspended") == "discord-7101 is suspended: chapter 3 drafted"
    assert await call("branch_update", branch="discord-7102", brief_state="x") == \
        "error: there is no branch 'discord-7102' here"  # another server's: out of reach
    assert (await engine.store.branch("discord-7102")).brief_state is None
    assert await call("branch_update", branch="discord-7101", status="lost") == \
        'error: branch_update: \'status\' is one of "active", "suspended", "completed", not "lost"'
    assert await call("branch_update", branch="discord-7101") == "error: give a brief_state, a status, or both"
    await engine.close()


async def test_task_tools_create_work_and_close_a_task_with_its_branch_and_session(make_config):
    import json

    from bot.providers.offline import OfflineLLM
    from bot.services.tool_calls import scope_of
    from memory.llm import ToolCall
    from memory.records import NewMessage, Scope

    engine = await Engine.open(make_config(snapshots={"interval_seconds": 0}), OfflineLLM())
    general = Scope.channel(1, 10)
    root = await engine.stelis.root(general)
    box = engine.conversations.toolbox
    names = ["task_create", "task_get", "task_update_step", "task_close"]

    async def call(name, where=root, **args):
        return await box.answer(ToolCall("t", name, args), scope_of(where), where.id, names)

    made = json.loads(await call("task_create", title="Release notes", goal="publish notes for calculator_v2",
                                 steps=["collect changes", "draft", "post"]))
    assert made["status"] == "open" and made["branch"] == f"task-{made['task']}" and len(made["steps"]) == 3
    branch = await engine.store.branch(made["branch"])
    assert branch.branch_type == "task" and branch.status == "active" and branch.task_id == str(made["task"])
    session = await engine.store.thread(branch.current_thread_id)
    assert session.parent_thread_id == root.id and session.branch_id == branch.id  # anchored in the conversation
    await engine.store.append(session.id, NewMessage("user", "changes: faster parser, new icons", author_name="mahe"))
    stepped = json.loads(await call("task_update_step", task=made["task"], step=1))
    assert stepped["steps"][0]["done"] is True and stepped["steps"][1]["done"] is False
    assert (await engine.store.branch(branch.id)).brief_state == "step 1 done: collect changes"
    assert await call("task_update_step", task=made["task"], step=9) == \
        f"error: task {made['task']} has steps 1 to 3, not 9"
    other = await engine.stelis.root(Scope.channel(2, 20))
    assert await call("task_get", where=other, task=made["task"]) == f"error: there is no task {made['task']} here"
    closed = json.loads(await call("task_close", task=made["task"]))
    assert closed["status"] == "done"
    ended = await engine.store.thread(session.id)
    assert ended.status == "completed" and "faster parser" in (ended.chronicle_summary or "")
    assert (await engine.store.branch(branch.id)).status == "completed"
    assert await call("task_close", task=made["task"]) == f"error: task {made['task']} is already done"
    await engine.close()


async def test_suspending_a_branch_ends_its_session_and_resuming_opens_one_anchored_to_it(make_config):
    import json

    from bot.providers.offline import OfflineLLM
    from bot.services.tool_calls import scope_of
    from memory.llm import ToolCall
    from memory.records import NewMessage, Scope

    engine = await Engine.open(make_config(snapshots={"interval_seconds": 0}), OfflineLLM())
    root = await engine.stelis.root(Scope.channel(1, 10))
    box = engine.conversations.toolbox

    async def call(name, **args):
        return await box.answer(ToolCall("t", name, args), scope_of(root), root.id, ["task_create", "branch_update"])

    made = json.loads(await call("task_create", title="Novel", goal="write chapter 3"))
    first = (await engine.store.branch(made["branch"])).current_thread_id
    await engine.store.append(first, NewMessage("user", "the hero reaches the tower", author_name="mahe"))
    assert await call("branch_update", branch=made["branch"], status="suspended",
                      brief_state="chapter 3 half written") == f"{made['branch']} is suspended: chapter 3 half written"
    ended = await engine.store.thread(first)
    assert ended.status == "completed" and "tower" in (ended.chronicle_summary or "")  # suspend = end with chronicle
    resumed = await call("branch_update", branch=made["branch"], status="active")
    assert resumed.startswith(f"{made['branch']} is active")
    second = (await engine.store.branch(made["branch"])).current_thread_id
    assert second != first and (await engine.store.thread(second)).status == "active"
    opening = (await engine.store.tail(second, 5))[0]
    assert opening.metadata.get("stelis_thread_id") == first  # resumed from the previous session's anchor
    await engine.store.create_branch("social-eris", engine.persona, "social", "talks with Eris", root.scope_key,
                                     root.guild_id, root.channel_id, None)
    assert await call("branch_update", branch="social-eris", status="completed") == \
        "error: a social branch never completes: suspend it until the next exchange"
    await engine.close()
