"""Geometry of the dashboard's charts, drawn server-side as inline SVG (kb/web/templates/
dashboard.html): no script and no inline style, so the pages' content policy holds; the
colours come from classes in kb.css. Pure functions: numbers in, shapes out."""

from __future__ import annotations

from datetime import date
from typing import Any

LABEL_CHARS = 19  # a breakdown's label longer than this is cut (the full one in <title>)


def _nice_top(value: int) -> int:
    """The axis maximum: the value rounded up to 1, 2 or 5 times a power of ten."""
    if value <= 5:
        return max(value, 1)
    step = 10 ** (len(str(value)) - 1)
    for factor in (1, 2, 5, 10):
        if value <= factor * step:
            return factor * step
    return value


def daily_columns(days: list[date], counts: list[int], current_from: int,
                  width: int = 640, height: int = 180) -> dict[str, Any]:
    """Columns of occurrences per day; those from index `current_from` on (this week)
    are `cur`, the earlier ones (the previous week) `prev`."""
    left, bottom, top_pad = 34, 22, 8
    plot_w, plot_h = width - left - 4, height - bottom - top_pad
    top = _nice_top(max(counts, default=0))
    slot = plot_w / max(1, len(counts))
    bars = []
    for i, (day, n) in enumerate(zip(days, counts, strict=True)):
        h = round(n / top * plot_h, 1)
        x = round(left + i * slot + slot * 0.15, 1)
        bars.append({"x": x, "y": round(top_pad + plot_h - h, 1), "w": round(slot * 0.7, 1),
                     "h": h, "n": n, "cls": "cur" if i >= current_from else "prev",
                     "label": day.strftime("%d"), "title": f"{day.isoformat()}: {n}",
                     "lx": round(x + slot * 0.35, 1)})
    grid = [{"y": round(top_pad + plot_h - f * plot_h, 1), "value": round(top * f)}
            for f in (0, 0.5, 1) if f == 0 or round(top * f) == top * f]
    split = round(left + current_from * slot, 1) if 0 < current_from < len(counts) else None
    return {"width": width, "height": height, "bars": bars, "grid": grid, "left": left,
            "right": width - 4, "base": top_pad + plot_h, "label_y": height - 6, "split": split,
            "top_pad": top_pad, "total": sum(counts)}


def bucket_bars(buckets: list[Any], width: int = 340, row: int = 24) -> dict[str, Any]:
    """Horizontal bars of a breakdown: this week's occurrences (thick) over the previous
    week's (thin), one row per bucket, the count at the bar's end."""
    label_w, count_w = 124, 36
    bar_w = width - label_w - count_w
    top = max([max(b.this_week, b.previous_week) for b in buckets] or [1]) or 1
    rows = []
    for n, b in enumerate(buckets):
        y = n * row
        label = b.label if len(b.label) <= LABEL_CHARS else b.label[:LABEL_CHARS - 1] + "…"
        cur = round(b.this_week / top * bar_w, 1)
        rows.append({"y": y, "label": label, "full": b.label, "text_y": y + row * 0.62,
                     "bar_y": y + 4, "bar_h": row * 0.42, "cur_w": max(cur, 1.0 if b.this_week else 0),
                     "prev_y": round(y + 4 + row * 0.46, 1), "prev_h": row * 0.16,
                     "prev_w": round(b.previous_week / top * bar_w, 1),
                     "count_x": label_w + max(cur, 0) + 4, "n": b.this_week,
                     "previous": b.previous_week,
                     "incidents": b.incident_count})
    return {"width": width, "height": max(row, row * len(rows)), "rows": rows, "bar_x": label_w}


def split_bar(new: int, recurring: int, width: int = 420, height: int = 26) -> dict[str, Any]:
    """One bar split into the incidents first seen this week and the recurring ones."""
    total = new + recurring
    new_w = round(new / total * width, 1) if total else 0
    return {"width": width, "height": height, "new_w": new_w, "rec_x": new_w,
            "rec_w": round(width - new_w, 1) if total else 0, "new": new, "recurring": recurring,
            "total": total}


def series_line(counts: list[int], current_from: int, width: int = 140, height: int = 28) -> dict[str, Any]:
    """A small column series of one incident's two weeks (the previous week muted)."""
    top = max(counts, default=0) or 1
    slot = width / max(1, len(counts))
    bars = []
    for i, n in enumerate(counts):
        if not n:
            continue
        h = max(1.0, round(n / top * (height - 2), 1))
        bars.append({"x": round(i * slot, 1), "y": round(height - h, 1),
                     "w": round(max(1.0, slot - 1.5), 1), "h": h,
                     "cls": "cur" if i >= current_from else "prev"})
    return {"width": width, "height": height, "bars": bars,
            "split": round(current_from * slot - 0.75, 1)}
