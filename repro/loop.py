"""Build the training loop that has exactly the properties the checker's four answers describe.

The checker on the page asks:
  calls    how many backward calls reach the same graph in one step: 1 or 2
  retain   does the first call pass retain_graph=True: False or True
  carried  is state carried across steps without detach: False or True
  summed   are the losses summed before backward: False or True

build_loop() writes the loop as Python source; the capture runs that source as written, and the
page shows it. fix() says which loop the page recommends instead.
"""

from dataclasses import dataclass, replace

STEPS = 4


@dataclass(frozen=True)
class Answers:
    """One combination of the checker's four answers."""

    calls: int
    retain: bool
    carried: bool
    summed: bool

    @property
    def key(self):
        """Name the combination in four characters: calls, then y/n for the other answers."""
        flags = (self.retain, self.carried, self.summed)
        return str(self.calls) + "".join("y" if flag else "n" for flag in flags)


def all_answers():
    """List the 16 combinations in a fixed order."""
    return [
        Answers(calls, retain, carried, summed)
        for calls in (1, 2)
        for retain in (False, True)
        for carried in (False, True)
        for summed in (False, True)
    ]


def fix(answers):
    """Return the answers of the loop that fixes this one: one call, no retain, detached state.

    Two losses stay two losses, summed before the single backward call.
    """
    two_losses = answers.summed or answers.calls == 2
    return replace(answers, calls=1, retain=False, carried=False, summed=two_losses)


def _backward_calls(answers):
    retain = "retain_graph=True" if answers.retain else ""
    if answers.summed:
        first, second = "loss", "loss"
    elif answers.calls == 2:
        first, second = "loss_a", "loss_b"
    else:
        first, second = "loss_a", None
    lines = [f"{first}.backward({retain})"]
    if answers.calls == 2:
        lines.append(f"{second}.backward()")
    return lines


def build_loop(answers):
    """Write the training loop for these answers as Python source."""
    body = []
    if answers.carried:
        body.append("h = h * w  # h carries the previous step's graph")
    else:
        body.append("h = h.detach() * w  # the previous step's graph is cut off")
    body.append("loss_a = (h - 0.1) ** 2")
    if answers.summed or answers.calls == 2:
        body.append("loss_b = 0.5 * h**2  # a second loss on the same forward pass")
    if answers.summed:
        body.append("loss = loss_a + loss_b")
    body.extend(_backward_calls(answers))
    last = "loss" if answers.summed else "loss_a"
    body.append(
        f'print("step", step, "depth", graph_depth({last}), "grad", round(w.grad.item(), 6),'
        ' "saved", saved.alive)'
    )
    lines = [
        "import torch",
        "from support import SavedTensors, graph_depth",
        "",
        "w = torch.tensor(0.5, requires_grad=True)",
        "h = torch.tensor(1.0)",
        "with SavedTensors() as saved:",
        f"    for step in range(1, {STEPS + 1}):",
        "        w.grad = None",
        *("        " + line for line in body),
    ]
    return "\n".join(lines) + "\n"
