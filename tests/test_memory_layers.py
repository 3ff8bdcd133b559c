"""How a memory text too long for its room is shortened (memory/layers.py)."""

from memory.layers import shorten
from memory.tokens import cached_tokens


def test_a_shortened_memory_keeps_its_informative_lines_wherever_they_are_and_says_what_it_left_out():
    lines = ["## Long-term memory (v9, 1 May to 9 June 2024)"]
    lines += [f"ben: ok sure, sounds good [v{i}]" for i in range(1, 20)]
    lines += ["Kai: Kai moved to Montevideo on 3 May 2024 for a job at Quanta Labs [v20]",
              "Mira: Mira's sister Odile turns 41 on 12 June [v21]"]
    lines += [f"ana: yes I agree, nice [v{i}]" for i in range(22, 40)]
    text = "\n".join(lines)
    short = shorten(text, 120)
    assert cached_tokens(short) <= 120
    assert short.splitlines()[0] == lines[0]  # the header says what the memory is
    assert "Montevideo" in short and "Odile turns 41" in short  # from the middle, not only the ends
    kept = [line for line in short.splitlines()[1:] if line in lines]
    assert kept == [line for line in lines if line in kept]  # in their order
    left_out = len(lines) - 1 - len(kept)
    assert f"(… {left_out} line(s) left out here; recall and /memory show have them)" in short
    assert shorten(text, 10_000) == text  # room for everything: unchanged
