"""Benchmarks that print one JSON object per line (DESIGN.md section 9)."""
