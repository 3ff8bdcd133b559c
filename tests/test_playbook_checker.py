"""The static checker refuses each mistake class the design's ancestor shipped (issue: playbooks)."""

import json

import pytest

from bot.playbooks.checker import check, check_file, nesting, parse

TOOLS = {"recall", "now", "memory_pin"}


def playbook(nodes, **extra):
    return {"name": extra.pop("name", "sample"), "description": "a test playbook", "start_node": nodes[0]["id"],
            "nodes": nodes, **extra}


def problems_of(raw, library=None, tools=TOOLS, **kw):
    parsed, problems = parse(json.dumps(raw), "sample.json")
    if parsed is None:
        return problems
    kw.setdefault("max_depth", 3)
    return check(parsed, "sample.json", tools=tools, library=library or {}, **kw)


def only(problems):
    assert len(problems) == 1, [str(p) for p in problems]
    return problems[0]


def llm(node_id, action="Say hello.", **kw):
    return {"id": node_id, "type": "llm", "context_profile": "conversation", "action": action, **kw}


def test_a_sound_playbook_has_no_problem():
    raw = playbook([
        llm("ask", "Answer {question}.", output_key="answer", next="keep"),
        {"id": "keep", "type": "set", "values": {"done": True, "said": "{answer}"}},
    ], input_schema={"type": "object", "properties": {"question": {"type": "string"}}},
        output_schema={"type": "object", "properties": {"said": {"type": "string"}}})
    assert problems_of(raw) == []


@pytest.mark.parametrize(("node", "field"), [
    ({"id": "t", "type": "tool", "tool": "now", "args_input": {}}, "args_input"),  # `args` misspelt
    (llm("t", available_tools=["recall"]), "available_tools"),  # `tools` misspelt
])
def test_an_unknown_field_is_an_error_naming_the_node_and_field(node, field):
    problem = only(problems_of(playbook([node])))
    assert (problem.node, problem.field) == ("t", field) and "unknown field" in problem.message
    assert str(problem).startswith("sample.json: node t: field " + field)


def test_an_llm_node_without_a_context_profile_is_refused():
    node = {"id": "ask", "type": "llm", "action": "Say hello."}
    problem = only(problems_of(playbook([node])))
    assert (problem.node, problem.field) == ("ask", "context_profile")


def test_unknown_tools_and_playbooks_are_named():
    raw = playbook([
        llm("ask", tools=["recall", "send_email"], next="run"),
        {"id": "run", "type": "tool", "tool": "launch", "next": "sub"},
        {"id": "sub", "type": "subplay", "playbook": "missing_one"},
    ])
    found = {(p.node, p.field, p.message) for p in problems_of(raw)}
    assert found == {("ask", "tools", "unknown tool 'send_email'"), ("run", "tool", "unknown tool 'launch'"),
                     ("sub", "playbook", "unknown playbook 'missing_one'")}


def test_a_variable_nobody_declares_is_refused():
    problem = only(problems_of(playbook([llm("ask", "Answer {qestion}.")],
                                        input_schema={"type": "object", "properties": {"question": {}}})))
    assert (problem.node, problem.field) == ("ask", "action") and "'qestion'" in problem.message


def test_a_key_the_callee_output_schema_does_not_declare_is_refused():
    """The ancestor's sub-playbook had no output_schema, so its flag never came back: caught here."""
    callee, _ = parse(json.dumps(playbook([{"id": "s", "type": "set", "values": {"flag": True}}], name="callee")),
                      "callee.json")
    raw = playbook([
        {"id": "sub", "type": "subplay", "playbook": "callee", "output_key": "result", "next": "go"},
        {"id": "go", "type": "route", "conditional_next": {"field": "result.flag", "cases": {"True": "end"}}},
        {"id": "end", "type": "set", "values": {"x": 1}},
    ])
    problem = only(problems_of(raw, library={"callee": callee}))
    assert (problem.node, problem.field) == ("go", "conditional_next.field") and "'flag'" in problem.message
    declared = json.loads(json.dumps(callee.model_dump()))
    declared["output_schema"] = {"type": "object", "properties": {"flag": {"type": "boolean"}}}
    fixed, _ = parse(json.dumps(declared), "callee.json")
    assert problems_of(raw, library={"callee": fixed}) == []


def test_unreachable_nodes_and_dangling_edges_are_refused():
    raw = playbook([llm("ask", next="nowhere"), llm("orphan")])
    found = {(p.node, p.field, p.message) for p in problems_of(raw)}
    assert found == {("ask", "next", "no node 'nowhere'"), ("orphan", None, "unreachable from start_node")}


def test_an_output_no_node_sets_is_refused():
    problem = only(problems_of(playbook([llm("ask")],
                                        output_schema={"type": "object", "properties": {"verdict": {}}})))
    assert (problem.field, problem.message) == ("output_schema", "output 'verdict' is never set by any node")


def test_stelis_nesting_that_could_pass_the_maximum_depth_is_refused_before_any_run():
    inner, _ = parse(json.dumps(playbook([
        {"id": "open", "type": "stelis_start", "label": "inner", "next": "close"},
        {"id": "close", "type": "stelis_end"},
    ], name="inner")), "inner.json")
    raw = playbook([
        {"id": "open", "type": "stelis_start", "label": "outer", "next": "call"},
        {"id": "call", "type": "subplay", "playbook": "inner", "next": "close"},
        {"id": "close", "type": "stelis_end"},
    ])
    outer, _ = parse(json.dumps(raw), "sample.json")
    assert nesting(outer, {"inner": inner}) == 2
    assert problems_of(raw, library={"inner": inner}, start_depth=1, max_depth=3) == []
    problem = only(problems_of(raw, library={"inner": inner}, start_depth=2, max_depth=3))
    assert problem.field == "stelis_start" and "past the maximum depth 3" in problem.message


def test_check_file_reads_json_and_names_the_file(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text("{not json")
    _, problems = check_file(path, tools=TOOLS, library={}, max_depth=3)
    assert str(only(problems)).startswith(f"{path}: not valid JSON")


def test_a_conversation_node_may_not_offer_tools_beyond_the_conversations_own():
    problem = only(problems_of(playbook([llm("ask", tools=["recall", "memory_pin"])])))
    assert (problem.node, problem.field) == ("ask", "tools") and "'memory_pin' is not one of the conversation" in \
        problem.message
    assert problems_of(playbook([llm("ask", context_profile="worker", tools=["memory_pin"])])) == []
