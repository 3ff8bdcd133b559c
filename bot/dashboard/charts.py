"""Charts as inline SVG written on the server: no script, no chart library, readable without JavaScript."""

from __future__ import annotations

from html import escape

WIDTH, BAR, GAP, LABEL = 640, 22, 8, 170
COLOURS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c")


def token_bars(parts: dict[str, int]) -> str:
    """One bar per part of a request, with its count, scaled to the largest part."""
    total = sum(parts.values())
    scale = (WIDTH - LABEL - 90) / max([*parts.values(), 1])
    rows = [(name, tokens) for name, tokens in parts.items() if tokens > 0]
    height = len(rows) * (BAR + GAP) + GAP
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{WIDTH}" height="{height}" role="img" '
           f'aria-label="tokens by part of the request, {total} in all">']
    for i, (name, tokens) in enumerate(rows):
        y = GAP + i * (BAR + GAP)
        width = max(1.0, tokens * scale)
        out.append(f'<text x="0" y="{y + BAR - 6}" font-size="13">{escape(name)}</text>'
                   f'<rect x="{LABEL}" y="{y}" width="{width:.1f}" height="{BAR}" '
                   f'fill="{COLOURS[i % len(COLOURS)]}"><title>{escape(name)}: {tokens} tokens</title></rect>'
                   f'<text x="{LABEL + width + 6:.1f}" y="{y + BAR - 6}" font-size="13">{tokens:,}</text>')
    out.append("</svg>")
    return "".join(out)
