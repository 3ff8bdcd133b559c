"""Metrics for operators (Prometheus): what one process did, read at /metrics (bot/metrics_server.py).

One registry per process; a sharded deployment scrapes each process, and gateway figures carry the shard.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY = CollectorRegistry()

REPLIES = Counter("stelis_replies", "Replies written, by outcome (ok, failed)", ["outcome"], registry=REGISTRY)
REPLY_SECONDS = Histogram("stelis_reply_seconds", "Time to write a reply, tool rounds included", registry=REGISTRY,
                          buckets=(0.5, 1, 2, 4, 8, 15, 30, 60, 120))
MODEL_CALLS = Counter("stelis_model_calls", "Model calls, by tier and purpose", ["tier", "purpose"],
                      registry=REGISTRY)
MODEL_TOKENS = Counter("stelis_model_tokens", "Model tokens, by kind (input, output, cache_read, cache_write)",
                       ["kind"], registry=REGISTRY)
MEMORY_DUE = Gauge("stelis_memory_due_conversations", "Conversations whose memory update was due at the last scan",
                   registry=REGISTRY)
LEASE_CONFLICTS = Counter("stelis_memory_lease_conflicts", "Memory updates another worker held when claimed",
                          registry=REGISTRY)
GATEWAY_LATENCY = Gauge("stelis_gateway_latency_seconds", "Discord gateway heartbeat latency", ["shard"],
                        registry=REGISTRY)
GATEWAY_CONNECTED = Gauge("stelis_gateway_connected", "1 while the shard's gateway connection is up", ["shard"],
                          registry=REGISTRY)
DATABASE_CONNECTIONS = Gauge("stelis_database_connections", "Database connections in use and the pool's size",
                             ["state"], registry=REGISTRY)


def read_pool(usage: tuple[int, int]) -> None:
    """The store's connections (in use, size), read at each scrape."""
    in_use, size = usage
    DATABASE_CONNECTIONS.labels("in_use").set(in_use)
    DATABASE_CONNECTIONS.labels("size").set(size)
