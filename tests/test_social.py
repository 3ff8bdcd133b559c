"""One social branch per relationship (seed 001): sessions wherever the exchange happens, privacy kept."""

from bot.engine import Engine
from bot.providers.offline import OfflineLLM
from memory.anchors import is_anchor
from memory.records import Scope

GUILD = 1
ERIS = 99
PUBLIC_A, PUBLIC_B, STAFF = Scope.channel(GUILD, 10), Scope.channel(GUILD, 11), Scope.channel(GUILD, 12)


async def _engine(make_config) -> Engine:
    engine = await Engine.open(make_config(snapshots={"interval_seconds": 0}), OfflineLLM())
    for scope, name, public in ((PUBLIC_A, "garden", True), (PUBLIC_B, "kitchen", True), (STAFF, "staff", False)):
        await engine.admin.describe(scope, name=name, public=public)
    return engine


async def _exchange(engine: Engine, where: Scope, said: str) -> int:
    heard = await engine.conversations.hear(where, said, author_name="Eris", author_id=ERIS,
                                            thread_id=(await engine.socials.session(where, ERIS, "Eris")).id)
    await engine.socials.end(where, ERIS)
    return heard.thread_id


async def test_one_branch_per_other_persona_with_a_session_wherever_they_talk(make_config):
    engine = await _engine(make_config)
    first = await _exchange(engine, PUBLIC_A, "shall we map the autumn sky?")
    second = await _exchange(engine, PUBLIC_B, "the kettle is on, come over")
    [branch] = [b for b in await engine.branches.of(PUBLIC_B, kind="social")]
    assert branch.id == f"social-{GUILD}-{ERIS}" and branch.label == "with Eris"
    sessions = await engine.store.branch_threads(branch.id)
    assert [s.id for s in sessions] == [first, second] and all(s.status == "completed" for s in sessions)
    assert sessions[1].scope_key == PUBLIC_B.key  # held where the exchange happened, anchored there
    opening = (await engine.store.tail(second, 5))[0]
    assert is_anchor(opening) and opening.metadata["stelis_thread_id"] == first  # the relationship goes on
    other_server = await engine.socials.session(Scope.channel(2, 20), ERIS, "Eris")
    assert other_server.branch_id == f"social-2-{ERIS}"  # another server: its own branch, nothing shared
    await engine.close()


async def test_a_session_in_a_private_channel_reaches_no_public_one(make_config):
    engine = await _engine(make_config)
    private = await _exchange(engine, STAFF, "the payroll code is 4471, keep it quiet")
    public = await _exchange(engine, PUBLIC_A, "lovely weather for stargazing")
    opening = (await engine.store.tail(public, 5))[0]
    assert not (is_anchor(opening) and opening.metadata.get("stelis_thread_id") == private)  # not anchored there
    request = str((await engine.conversations.context((await engine.stelis.root(PUBLIC_A)).id)).request)
    assert "4471" not in request and "payroll" not in request
    listed = "\n".join(await engine.tools.branch_lines(PUBLIC_A))
    assert "with Eris" in listed and "4471" not in listed and "payroll" not in listed
    assert "payroll" not in " ".join(h.text for h in await engine.archive.recall(PUBLIC_A, "payroll code"))
    await engine.close()
