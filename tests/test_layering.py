"""DESIGN.md section 2 and the house rules: who may import and touch what.

memory/ knows nothing of Discord, bot/ or a concrete LLM; front ends (cogs, the console, the
command line) reach the engine's services, never its store, assembler or model; SQL and database connections
live only in a store backend; and no module imports itself back through another.
"""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("bot", "cogs", "memory", "bench")
FORBIDDEN_IN_MEMORY = {"discord", "bot", "cogs", "anthropic", "openai"}
FRONT_ENDS = [*(ROOT / "cogs").glob("*.py"), ROOT / "bot" / "console.py", ROOT / "bot" / "__main__.py",
              ROOT / "bot" / "discord_bot.py", *(ROOT / "bot" / "dashboard").glob("*.py")]
# What a front end may not reach through the engine: the store, the assembler, the model (the services it may).
ENGINE_INSIDES = {"store", "assembler", "llm", "fitted"}
SQL = re.compile(r"\b(SELECT\s.+\sFROM|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|CREATE\s+(TABLE|INDEX)|PRAGMA)\b",
                 re.S)
DATABASE_MODULES = {"sqlite3", "aiosqlite", "asyncpg"}


def sources(*folders: str) -> list[Path]:
    return [p for folder in folders for p in (ROOT / folder).rglob("*.py")]


