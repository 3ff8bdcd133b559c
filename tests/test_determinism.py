"""What memory writes and recall ranks is the same in every process: Python's hash seed changes the order a set of
words is walked in, and a float sum's last bits with it, which decided ties (bench memory_quality moved by up to 0.02
at 4k between runs of the same code)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = """
from bench.conversations import generate
from memory import recall
from memory.extractive import extractive_summary

conv = generate(0)
for start in range(0, 400, 40):
    print(extractive_summary("\\n".join(f"{t.speaker}: {t.text}" for t in conv.turns[start:start + 80]), 300))
hit = recall.Hit("message", 1, "we met at the harbour", 0.0, "Mary Jane Smith", "here", 0.0)
weights = {"mary": 0.1, "jane": 0.2, "smith": 0.3, "harbour": 0.7}
print(repr(recall.rank([hit], weights, coverage=0.0)[0].score))
"""


def _run(seed: int) -> str:
    env = {**os.environ, "PYTHONHASHSEED": str(seed)}
    return subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True,
                          check=True, timeout=60).stdout


def test_summaries_and_recall_scores_do_not_depend_on_the_hash_seed():
    outputs = {seed: _run(seed) for seed in range(6)}
    assert outputs[0].strip()
    assert all(out == outputs[0] for out in outputs.values()), \
        [seed for seed, out in outputs.items() if out != outputs[0]]
