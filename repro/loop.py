"""Build the training loop that has exactly the properties the checker's four answers describe.

The checker on the page asks, in the reader's terms:
  when    when the error appears: on the first step, on a later step, or when code reads a
          saved tensor after backward
  calls   the step's backward calls: one; the same loss twice; two losses sharing a forward
          pass; a GAN's D step then G step; autograd.grad then backward
  reach   what reaches into an earlier step: nothing; an RNN hidden state; an LSTM whose h is
          detached but c is not; a tensor computed before the loop from parameters; a running
          total of the loss; outputs kept across steps in a list
  retain  whether retain_graph=True (or create_graph=True) was added to the first call

Every loop is a small seeded training step: nn modules, an optimizer, zero_grad, backward,
step. build_loop() writes it as Python source; the capture runs that source as written and the
page shows it. fix() names the loop an expert writes instead; build_loop(fix(a)) writes it.
While writing the lines the builder tags the ones the diagnoser needs (expected()).
"""

from dataclasses import dataclass

STEPS = 4

WHEN = ("first", "later", "saved")
CALLS = ("one", "twice", "shared", "gan", "grad")
REACH = ("nothing", "rnn", "lstm", "before", "total", "kept")
RETAIN = ("none", "retain", "create")

# What an expert writes instead, answer by answer (values only fixed loops use).
FIXED_CALLS = {"one": "one", "twice": "one", "shared": "summed", "gan": "gan", "grad": "grad"}
FIXED_REACH = {
    "nothing": "nothing",
    "rnn": "rnn-detached",
    "lstm": "lstm-detached",
    "before": "inside",
    "total": "total-item",
    "kept": "kept-inputs",
}


@dataclass(frozen=True)
class Answers:
    """One combination of the checker's four answers (or, with when='fixed', a fixed loop)."""

    when: str
    calls: str
    reach: str
    retain: str

    @property
    def key(self):
        """Name the combination: the four answers joined by '-'."""
        return f"{self.when}-{self.calls}-{self.reach}-{self.retain}"

    @property
    def fixed(self):
        """Whether this is a fixed loop rather than a reader's answers."""
        return self.when == "fixed"


def all_answers():
    """List every combination the checker offers, in a fixed order.

    On the first step nothing from an earlier step exists yet, so an error there comes from
    the step's own calls; a single backward call raises only on a later step (through what
    reaches back) or when code reads a saved tensor after it. create_graph=True belongs to
    autograd.grad.
    """
    combos = []
    for calls in ("twice", "shared", "gan", "grad"):
        for retain in ("none", "retain", "create") if calls == "grad" else ("none", "retain"):
            combos.append(Answers("first", calls, "nothing", retain))
    for reach in REACH[1:]:
        for retain in ("none", "retain"):
            combos.append(Answers("later", "one", reach, retain))
    for retain in ("none", "retain"):
        combos.append(Answers("saved", "one", "nothing", retain))
    return combos


def fix(answers):
    """Return the answers of the loop an expert writes instead of this one."""
    if answers.fixed:
        return answers
    retain = "create" if answers.calls == "grad" else "none"
    reach = "saved-before" if answers.when == "saved" else FIXED_REACH[answers.reach]
    return Answers("fixed", FIXED_CALLS[answers.calls], reach, retain)


def tempting(answers):
    """Return the answers of a fix people try that runs but trains something else, or None.

    Detaching a tensor computed before the loop, the advice for carried state, runs without
    error; the capture shows which parameters then stop getting gradients.
    """
    if answers.reach == "before" and not answers.fixed:
        return Answers("tempting", "one", "before-detached", "none")
    return None


class _Lines:
    """Source lines with tags, so the builder can say which line does what."""

    def __init__(self):
        self.lines = []
        self.tags = {}

    def add(self, text, *tags):
        self.lines.append(text)
        for tag in tags:
            self.tags.setdefault(tag, len(self.lines))

    def source(self):
        return "\n".join(self.lines) + "\n"


