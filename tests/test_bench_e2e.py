"""make e2e's own judgement of what a real model left in memory (bench/e2e.py), without the model."""

from bench.e2e import _echoes
from memory.context import ROLLING_INSTRUCTION


def test_a_stored_text_repeating_its_instructions_is_an_echo_unless_the_conversation_said_it():
    """SmolLM2's replies said "This is part 2 of the conversation"; a version quoting them is not an echo."""
    quoting = "Rin: This is part 2 of the conversation: Kai has decided to create sailboats."
    assert _echoes(quoting, "")
    assert not _echoes(quoting, "[Rin] This is part 2 of the conversation: Kai has decided to create sailboats.")
    instruction = " ".join(ROLLING_INSTRUCTION.split()[:12])
    assert _echoes(instruction, "[kai] when is the inspection?")
    assert _echoes("<transcript> the inspection is on Tuesday", "<transcript> the inspection is on Tuesday")
