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


def _svg(ident, title, description, parts, height=HEIGHT):
    body = "".join(parts)
    return Markup(
        f'<svg class="chart" id="{ident}" viewBox="0 0 {WIDTH} {height}" role="img" '
        f'aria-labelledby="{ident}-title {ident}-desc"><title id="{ident}-title">{escape(title)}</title>'
        f'<desc id="{ident}-desc">{escape(description)}</desc>{body}</svg>'
    )
