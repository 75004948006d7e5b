"""Read figures out of a snapshot: printed values by label, tensors as lists."""

from .snapshot import ScenarioRun, Snapshot


class Missing(Exception):
    """A figure the page needs is not in the snapshot."""


def tensor(value):
    """Return a printed tensor's values as a flat list of floats."""
    if not isinstance(value, dict) or "tensor" not in value:
        raise Missing(f"expected a tensor, found {value!r}")
    flat = []
    stack = [value["tensor"]]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(reversed(item))
        else:
            flat.append(float(item))
    return flat


def run(snapshot: Snapshot, scenario: str) -> ScenarioRun:
    """Return one scenario's run or raise Missing."""
    try:
        return snapshot.scenarios[scenario]
    except KeyError:
        raise Missing(f"scenario '{scenario}' is not in the snapshot") from None


def printed(snapshot, scenario, label):
    """Return the values printed after `label` (the first argument), one list per print."""
    found = [
        list(o.values[1:]) for o in run(snapshot, scenario).outputs if o.values[:1] == (label,)
    ]
    if not found:
        raise Missing(f"scenario '{scenario}' printed nothing labelled {label!r}")
    return found


def printed_one(snapshot, scenario, label):
    """Return the single value printed after `label`."""
    return printed(snapshot, scenario, label)[-1][0]


def pairs(snapshot, scenario, first_label):
    """Read prints of the form 'label value label value ...' whose first label is first_label."""
    rows = []
    for output in run(snapshot, scenario).outputs:
        values = output.values
        if values[:1] == (first_label,):
            rows.append(dict(zip(values[0::2], values[1::2], strict=False)))
    if not rows:
        raise Missing(f"scenario '{scenario}' printed nothing starting with {first_label!r}")
    return rows


def close(a, b, decimals=4):
    """Whether two lists of floats agree to `decimals` decimal places."""
    return len(a) == len(b) and all(
        round(x, decimals) == round(y, decimals) for x, y in zip(a, b, strict=True)
    )


def per_step(snapshot, scenario, label):
    """Read prints of the form 'step N label value' as {N: value}, in step order."""
    found = {
        o.values[1]: o.values[3]
        for o in run(snapshot, scenario).outputs
        if len(o.values) == 4 and o.values[0] == "step" and o.values[2] == label
    }
    if not found:
        raise Missing(f"scenario '{scenario}' printed no 'step N {label} value' line")
    return found


def steps_printed(snapshot, scenario):
    """The step numbers a scenario printed with print('step', N), in order."""
    return [o.values[1] for o in run(snapshot, scenario).outputs if o.values[:1] == ("step",)]
