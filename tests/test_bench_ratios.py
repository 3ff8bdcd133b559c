"""`python -m bench NAME --backend both` pairs the two backends' lines of the same size."""

from bench.__main__ import ratios


def test_ratios_pair_lines_of_the_same_size_that_both_measured():
    sqlite = [{"messages": 1000, "p50_ms": 2.0, "p50_ms_without_recall": 1.0},
              {"messages": 10000, "server_channels": 1000, "lone_p50_ms": 3.0}]
    postgresql = [{"messages": 1000, "p50_ms": 5.0, "p50_ms_without_recall": 1.5},
                  {"messages": 10000, "server_channels": 1000, "lone_p50_ms": 9.0}]
    assert ratios("context_latency", sqlite, postgresql) == [
        {"bench": "context_latency", "messages": 1000, "postgresql_over_sqlite_p50_ms": 2.5,
         "postgresql_over_sqlite_p50_ms_without_recall": 1.5}]
