#!/usr/bin/env python3
"""Draws the LLM concurrency cap over time as an SVG (Python 3 stdlib only).

Input: the CSV the concurrency simulation test writes
(build/concurrency_cap.csv; columns seconds,hidden_limit,cap,in_flight).
Usage: python3 scripts/plot_cap.py build/concurrency_cap.csv docs/concurrency_cap.svg
"""
import csv
import sys
from xml.sax.saxutils import escape

WIDTH, HEIGHT = 760, 320
LEFT, RIGHT, TOP, BOTTOM = 56, 16, 36, 44
SERIES = [  # column, label, colour, dash
    ("hidden_limit", "provider's hidden limit K", "#888888", "6,4"),
    ("cap", "published cap", "#1f77b4", ""),
    ("in_flight", "calls in flight", "#ff7f0e", "2,2"),
]


def read(path):
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f"{path}: no rows; run the simulation test first "
                 "(ctest --test-dir build -R ConcurrencySimulation)")
    for column in ["seconds"] + [s[0] for s in SERIES]:
        if column not in rows[0]:
            sys.exit(f"{path}: missing column '{column}'")
    return [{k: float(v) for k, v in row.items()} for row in rows]


def nice_step(span, ticks):
    raw = span / ticks
    for step in (1, 2, 5, 10, 20, 25, 50, 100, 200, 500, 1000):
        if step >= raw:
            return step
    return raw


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    rows = read(sys.argv[1])
    t_max = max(r["seconds"] for r in rows) or 1
    y_max = max(max(r[s[0]] for s in SERIES) for r in rows)
    y_step = nice_step(y_max, 5)
    y_max = (int(y_max / y_step) + 1) * y_step
    pw, ph = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(t):
        return LEFT + pw * t / t_max

    def y(v):
        return TOP + ph * (1 - v / y_max)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
           f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
           f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
           f'<text x="{LEFT}" y="20" font-size="14">LLM concurrency cap vs. the provider\'s '
           'hidden limit (simulated)</text>']
    v = 0
    while v <= y_max:
        out.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y(v):.1f}" y2="{y(v):.1f}" '
                   'stroke="#eeeeee"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
        v += y_step
    t_step = nice_step(t_max, 8)
    t = 0
    while t <= t_max:
        out.append(f'<text x="{x(t):.1f}" y="{HEIGHT - BOTTOM + 16}" '
                   f'text-anchor="middle">{t:g}</text>')
        t += t_step
    out.append(f'<text x="{LEFT + pw / 2}" y="{HEIGHT - 8}" text-anchor="middle">'
               'simulated seconds</text>')
    out.append(f'<text x="14" y="{TOP + ph / 2}" text-anchor="middle" '
               f'transform="rotate(-90 14 {TOP + ph / 2})">calls</text>')
    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" '
               'stroke="#333333"/>')
    for column, label, colour, dash in SERIES:
        points = " ".join(f"{x(r['seconds']):.1f},{y(r[column]):.1f}" for r in rows)
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        out.append(f'<polyline points="{points}" fill="none" stroke="{colour}" '
                   f'stroke-width="1.5"{dash_attr}/>')
    for i, (column, label, colour, dash) in enumerate(SERIES):
        lx, ly = LEFT + 12 + i * 220, TOP + 14
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        out.append(f'<line x1="{lx}" x2="{lx + 24}" y1="{ly}" y2="{ly}" stroke="{colour}" '
                   f'stroke-width="2"{dash_attr}/>')
        out.append(f'<text x="{lx + 30}" y="{ly + 4}">{escape(label)}</text>')
    out.append("</svg>")
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
