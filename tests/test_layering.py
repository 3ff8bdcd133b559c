"""DESIGN.md section 2: memory/ knows nothing of Discord, of bot/ or of a concrete LLM."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = {"discord", "bot", "cogs", "anthropic", "openai"}


def imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_memory_imports_no_front_end_and_no_concrete_llm():
    offenders = {
        str(path.relative_to(ROOT)): sorted(imported_roots(path) & FORBIDDEN)
        for path in (ROOT / "memory").glob("*.py")
        if imported_roots(path) & FORBIDDEN
    }
    assert offenders == {}
    assert len(list((ROOT / "memory").glob("*.py"))) > 10  # the scan really looked at the package
