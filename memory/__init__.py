"""The memory engine: storage, threads, windows, anchors, memories, context assembly.

Knows nothing of Discord or of a concrete LLM (see DESIGN.md section 2).
"""
