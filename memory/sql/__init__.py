"""The SQL both backends run, written once per aggregate over a dialect's five primitives (base.py).

Each backend (memory/sqlite, memory/postgres) keeps only what its dialect does differently: transactions
that span statements, full-text search, leases, and the writes other processes must hear of.
"""