def imported(path: Path) -> set[str]:
    """Every module a file imports (absolute names, wherever the import statement sits)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_memory_imports_no_front_end_and_no_concrete_llm():
    offenders = {rel(path): sorted({n.split(".")[0] for n in imported(path)} & FORBIDDEN_IN_MEMORY)
                 for path in sources("memory") if {n.split(".")[0] for n in imported(path)} & FORBIDDEN_IN_MEMORY}
    assert offenders == {}
    assert len(sources("memory")) > 10  # the scan really looked at the package


def test_no_module_imports_itself_back():
    modules = {module_name(p): p for p in sources(*PACKAGES)}
    graph = {name: {m for m in imported(path) if m in modules and m != name} for name, path in modules.items()}
    cycles = []

    def visit(name: str, trail: list[str], done: set[str]) -> None:
        for nxt in sorted(graph[name]):
            if nxt in trail:
                cycles.append(" -> ".join([*trail[trail.index(nxt):], nxt]))
            elif nxt not in done:
                visit(nxt, [*trail, nxt], done)
        done.add(name)

    done: set[str] = set()
    for name in sorted(graph):
        if name not in done:
            visit(name, [name], done)
    assert cycles == []
    assert "bot.engine" in graph and "bot.services.conversation" in graph["bot.engine"]


def test_front_ends_reach_only_the_engine_facade():
    offenders = []
    for path in FRONT_ENDS:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and _is_engine(node.value) and (
                    node.attr in ENGINE_INSIDES or node.attr.startswith("_")):
                offenders.append(f"{rel(path)}:{node.lineno} engine.{node.attr}")
        for name in imported(path):
            if name.endswith("Error") or name == "memory.store":  # error types are the facade's too
                continue
            if name.startswith(("memory.store.", "memory.sqlite", "memory.backends", "memory.context.Assembler",
                                "bot.services")) or name.split(".")[0] in DATABASE_MODULES:
                offenders.append(f"{rel(path)} imports {name}")
    assert offenders == []
    assert len(FRONT_ENDS) >= 7


def _is_engine(node: ast.expr) -> bool:
    """`engine` or `self.engine`, however the front end holds it."""
    return (isinstance(node, ast.Name) and node.id == "engine") or (
        isinstance(node, ast.Attribute) and node.attr == "engine")


def test_sql_and_connections_live_only_in_a_store_backend():
    backends = (ROOT / "memory" / "sqlite", ROOT / "memory" / "postgres", ROOT / "memory" / "sql")
    offenders = []
    for path in sources(*PACKAGES, "tests"):
        if any(b in path.parents for b in backends) or path.name.startswith(("test_sqlite_", "test_postgres_")) \
                or path.name in ("postgres_cluster.py", "test_store_contract.py") \
                or path.name == "test_layering.py":
            continue  # the backend, and the tests of a backend alone
        if path == ROOT / "memory" / "backends.py":
            continue  # where a backend is chosen
        for name in imported(path):
            allowed = path.parent.name == "bench" and name.startswith(("memory.sqlite.baseline",
                                                                       "memory.postgres.baseline"))
            if (name.split(".")[0] in DATABASE_MODULES or name.startswith(("memory.sqlite", "memory.postgres"))) \
                    and not allowed:
                offenders.append(f"{rel(path)} imports {name}")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL.search(node.value):
                offenders.append(f"{rel(path)}:{node.lineno} {node.value[:50]!r}")
    assert offenders == []


def test_the_sql_both_backends_share_knows_no_dialect():
    """memory/sql is written once for both: no driver, no backend, no `$n` placeholder, cast or dialect function."""
    offenders = []
    for path in (ROOT / "memory" / "sql").glob("*.py"):
        offenders += [f"{rel(path)} imports {name}" for name in imported(path) if
                      name.split(".")[0] in DATABASE_MODULES or name.startswith(("memory.sqlite", "memory.postgres"))]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.search(
                    r"\$\d|::|\bANY\(|\bILIKE\b|json_extract|\binstr\(|\bMATCH\b|PRAGMA", node.value):
                offenders.append(f"{rel(path)}:{node.lineno} {node.value[:50]!r}")
    assert offenders == []


def test_the_sql_check_sees_sql():
    assert SQL.search("SELECT * FROM messages WHERE seq = ?")
    assert SQL.search("INSERT INTO threads (id) VALUES (?)")
    assert not SQL.search("Select a channel from the list")  # prose is not SQL


def test_each_setting_default_is_declared_once():
    """No field or parameter named like a setting repeats that setting's default outside where it is declared
    (memory/settings.py for the memory engine's, bot/config.py for the rest)."""
    from pydantic import BaseModel

    from bot.config import Config

    defaults: dict[str, list[object]] = {}

    def collect(model: type[BaseModel]) -> None:
        for name, field in model.model_fields.items():
            if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
                collect(field.annotation)
            else:
                defaults.setdefault(name, []).append(field.default)

    collect(Config)
    assert {"max_depth", "shared_channels", "message_threshold", "reply_policy"} <= set(defaults)
    declared = re.compile(rf"\b({'|'.join(sorted(defaults))})\s*:\s*[^=\n]+?=\s*([-\w.\"']+)")
    offenders = []
    for path in sources("bot", "cogs", "memory"):
        if path in (ROOT / "memory" / "settings.py", ROOT / "bot" / "config.py"):
            continue
        for m in declared.finditer(path.read_text()):
            try:
                value = ast.literal_eval(m.group(2))
            except (ValueError, SyntaxError):
                continue  # a name, not a literal: it comes from somewhere else
            if value in defaults[m.group(1)]:
                offenders.append(f"{rel(path)}: {m.group(0)}")
    assert offenders == []


def _service_classes() -> set[str]:
    found = set()
    for path in (ROOT / "bot" / "services").glob("*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef) and not node.bases and any(  # not an error, nor a view
                    isinstance(n, ast.FunctionDef) and n.name == "__init__" for n in node.body):
                found.add(node.name)
    return found


def test_services_are_built_in_the_composition_alone_and_given_what_they_need():
    """Engine.__init__ builds every service by constructor injection: no other module builds one, and no method of
    the engine sets anything on a service after it is built (but `attach`: the front end, known at run time)."""
    services = _service_classes()
    assert {"Conversations", "Autonomy", "Pulses", "Archive", "StelisThreads"} <= services
    for path in [*ROOT.glob("bot/**/*.py"), *ROOT.glob("cogs/*.py")]:
        if path.name == "engine.py" and path.parent.name == "bot":
            continue
        built = {n.func.id for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                 if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in services}
        assert not built, f"{path.relative_to(ROOT)} builds {sorted(built)}: only bot/engine.py composes services"
    engine = ast.parse((ROOT / "bot" / "engine.py").read_text(encoding="utf-8"))
    methods = [n for c in engine.body if isinstance(c, ast.ClassDef) and c.name == "Engine"
               for n in c.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name != "attach"]
    set_after = [f"{m.name}: {ast.unparse(t)}" for m in methods for n in ast.walk(m) if isinstance(n, ast.Assign)
                 for t in n.targets if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Attribute)]
    assert len(methods) > 5 and not set_after, f"set on a service after it was built: {set_after}"


def test_the_composition_check_sees_an_assignment_after_construction():
    tree = ast.parse("class Engine:\n    def __init__(self):\n        self.a = A()\n        self.a.b = 1\n")
    init = tree.body[0].body[0]
    assert [ast.unparse(t) for n in ast.walk(init) if isinstance(n, ast.Assign) for t in n.targets
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Attribute)] == ["self.a.b"]