def _models(a, out):
    """Write the models, data and optimizer the loop trains."""
    out.add("import torch")
    out.add("from torch import nn")
    out.add("")
    out.add("torch.manual_seed(0)")
    if a.calls == "gan":
        out.add("G = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 4))")
        out.add("D = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))")
        out.add("opt_g = torch.optim.SGD(G.parameters(), lr=0.1)")
        out.add("opt_d = torch.optim.SGD(D.parameters(), lr=0.1)")
        out.add("bce = nn.BCEWithLogitsLoss()")
        out.add(f"noise = torch.randn({STEPS}, 8, 2)")
        out.add(f"data = torch.randn({STEPS}, 8, 4)")
        out.add("real_label, fake_label = torch.ones(8, 1), torch.zeros(8, 1)")
        return
    if a.reach.startswith("rnn"):
        out.add("cell = nn.RNNCell(4, 8)")
        modules = ("cell", "head")
    elif a.reach.startswith("lstm"):
        out.add("cell = nn.LSTMCell(4, 8)")
        modules = ("cell", "head")
    else:
        out.add("encoder = nn.Linear(4, 8)")
        modules = ("encoder", "head")
    out.add("head = nn.Linear(8, 1)")
    if a.calls in ("shared", "summed"):
        out.add("aux = nn.Linear(8, 4)  # an auxiliary head on the same features")
        modules += ("aux",)
    params = ", ".join(f"*{m}.parameters()" for m in modules)
    out.add(f"opt = torch.optim.SGD([{params}], lr=0.1)")
    out.add(f"inputs = torch.randn({STEPS}, 8, 4)")
    out.add(f"targets = torch.randn({STEPS}, 8, 1)")


def _before_loop(a, out):
    """Write what the loop carries: state, a precomputed tensor, a total, a list."""
    if a.reach.startswith("rnn"):
        out.add("h = torch.zeros(8, 8)")
    elif a.reach.startswith("lstm"):
        out.add("h, c = torch.zeros(8, 8), torch.zeros(8, 8)")
    elif a.reach == "before":
        out.add(
            "weight = encoder.weight / encoder.weight.norm(dim=1, keepdim=True)  # normalised once",
            "forward",
        )
    elif a.reach == "before-detached":
        out.add("weight = (encoder.weight / encoder.weight.norm(dim=1, keepdim=True)).detach()")
    elif a.reach.startswith("total"):
        out.add("running_loss = 0.0")
    elif a.reach.startswith("kept"):
        out.add("replay = []")


def _gan_step(a, out):
    retain = "retain_graph=True" if a.retain == "retain" else ""
    fake_for_d = "fake.detach()" if a.fixed else "fake"
    out.add("    fake = G(z)", "forward")
    out.add("    opt_d.zero_grad()")
    out.add(
        f"    d_loss = bce(D(real), real_label) + bce(D({fake_for_d}), fake_label)",
    )
    out.add(f"    d_loss.backward({retain})", "frees")
    out.add("    opt_d.step()")
    out.add("    opt_g.zero_grad()")
    out.add("    g_loss = bce(D(fake), real_label)")
    out.add("    g_loss.backward()", "raises")
    out.add("    opt_g.step()")


def _features(a, out):
    """Write the forward pass up to the features the heads read; return their name."""
    if a.reach == "rnn":
        out.add("    h = cell(x, h)  # h carries the previous step's graph", "forward")
        return "h"
    if a.reach == "rnn-detached":
        out.add("    h = cell(x, h)")
        return "h"
    if a.reach.startswith("lstm"):
        out.add("    h, c = cell(x, (h, c))", "forward")
        return "h"
    if a.reach in ("before", "before-detached"):
        out.add("    feat = torch.tanh(x @ weight.T + encoder.bias)")
        return "feat"
    if a.reach == "inside":
        out.add("    weight = encoder.weight / encoder.weight.norm(dim=1, keepdim=True)")
        out.add("    feat = torch.tanh(x @ weight.T + encoder.bias)")
        return "feat"
    tags = ("forward",) if a.calls == "shared" or a.when == "saved" else ()
    out.add("    feat = torch.tanh(encoder(x))", *tags)
    return "feat"


