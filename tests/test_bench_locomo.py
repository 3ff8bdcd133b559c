"""`bench memory_quality --data`: conversations in the LoCoMo format, read as the generated ones are measured."""

import json
from datetime import UTC, datetime

import pytest

from bench import locomo, memory_quality
from bench.__main__ import main

SAMPLE = {
    "conversation": {
        "speaker_a": "Wren", "speaker_b": "Ilse",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Wren", "dia_id": "D1:1", "text": "Hi Ilse! Long week."},
            {"speaker": "Ilse", "dia_id": "D1:2", "text": "Same. I adopted a greyhound called Pavlova on Sunday. "
                                                          "She is shy."},
        ],
        "session_2_date_time": "7:05 am on 20 June, 2023",
        "session_2": [
            {"speaker": "Wren", "dia_id": "D2:1", "text": "Look at my pottery!", "img_url": ["x"],
             "blip_caption": "a photo of a blue clay bowl"},
        ],
    },
    "qa": [
        {"question": "What is the name of Ilse's dog?", "answer": "Pavlova", "evidence": ["D1:2"], "category": 4},
        {"question": "When did Wren show a bowl?", "answer": "June 2023", "evidence": ["D2:1", "D9:9"], "category": 2},
        {"question": "What did Wren say about cats?", "evidence": ["D1:1"], "category": 5,
         "adversarial_answer": "nothing"},
    ],
}


def test_a_locomo_sample_becomes_a_conversation_at_its_sessions_dates_with_its_answerable_questions(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps([SAMPLE, SAMPLE]))
    convs = locomo.load(tmp_path / "a.json")
    assert len(convs) == 2
    conv = convs[0]
    assert [t.speaker for t in conv.turns] == ["Wren", "Ilse", "Wren"]
    assert conv.turns[0].at == datetime(2023, 5, 8, 13, 56, tzinfo=UTC).timestamp()
    assert conv.turns[1].at - conv.turns[0].at == locomo.TURN_SECONDS
    assert conv.turns[2].at == datetime(2023, 6, 20, 7, 5, tzinfo=UTC).timestamp()
    assert conv.turns[2].text == "Look at my pottery! [shares a photo of a blue clay bowl]"
    # the adversarial question has no answer in the conversation; evidence the sessions lack is dropped
    assert [(q.kind, q.evidence) for q in conv.questions] == [("single-hop", [1]), ("temporal", [2])]
    assert conv.questions[0].keys == ["I adopted a greyhound called Pavlova on Sunday."]  # its longest sentence


def test_a_session_date_in_another_format_is_a_clear_error(tmp_path):
    broken = json.loads(json.dumps(SAMPLE))
    broken["conversation"]["session_2_date_time"] = "2023-06-20"
    (tmp_path / "b.json").write_text(json.dumps(broken))
    with pytest.raises(ValueError, match="2023-06-20"):
        locomo.load(tmp_path)


def test_memory_quality_measures_a_locomo_directory_by_its_categories(tmp_path, capsys):
    (tmp_path / "one.json").write_text(json.dumps(SAMPLE))
    assert main(["memory_quality", "--quick", "--data", str(tmp_path)]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["budget"] for line in lines] == list(memory_quality.BUDGETS)
    assert {line["data"] for line in lines} == {tmp_path.name} and {line["questions"] for line in lines} == {2}
    assert set(lines[-1]["by_category"]) == {"single-hop", "temporal"}
    assert lines[-1]["stelis_evidence_any"] == 1.0  # three turns fit any budget: every evidence turn is carried
