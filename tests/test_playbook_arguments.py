"""A run's arguments as typed: a JSON object, or plain words for a playbook with one text input."""

import pytest

from bot.playbooks.arguments import parse_arguments
from bot.playbooks.model import Playbook
from bot.playbooks.state import PlaybookError


def book(properties: dict, required: list[str] | None = None) -> Playbook:
    schema = {"type": "object", "properties": properties, **({"required": required} if required else {})}
    return Playbook(name="demo", description="d", input_schema=schema, start_node="a",
                    nodes=[{"id": "a", "type": "set", "values": {"x": "1"}}])


def test_plain_words_go_to_the_one_text_input_or_the_one_required_one():
    one = book({"topic": {"type": "string"}})
    assert parse_arguments(one, "  lighthouse budget ") == {"topic": "lighthouse budget"}
    two = book({"topic": {"type": "string"}, "depth": {"type": "integer"}}, required=["topic"])
    assert parse_arguments(two, "tea") == {"topic": "tea"}
    assert parse_arguments(two, '{"topic": "tea", "depth": 2}') == {"topic": "tea", "depth": 2}
    assert parse_arguments(two, "   ") == {}


@pytest.mark.parametrize(("properties", "raw", "message"), [
    ({"a": {"type": "string"}, "b": {"type": "string"}}, "tea",
     'plain words fit a playbook with one text input; demo takes a, b, for example {"a": "...", "b": "..."}'),
    ({"n": {"type": "integer"}}, "three", "plain words fit a playbook with one text input; demo takes n"),
    ({}, "tea", "demo takes no arguments"),
    ({"a": {"type": "string"}}, '{"a": tea}', "the arguments are not valid JSON (Expecting value); demo takes a"),
])
def test_what_cannot_be_read_says_what_the_playbook_takes(properties, raw, message):
    with pytest.raises(PlaybookError) as caught:
        parse_arguments(book(properties), raw)
    assert message in str(caught.value)
