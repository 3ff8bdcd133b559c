"""Character cards as SillyTavern and chub share them (spec V1, V2, V3): the JSON file, or a PNG that carries it
base64-encoded in a `chara` (or `ccv3`) text chunk. Read into a persona card; a persona written back as a V2 card."""

from __future__ import annotations

import base64
import binascii
import json
import struct
import zlib
from dataclasses import dataclass
from typing import Any

from memory.errors import Failure

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
MAX_CARD_BYTES = 8_000_000  # a card's PNG is an illustration: a few MB at most
USER = "the person you are talking with"  # what {{user}} reads as: a Discord persona talks with many people


class CardError(Failure):
    """A file that is not a character card; the notice says what is wrong with it."""


@dataclass(frozen=True)
class Character:
    name: str
    description: str = ""
    personality: str = ""
    scenario: str = ""
    first_message: str = ""
    examples: str = ""
    system_prompt: str = ""

    def card(self) -> str:
        """The persona card: who the character is, as the prompt's first block, macros filled in."""
        parts = [self.system_prompt, self.description, self.personality and f"Personality: {self.personality}",
                 self.scenario and f"Scenario: {self.scenario}",
                 self.first_message and f"How {self.name} first greeted people:\n{self.first_message}",
                 self.examples and f"Examples of how {self.name} talks:\n{self.examples}"]
        text = "\n\n".join(p.strip() for p in parts if p and p.strip())
        return _macros(text or f"You are {self.name}.", self.name)


def read_card(data: bytes, filename: str = "the file") -> Character:
    """A character from a card's JSON or PNG; CardError says why a file is not one."""
    if len(data) > MAX_CARD_BYTES:
        raise CardError(f"{filename} is {len(data) // 1_000_000} MB; a character card is at most "
                        f"{MAX_CARD_BYTES // 1_000_000} MB")
    raw = _from_png(data, filename) if data.startswith(PNG_SIGNATURE) else data
    try:
        found = json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise CardError(f"{filename} is neither a character card's JSON nor a PNG that carries one") from None
    if not isinstance(found, dict):
        raise CardError(f"{filename} holds JSON, but not a character card (an object with a name)")
    fields: Any = found.get("data") if isinstance(found.get("data"), dict) else found  # V2/V3 nest, V1 does not
    name = str(fields.get("name") or fields.get("char_name") or "").strip()
    if not name:
        raise CardError(f"{filename} names no character (its `name` is empty)")
    return Character(name, _text(fields, "description", "char_persona"), _text(fields, "personality"),
                     _text(fields, "scenario", "world_scenario"), _text(fields, "first_mes", "char_greeting"),
                     _text(fields, "mes_example", "example_dialogue"), _text(fields, "system_prompt"))


def card_json(name: str, card: str) -> dict[str, Any]:
    """A persona as a V2 character card (what SillyTavern imports): the card as the character's description."""
    description = card.replace(name, "{{char}}") if name else card
    return {"spec": "chara_card_v2", "spec_version": "2.0",
            "data": {"name": name, "description": description, "personality": "", "scenario": "", "first_mes": "",
                     "mes_example": "", "creator_notes": "Exported from Stelis", "system_prompt": "",
                     "post_history_instructions": "", "alternate_greetings": [], "tags": [], "creator": "",
                     "character_version": "", "extensions": {}}}


def card_file(name: str, card: str) -> str:
    """The V2 card as the file a person downloads (readable JSON)."""
    return json.dumps(card_json(name, card), ensure_ascii=False, indent=2) + "\n"


def _text(fields: dict[str, Any], *keys: str) -> str:
    for key in keys:
        value = fields.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""


def _macros(text: str, name: str) -> str:
    for macro, value in (("{{char}}", name), ("<BOT>", name), ("{{user}}", USER), ("<USER>", USER)):
        text = text.replace(macro, value).replace(macro.lower(), value).replace(macro.upper(), value)
    return text


def _from_png(data: bytes, filename: str) -> bytes:
    """The card a PNG carries: its `ccv3` chunk (V3) if any, else its `chara` chunk, base64-decoded."""
    chunks: dict[str, bytes] = {}
    at = len(PNG_SIGNATURE)
    while at + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        if kind in (b"tEXt", b"iTXt", b"zTXt"):
            keyword, _, rest = body.partition(b"\0")
            chunks[keyword.decode("latin-1").lower()] = _chunk_text(kind, rest)
        if kind == b"IEND":
            break
        at += 12 + length
    found = chunks.get("ccv3") or chunks.get("chara")
    if found is None:
        raise CardError(f"{filename} is a PNG without a character card in it (no `chara` text chunk)")
    try:
        return base64.b64decode(found, validate=False)
    except (binascii.Error, ValueError):
        raise CardError(f"{filename}'s character card is not readable (its chunk is not base64)") from None


def _chunk_text(kind: bytes, rest: bytes) -> bytes:
    """A text chunk's text: tEXt as is, zTXt inflated, iTXt after its flags, language and translated keyword."""
    try:
        if kind == b"zTXt":
            return zlib.decompress(rest[1:])
        if kind == b"iTXt":
            compressed, rest = rest[0], rest[2:]
            _, _, rest = rest.partition(b"\0")
            _, _, rest = rest.partition(b"\0")
            return zlib.decompress(rest) if compressed else rest
    except zlib.error:
        return b""
    return rest
