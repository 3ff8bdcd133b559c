"""A provider's SDK imported without its optional aiohttp transport (bot/providers/sdk_import.py)."""

import subprocess
import sys
from pathlib import Path

import pytest

from bot.providers.sdk_import import import_sdk

REPO = Path(__file__).resolve().parent.parent


def _package(root: Path, name: str, init: str) -> None:
    """A stand-in SDK: its __init__, and a vendored transport that says when it is imported."""
    (root / name / "_vendor").mkdir(parents=True)
    (root / name / "__init__.py").write_text(init)
    (root / name / "_vendor" / "__init__.py").write_text("")
    (root / name / "_vendor" / "httpx_aiohttp.py").write_text("import builtins\nbuiltins.TRANSPORT_IMPORTED = True\n")


@pytest.fixture
def packages(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [n for n in sys.modules if n.startswith(("sdk_optional", "sdk_needs"))]:
        del sys.modules[name]
    import builtins
    if hasattr(builtins, "TRANSPORT_IMPORTED"):
        del builtins.TRANSPORT_IMPORTED


def test_an_sdk_whose_transport_is_optional_imports_without_it_and_leaves_no_mark(packages):
    _package(packages, "sdk_optional", "try:\n    from ._vendor import httpx_aiohttp\n    CLIENT = 'aiohttp'\n"
                                       "except ImportError:\n    CLIENT = 'stand-in'\n")
    sdk = import_sdk("sdk_optional")
    assert sdk.CLIENT == "stand-in"
    assert "sdk_optional._vendor.httpx_aiohttp" not in sys.modules  # no mark left: it may be imported later
    import builtins
    assert not hasattr(builtins, "TRANSPORT_IMPORTED")


def test_an_sdk_that_cannot_do_without_its_transport_is_imported_as_it_is(packages):
    _package(packages, "sdk_needs", "from ._vendor import httpx_aiohttp\nCLIENT = 'aiohttp'\n")
    assert import_sdk("sdk_needs").CLIENT == "aiohttp"


def test_a_missing_sdk_is_an_import_error_naming_it(packages):
    with pytest.raises(ImportError) as raised:
        import_sdk("sdk_not_installed")
    assert raised.value.name == "sdk_not_installed"
    assert "sdk_not_installed._vendor.httpx_aiohttp" not in sys.modules


def test_the_anthropic_provider_starts_without_importing_aiohttp():
    """The console's first reply with the Anthropic SDK: aiohttp (installed for discord.py) was imported with the
    SDK's transport, 0.13-0.27 s of it (bench first_reply: 1.53-1.60 -> 1.36-1.43 s alternated)."""
    script = ("import sys\nfrom bot.config import validate\nfrom bot.providers import make_llm\n"
              "llm = make_llm(validate({'llm': {'provider': 'anthropic', 'anthropic': {'api_key': 'sk-test'}}}))\n"
              "print(type(llm.client).__name__, 'aiohttp' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["AsyncAnthropic", "False"]


def test_without_the_openai_package_the_provider_says_how_to_install_it(monkeypatch):
    from bot.config import validate
    from bot.providers import make_llm
    from memory.llm import LLMError

    monkeypatch.setitem(sys.modules, "openai", None)  # as if it were not installed
    with pytest.raises(LLMError, match=r"pip install -e '\.\[openai\]'"):
        make_llm(validate({"llm": {"provider": "openai", "openai": {"base_url": "http://127.0.0.1:9/v1"}}}))
