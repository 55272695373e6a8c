"""Small inline SVG charts for the Markdown reports, with no plotting dependency.

- :func:`kernel_bars`: one kernel's times as horizontal bars on one scale (kernel, memory twin,
  copy floor, one-pass floor, best sweep variant, measured remedy; any may be missing), so the
  gap between the kernel and what the hardware allows is seen at a glance.
- :func:`hot_kernels_chart`: for an investigation, each hot kernel's share of GPU time and its
  gap to the floor (kernel ms / copy floor ms).

Every text (kernel names come from the program: untrusted) is XML-escaped, attributes included.
"""

from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

FONT = "font-family=\"sans-serif\" font-size=\"12\""
COLORS = {"kernel": "#c0392b", "memory twin": "#2980b9", "copy floor": "#27ae60",
          "one-pass floor": "#16a085", "best sweep variant": "#8e44ad", "measured remedy": "#d35400"}
DEFAULT_COLOR = "#7f8c8d"


def text(value) -> str:
    """Element text, escaped (``<``, ``&``, ``>``)."""
    return escape(str(value))


def _fmt_ms(ms: float) -> str:
    return f"{ms * 1e3:.1f} us" if ms < 1 else f"{ms:.3f} ms"


def _svg(width: int, height: int, title: str, body: list[str]) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label={quoteattr(str(title))}>'
            f"<title>{text(title)}</title>" + "".join(body) + "</svg>")


def kernel_bars(title: str, bars: list[tuple[str, float | None]], *, unit: str = "ms",
                reference: float | None = None, width: int = 640) -> str:
    """Horizontal bars of ``(label, value)``; a ``None`` value is listed as "not measured".

    ``unit`` "ms" prints times; "%" prints percent of copy peak. ``reference`` (e.g. the copy
    floor) draws a dashed vertical line through every bar at that value.
    """
    label_w, value_w, row_h, top = 150, 90, 22, 28
    plot_w = width - label_w - value_w - 10
    known = [v for _, v in bars if isinstance(v, (int, float)) and v > 0]
    scale = max(known + ([reference] if reference else [])) if known else 1.0
    body = [f'<text x="8" y="18" {FONT} font-weight="bold">{text(title)}</text>']
    for i, (label, value) in enumerate(bars):
        y = top + i * row_h
        body.append(f'<text class="label" x="{label_w - 6}" y="{y + 15}" text-anchor="end" {FONT}>'
                    f"{text(label)}</text>")
        if not isinstance(value, (int, float)) or value <= 0:
            body.append(f'<text class="missing" x="{label_w + 4}" y="{y + 15}" {FONT} fill="#999">'
                        f"not measured</text>")
            continue
        w = max(1.0, plot_w * value / scale)
        color = COLORS.get(str(label), DEFAULT_COLOR)
        body.append(f'<rect class="bar" x="{label_w}" y="{y + 3}" width="{w:.1f}" height="{row_h - 6}" '
                    f'fill="{color}" data-label={quoteattr(str(label))} data-value="{value:.6g}"/>')
        shown = _fmt_ms(value) if unit == "ms" else f"{value:.1f} {text(unit)}"
        body.append(f'<text class="value" x="{label_w + w + 4:.1f}" y="{y + 15}" {FONT}>{shown}</text>')
    height = top + len(bars) * row_h + 8
    if reference and reference > 0:
        x = label_w + plot_w * reference / scale
        body.append(f'<line class="reference" x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{height - 6}" '
                    f'stroke="#27ae60" stroke-dasharray="4 3"/>')
    return _svg(width, height, title, body)


