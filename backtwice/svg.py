"""Charts drawn at build time as inline SVG from snapshot numbers."""

from markupsafe import Markup, escape

WIDTH, HEIGHT = 320, 180
LEFT, RIGHT, TOP, BOTTOM = 36, 12, 28, 30


BAR_ROW = 44


def _scale(value, top):
    span = HEIGHT - TOP - BOTTOM
    return HEIGHT - BOTTOM - (value / top) * span if top else HEIGHT - BOTTOM


def line_chart(ident, title, series, x_label, y_label):
    """Draw series of (name, css class, values) over steps 1..n, with a title and description."""
    top = max(max(values) for _, _, values in series) or 1
    count = max(len(values) for _, _, values in series)
    step = (WIDTH - LEFT - RIGHT) / max(count - 1, 1)
    parts = [
        f'<line class="axis" x1="{LEFT}" y1="{HEIGHT - BOTTOM}" x2="{WIDTH - RIGHT}" y2="{HEIGHT - BOTTOM}"/>',
        f'<line class="axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{HEIGHT - BOTTOM}"/>',
        f'<text class="tick" x="{LEFT - 6}" y="{_scale(top, top) + 4:.1f}" text-anchor="end">{top:g}</text>',
        f'<text class="tick" x="{LEFT - 6}" y="{HEIGHT - BOTTOM + 4}" text-anchor="end">0</text>',
        f'<text class="label" x="{(WIDTH + LEFT) / 2:.1f}" y="{HEIGHT - 4}" text-anchor="middle">{escape(x_label)}</text>',
    ]
    for i in range(count):
        x = LEFT + i * step
        parts.append(
            f'<text class="tick" x="{x:.1f}" y="{HEIGHT - BOTTOM + 14}" text-anchor="middle">{i + 1}</text>'
        )
    for name, css, values in series:
        points = " ".join(
            f"{LEFT + i * step:.1f},{_scale(v, top):.1f}" for i, v in enumerate(values)
        )
        parts.append(f'<polyline class="series {css}" points="{points}"/>')
        for i, v in enumerate(values):
            parts.append(
                f'<circle class="dot {css}" cx="{LEFT + i * step:.1f}" cy="{_scale(v, top):.1f}" r="3.5"/>'
            )
        last = values[-1]
        parts.append(
            f'<text class="series-label {css}" x="{WIDTH - RIGHT}" y="{_scale(last, top) - 8:.1f}" '
            f'text-anchor="end">{escape(name)}</text>'
        )
    description = "; ".join(
        f"{name}: {', '.join(f'{v:g}' for v in values)}" for name, _, values in series
    )
    return _svg(ident, title, f"{y_label} per {x_label.lower()}. {description}.", parts)


def bar_chart(ident, title, bars, unit):
    """Draw labelled horizontal bars of (label, css class, value)."""
    top = max(value for _, _, value in bars) or 1
    row = BAR_ROW
    height = 12 + row * len(bars) + 12
    span = WIDTH - 150 - RIGHT
    parts = []
    for i, (label, css, value) in enumerate(bars):
        y = 12 + i * row
        width = span * value / top
        parts.append(f'<text class="label" x="0" y="{y + row / 2 + 4:.1f}">{escape(label)}</text>')
        parts.append(
            f'<rect class="bar {css}" x="150" y="{y + 6:.1f}" width="{max(width, 1):.1f}" height="{row - 12:.1f}"/>'
        )
        inside = width > span - 60
        x = 150 + width - 4 if inside else 150 + max(width, 1) + 4
        anchor = "end" if inside else "start"
        css_text = "tick inside" if inside else "tick"
        parts.append(
            f'<text class="{css_text}" x="{x:.1f}" y="{y + row / 2 + 4:.1f}" text-anchor="{anchor}">'
            f"{value:g} {escape(unit)}</text>"
        )
    description = "; ".join(f"{label}: {value:g} {unit}" for label, _, value in bars)
    return _svg(ident, title, description + ".", parts, height)


def _svg(ident, title, description, parts, height=HEIGHT):
    body = "".join(parts)
    return Markup(
        f'<svg class="chart" id="{ident}" viewBox="0 0 {WIDTH} {height}" role="img" '
        f'aria-labelledby="{ident}-title {ident}-desc"><title id="{ident}-title">{escape(title)}</title>'
        f'<desc id="{ident}-desc">{escape(description)}</desc>{body}</svg>'
    )