def _loss_and_backward(a, out, feat):
    """Write the loss or losses and the step's backward calls."""
    retain = "retain_graph=True" if a.retain == "retain" else ""
    mse = "nn.functional.mse_loss"
    if a.reach == "kept":
        out.add(f"    replay.append(head({feat}))  # the output is kept, with its graph", "forward")
        out.add(f"    loss = {mse}(torch.cat(replay), targets[:step].flatten(0, 1))")
        out.add(f"    loss.backward({retain})", "raises", "frees")
        return
    if a.reach == "kept-inputs":
        out.add("    replay.append(x)  # keep the input; the forward pass runs again each step")
        out.add("    feat = torch.tanh(encoder(torch.cat(replay)))")
        out.add(f"    loss = {mse}(head(feat), targets[:step].flatten(0, 1))")
        out.add("    loss.backward()")
        return
    if a.calls == "grad":
        option = {"none": "", "retain": ", retain_graph=True", "create": ", create_graph=True"}
        out.add(f"    pred = head({feat})", "forward")
        out.add(f"    (grad_x,) = torch.autograd.grad(pred.sum(), x{option[a.retain]})", "frees")
        out.add("    penalty = (grad_x.norm(dim=1) - 1).pow(2).mean()  # a gradient penalty")
        out.add(f"    loss = {mse}(pred, y) + penalty")
        out.add("    loss.backward()", "raises")
        return
    if a.calls in ("shared", "summed"):
        out.add(f"    loss_main = {mse}(head({feat}), y)")
        out.add(f"    loss_aux = aux({feat}).pow(2).mean()")
        if a.calls == "summed":
            out.add("    (loss_main + loss_aux).backward()")
        else:
            out.add(f"    loss_main.backward({retain})", "frees")
            out.add("    loss_aux.backward()", "raises")
        return
    tags = ("forward",) if a.calls == "twice" or a.reach == "total" else ()
    out.add(f"    loss = {mse}(head({feat}), y)", *tags)
    if a.reach == "total":
        out.add("    running_loss = running_loss + loss  # a running total, with its graph")
        out.add(f"    running_loss.backward({retain})", "raises", "frees")
        return
    if a.reach == "total-item":
        out.add("    running_loss += loss.item()  # a number, without the graph")
    if a.calls == "twice":
        out.add(f"    loss.backward({retain})", "frees")
        out.add(
            "    loss.backward()  # again, e.g. in a helper that logs the gradient norm", "raises"
        )
        return
    if a.when == "saved":
        out.add(f"    loss.backward({retain})", "frees")
        out.add(
            f"    saved = {feat}.grad_fn._saved_result  # e.g. a debugging hook reads what tanh saved",
            "raises",
        )
        return
    if a.reach == "saved-before":
        out.add(f"    saved = {feat}.grad_fn._saved_result  # read before backward frees it")
    tags = ("raises", "frees") if a.reach in ("rnn", "lstm", "before") else ()
    out.add(f"    loss.backward({retain})", *tags)


def _lines(a):
    out = _Lines()
    _models(a, out)
    _before_loop(a, out)
    out.add("")
    if a.calls == "gan":
        out.add("for step, (z, real) in enumerate(zip(noise, data), start=1):")
        _gan_step(a, out)
        return out
    out.add("for step, (x, y) in enumerate(zip(inputs, targets), start=1):")
    if a.calls == "grad":
        out.add("    x = x.clone().requires_grad_()  # the penalty needs d(pred)/dx")
    out.add("    opt.zero_grad()")
    feat = _features(a, out)
    _loss_and_backward(a, out, feat)
    out.add("    opt.step()")
    if a.reach == "rnn-detached":
        out.add("    h = h.detach()  # cut the graph at the step boundary")
    if a.reach == "lstm":
        out.add("    h = h.detach()  # only h is detached; c keeps its graph")
    if a.reach == "lstm-detached":
        out.add("    h, c = h.detach(), c.detach()  # cut both at the step boundary")
    return out


def build_loop(answers):
    """Write the training loop for these answers as Python source."""
    return _lines(answers).source()


CAUSES = {
    "twice": "same-loss-twice",
    "shared": "shared-forward",
    "gan": "shared-forward",
    "grad": "shared-forward",
}


def expected(answers):
    """Say which lines of build_loop(answers) the diagnoser should name, 1-based.

    raises: the line whose call raises this error; frees: the earlier backward or grad call
    that freed the saved tensors; forward: the forward line that created the node whose saved
    tensors were gone; cause: 'same-loss-twice', 'carried-state', 'shared-forward',
    'saved-read', or None. A loop that does not raise this error (it was fixed, or
    retain_graph=True let it run on) has None everywhere.
    """
    if answers.fixed or answers.retain != "none":
        return {"raises": None, "frees": None, "forward": None, "cause": None}
    tags = _lines(answers).tags
    if answers.when == "saved":
        cause = "saved-read"
    elif answers.when == "later":
        cause = "carried-state"
    else:
        cause = CAUSES[answers.calls]
    return {
        "raises": tags.get("raises"),
        "frees": tags.get("frees"),
        "forward": tags.get("forward"),
        "cause": cause,
    }
