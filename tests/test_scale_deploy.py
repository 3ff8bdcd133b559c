"""deploy/compose.scale.yaml and deploy/prometheus.yml agree with each other and with the config they set."""

from pathlib import Path

import yaml

from bot.config import load_config, shard_ids

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"


def services() -> dict:
    return yaml.safe_load((DEPLOY / "compose.scale.yaml").read_text())["services"]


def test_the_bot_processes_run_every_shard_exactly_once():
    bots = {name: s for name, s in services().items() if "discord" in s.get("command", [])}
    assert len(bots) >= 2
    count = int(next(iter(bots.values()))["environment"]["STELIS_DISCORD_SHARD_COUNT"])
    ranges = [s["command"][s["command"].index("--shards") + 1] for s in bots.values()]
    owned = sorted(shard for text in ranges for shard in shard_ids(text) or [])
    assert owned == list(range(count))


def test_every_stelis_process_shares_one_database_and_is_scraped(tmp_path):
    stelis = {name: s for name, s in services().items() if s.get("command", [""])[0] == "python"}
    urls = {s["environment"]["DATABASE_URL"] for s in stelis.values()}
    assert len(urls) == 1 and next(iter(urls)).startswith("postgresql://")
    scraped = yaml.safe_load((DEPLOY / "prometheus.yml").read_text())["scrape_configs"][0]["static_configs"][0]
    port = {s["environment"]["STELIS_METRICS_PORT"] for s in stelis.values()}.pop()
    assert sorted(scraped["targets"]) == sorted(f"{name}:{port}" for name in stelis)
    environ = {k: str(v) for k, v in next(iter(stelis.values()))["environment"].items() if "${" not in str(v)}
    environ["DATABASE_URL"] = "postgresql://stelis:secret@postgres:5432/stelis"
    environ["STELIS_DATA_DIR"] = str(tmp_path)
    loaded = load_config(Path(__file__).resolve().parent.parent / "config.yaml", environ)  # the variables are keys
    assert loaded.config.database.url is not None and loaded.config.metrics.host == "0.0.0.0"
    assert not loaded.warnings
