"""Character cards (SillyTavern / chub, spec V1-V3, JSON or PNG) become the persona card, and go back out as V2."""

import base64
import json
import struct
import zlib

import pytest

from bot.character_card import USER, CardError, card_json, read_card

SERAPHINA = {"name": "Seraphina", "description": "{{char}} is a guardian of the glade; she heals {{user}}.",
             "personality": "gentle, wry", "scenario": "{{user}} wakes in her cottage",
             "first_mes": "*{{char}} smiles* You're awake.", "mes_example": "<START>\n{{user}}: hi\n{{char}}: Rest."}


def png(chunks: list[tuple[bytes, bytes]]) -> bytes:
    """A 1x1 PNG with these extra chunks before its end, as card tools write them."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    header = chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
    pixels = chunk(b"IDAT", zlib.compress(b"\x00\x00\x00\x00"))
    return b"\x89PNG\r\n\x1a\n" + header + b"".join(chunk(k, v) for k, v in chunks) + pixels + chunk(b"IEND", b"")


def encoded(card: dict) -> bytes:
    return base64.b64encode(json.dumps(card).encode())


@pytest.mark.parametrize("data", [
    json.dumps(SERAPHINA).encode(),  # V1: the fields at the top
    json.dumps({"spec": "chara_card_v2", "spec_version": "2.0", "data": SERAPHINA}).encode(),
    png([(b"tEXt", b"chara\0" + encoded({"spec": "chara_card_v2", "data": SERAPHINA}))]),
    png([(b"tEXt", b"chara\0" + encoded({"spec": "chara_card_v2", "data": {"name": "Old"}})),
         (b"tEXt", b"ccv3\0" + encoded({"spec": "chara_card_v3", "data": SERAPHINA}))]),  # V3 wins over V2
    png([(b"iTXt", b"chara\0\x01\0\0\0" + zlib.compress(encoded({"data": SERAPHINA})))]),  # compressed iTXt
])
def test_a_card_in_any_of_its_forms_becomes_a_persona_card_with_its_macros_filled(data):
    character = read_card(data, "seraphina.png")
    assert character.name == "Seraphina"
    card = character.card()
    assert card.startswith("Seraphina is a guardian of the glade; she heals " + USER)
    assert "Personality: gentle, wry" in card and f"Scenario: {USER} wakes in her cottage" in card
    assert "How Seraphina first greeted people:\n*Seraphina smiles* You're awake." in card
    assert "Seraphina: Rest." in card and "{{" not in card


@pytest.mark.parametrize(("data", "message"), [
    (b"\x89PNG\r\n\x1a\n", "is a PNG without a character card in it"),
    (png([(b"tEXt", b"Comment\0made with a camera")]), "is a PNG without a character card in it"),
    (b"just some notes", "is neither a character card's JSON nor a PNG that carries one"),
    (b"[1, 2]", "holds JSON, but not a character card"),
    (json.dumps({"data": {"description": "nameless"}}).encode(), "names no character"),
])
def test_what_is_not_a_card_says_what_it_is(data, message):
    with pytest.raises(CardError) as caught:
        read_card(data, "upload")
    assert f"upload {message}" in caught.value.notice or message in caught.value.notice


def test_a_persona_goes_out_as_a_v2_card_that_reads_back():
    out = card_json("Rin", "You are Rin, who keeps the lighthouse.")
    assert out["spec"] == "chara_card_v2"
    assert out["data"]["description"] == "You are {{char}}, who keeps the lighthouse."
    again = read_card(json.dumps(out).encode())
    assert again.name == "Rin" and again.card() == "You are Rin, who keeps the lighthouse."
