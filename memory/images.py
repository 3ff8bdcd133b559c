"""Images in memory: each described once, in a line, so summaries and later prompts keep what it showed.

A message keeps its images as references (`metadata["images"]`: url, name, ...). The model sees an image
only while its link is fresh; afterwards the message reads `[image: name: what it showed]`.
"""

from __future__ import annotations

from typing import Any

from memory.llm import LLM, Block, LLMRequest, Turn
from memory.records import Message

DESCRIBE = ("Describe each image in one short line, in the order given, one line per image, nothing else: what it "
            "shows and any text in it.")


def described(message: Message, text: str) -> str:
    """The message's text with each image's name followed by its description, once it has one."""
    for ref in message.metadata.get("images") or []:
        if isinstance(ref, dict) and ref.get("description"):
            text = text.replace(f"[image: {ref['name']}]", f"[image: {ref['name']}: {ref['description']}]")
    return text


async def describe(llm: LLM, images: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The references with a one-line description each (the light model, one call for all of them)."""
    blocks = tuple(Block(str(ref["url"]), kind="image") for ref in images)
    result = await llm.complete(LLMRequest(system=(Block(DESCRIBE),), turns=(Turn("user", (*blocks, Block(
        "One line per image.")),),), max_tokens=80 * len(images), tier="light"))
    lines = [ln.strip(" -•\t") for ln in result.text.splitlines() if ln.strip()]
    return [{**ref, "description": lines[i][:300]} if i < len(lines) else ref for i, ref in enumerate(images)]