def hot_kernels_chart(title: str, kernels: list[dict], width: int = 720) -> str:
    """One row per kernel: ``name``, ``share`` (0..1 of GPU time, or None: unknown) as a bar, ``gap`` (kernel ms /
    floor ms, or None) as a second bar on its own scale, labelled ``1.8x floor``; without a gap,
    ``missing`` says why (default "no floor")."""
    name_w, row_h, top = 240, 24, 40
    half = (width - name_w - 20) // 2
    gaps = [k["gap"] for k in kernels if isinstance(k.get("gap"), (int, float)) and k["gap"] > 0]
    gap_scale = max(gaps + [1.0])
    body = [f'<text x="8" y="18" {FONT} font-weight="bold">{text(title)}</text>',
            f'<text x="{name_w}" y="34" {FONT} fill="#555">share of GPU time</text>',
            f'<text x="{name_w + half + 10}" y="34" {FONT} fill="#555">time over the copy floor</text>']
    for i, k in enumerate(kernels):
        y = top + i * row_h
        name = str(k.get("name", ""))
        shown = name if len(name) <= 36 else name[:33] + "..."
        body.append(f'<text class="label" x="{name_w - 6}" y="{y + 16}" text-anchor="end" {FONT}>'
                    f"<title>{text(name)}</title>{text(shown)}</text>")
        if isinstance(k.get("share"), (int, float)):
            share = float(k["share"])
            w = max(1.0, (half - 50) * min(1.0, share))
            body.append(f'<rect class="share" x="{name_w}" y="{y + 4}" width="{w:.1f}" height="{row_h - 8}" '
                        f'fill="#c0392b" data-label={quoteattr(name)} data-value="{share:.6g}"/>')
            body.append(f'<text class="value" x="{name_w + w + 4:.1f}" y="{y + 16}" {FONT}>{100 * share:.1f} %</text>')
        else:  # no profile: unknown, not 0 %
            body.append(f'<text class="missing" x="{name_w}" y="{y + 16}" {FONT} fill="#999">share unknown</text>')
        gap = k.get("gap")
        x0 = name_w + half + 10
        if isinstance(gap, (int, float)) and gap > 0:
            gw = max(1.0, (half - 70) * gap / gap_scale)
            body.append(f'<rect class="gap" x="{x0}" y="{y + 4}" width="{gw:.1f}" height="{row_h - 8}" '
                        f'fill="#2980b9" data-label={quoteattr(name)} data-value="{gap:.6g}"/>')
            body.append(f'<text class="value" x="{x0 + gw + 4:.1f}" y="{y + 16}" {FONT}>{gap:.2f}x floor</text>')
        else:
            missing = k.get("missing") or "no floor"
            body.append(f'<text class="missing" x="{x0}" y="{y + 16}" {FONT} fill="#999">{text(missing)}</text>')
    return _svg(width, top + len(kernels) * row_h + 8, title, body)


STACK_COLORS = ("#2c3e50", "#e67e22", "#27ae60", "#8e44ad", "#c0392b", "#16a085", "#f1c40f", "#7f8c8d", "#bdc3c7")


def stacked_bar(title: str, segments: list[tuple[str, float]], *, unit: str = "us", width: int = 720) -> str:
    """One horizontal bar split into ``(label, value)`` segments in proportion, with a legend row
    per segment giving its value and percentage of the total (segments of 0 or less are left out)."""
    segs = [(str(lab), float(v)) for lab, v in segments if isinstance(v, (int, float)) and v > 0]
    total = sum(v for _, v in segs) or 1.0
    bar_w, top, bar_h, row_h = width - 20, 28, 26, 18
    body = [f'<text x="8" y="18" {FONT} font-weight="bold">{text(title)}</text>']
    x = 10.0
    for i, (label, value) in enumerate(segs):
        w = bar_w * value / total
        color = STACK_COLORS[i % len(STACK_COLORS)]
        body.append(f'<rect class="segment" x="{x:.1f}" y="{top}" width="{max(w, 0.5):.1f}" height="{bar_h}" '
                    f'fill="{color}" data-label={quoteattr(label)} data-value="{value:.6g}"/>')
        x += w
    for i, (label, value) in enumerate(segs):
        y = top + bar_h + 10 + i * row_h
        color = STACK_COLORS[i % len(STACK_COLORS)]
        shown = f"{value / 1e3:.3f} ms" if unit == "us" else f"{value:.4g} {text(unit)}"
        body.append(f'<rect x="10" y="{y}" width="12" height="12" fill="{color}"/>'
                    f'<text class="legend" x="28" y="{y + 11}" {FONT}>{text(label)}: {shown} '
                    f"({100 * value / total:.1f} %)</text>")
    height = top + bar_h + 16 + len(segs) * row_h
    return _svg(width, height, title, body)
