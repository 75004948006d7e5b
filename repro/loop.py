"""Build the training loops behind the checker's four answers, and the variants that decide them.

The checker on the page asks, in the reader's terms:
  when    when the error appears: on the first step, on a later step, or when code reads a
          saved tensor after backward
  calls   the step's backward calls: one; the same loss twice; two losses sharing a forward
          pass; a GAN's D step then G step; a GAN that trains G first; autograd.grad then
          backward; two losses from one torch.distributions object; actor-critic on one trunk
  reach   what reaches into an earlier step: nothing; state carried over (an RNN or GRU hidden
          state, a REINFORCE moving-average baseline, unrolled meta-learning's weights); an
          LSTM whose h is detached but c is not; an LSTM whose (h, c) is not detached at all; a
          tensor computed before the loop from trained parameters; features from a frozen model
          computed before the loop; a running total of the loss; outputs the loss trains through
          again (replay); a tensor kept in a list or on self (a past output, a cache built from
          trained weights, or one read in the same step: what decides the fix)
  retain  whether retain_graph=True (or create_graph=True) was added to the first call

The four answers do not settle everything: whether an optimizer step() runs between a kept
graph's two uses, whether an RNN is a cell or runs over a sequence, whether G's loss reuses D's
output, whether a tensor kept on self is a past output or a cache, whether a single backward()
sits in a closure L-BFGS calls again. Each such combination is captured as several loops, one per variant (Answers.variant),
and the verdict says which does what. Some variants are the non-fixes readers try (DEAD_ENDS),
run to show what they do.

Every loop is a small seeded training step: nn modules, an optimizer, zero_grad, backward,
step. build_loop() writes it as Python source; the capture runs that source as written and the
page shows it. fix() names the loop an expert writes instead; build_loop(fix(a)) writes it.
While writing the lines the builder tags the ones the diagnoser needs (expected()).
"""

from dataclasses import dataclass, replace

STEPS = 4

WHEN = ("first", "later", "saved")
CALLS = ("one", "twice", "shared", "gan", "gfirst", "grad", "dist", "ac")
REACH = (
    "nothing",
    "rnn",
    "lstm",
    "lstm-both",
    "before",
    "frozen",
    "total",
    "kept",
    "bank",
)
RETAIN = ("none", "retain", "create")

# Variants that are other shapes of the reader's code (the answers cannot tell them apart).
SHAPES = (
    "step",
    "cell",
    "seq",
    "reuse",
    "wgan",
    "attr",
    "cache",
    "same",
    "baseline",
    "meta",
    "closure",
)
# Variants that are a non-fix readers try instead of the fix.
DEAD_ENDS = ("zerograd", "nograd", "nodetach", "fake", "tuple", "detach", "sum")

# What an expert writes instead, answer by answer (values only fixed loops use).
FIXED_CALLS = {
    "one": "one",
    "twice": "one",
    "shared": "summed",
    "gan": "gan",
    "gfirst": "gfirst",
    "grad": "grad",
    "dist": "dsummed",
    "ac": "acdetach",
}
FIXED_REACH = {
    "nothing": "nothing",
    "rnn": "rnn-detached",
    "lstm": "lstm-detached",
    "lstm-both": "both-detached",
    "before": "inside",
    "frozen": "nograd",
    "total": "total-item",
    "kept": "kept-inputs",
    "bank": "bank-detached",
}
# Variants whose fix is a loop of their own shape; every other variant shares its combination's.
OWN_FIX = ("cell", "seq", "attr", "wgan", "cache", "same", "baseline", "meta", "closure")


@dataclass(frozen=True)
class Answers:
    """One combination of the checker's four answers and a variant of it (or a fixed loop)."""

    when: str
    calls: str
    reach: str
    retain: str
    variant: str = ""
    """'' for the combination's main loop, else one of SHAPES or DEAD_ENDS."""

    @property
    def combo(self):
        """Name the combination: the four answers joined by '-'."""
        return f"{self.when}-{self.calls}-{self.reach}-{self.retain}"

    @property
    def key(self):
        """Name the loop: the combination, and '~variant' for a variant."""
        return self.combo + (f"~{self.variant}" if self.variant else "")

    @property
    def fixed(self):
        """Whether this is a fixed loop rather than a reader's answers."""
        return self.when == "fixed"

    @property
    def cell(self):
        """Whether the loop is a notebook whose backward cell is run again: as a variant of the
        first step, or as the answers of a reader who says it raised the second time they ran it."""
        return self.variant == "cell" or (self.when, self.calls) == ("later", "twice")

    @property
    def meta(self):
        """Whether the loop is unrolled meta-learning: weights updated through autograd.grad
        with create_graph=True, carried from step to step."""
        return self.variant == "meta" or (self.when, self.calls) in (("later", "grad"),)

    @property
    def closure(self):
        """Whether the loop steps an L-BFGS optimizer with a closure: one backward() in the code,
        called as often as the optimizer calls the closure."""
        return self.variant == "closure" or (self.when, self.calls) == ("first", "one")

    @property
    def gan(self):
        """Whether the loop trains a generator and a discriminator."""
        return self.calls in ("gan", "gfirst") or self.variant == "wgan"


def combinations():
    """List every combination of answers the checker offers, in a fixed order.

    On the first step nothing from an earlier step exists yet, so an error there comes from
    the step's own calls; a single backward call raises there only when an optimizer calls it
    again (L-BFGS and its closure), and otherwise on a later step (through what reaches back)
    or when code reads a saved tensor after it. create_graph=True belongs to autograd.grad (a
    gradient penalty, alone or in a WGAN-GP, or an unrolled meta-learning step whose weights
    carry over). A notebook cell with backward() run again is the same loss twice, and raises
    the second time the cell runs: it is offered on the first step (as a variant) and on a
    later one.
    """
    combos = [Answers("first", "one", "nothing", "none")]  # an L-BFGS closure
    for calls in CALLS[1:]:
        retains = ("none", "retain", "create") if calls in ("gan", "grad") else ("none", "retain")
        combos += [Answers("first", calls, "nothing", retain) for retain in retains]
    for reach in REACH[1:]:
        combos += [Answers("later", "one", reach, retain) for retain in ("none", "retain")]
    # unrolled meta-learning: autograd.grad with create_graph=True, the weights carried over
    combos.append(Answers("later", "grad", "rnn", "create"))
    # a notebook: the cell with backward() raised the second time it ran
    combos += [Answers("later", "twice", "nothing", retain) for retain in ("none", "retain")]
    combos += [Answers("saved", "one", "nothing", retain) for retain in ("none", "retain")]
    return combos


def variants(combo):
    """The variant names captured for a combination besides its main loop, in order."""
    c, r, retain = combo.calls, combo.reach, combo.retain
    if combo.cell or combo.meta or combo.closure:
        return []  # the re-run cell, the unrolled step, the closure: the main loop itself
    found = []
    if retain == "retain" and c in ("twice", "shared", "dist", "ac"):
        found.append("step")  # an optimizer step() between the kept graph's two uses
    if c == "twice" and retain != "create":
        found.append("cell")
    if c == "gan" and retain != "create":
        found.append("reuse")
    if (c == "grad" and retain == "create") or (c == "gan" and retain != "create"):
        # a WGAN-GP, answered any way: its create_graph=True is no retry, and the canonical code's
        # retain_graph=True beside it may be counted as one
        found.append("wgan")
    if r in ("rnn", "lstm"):
        found.append("seq")
    if r == "bank":
        # what decides the fix: a past output (detach), a cache from trained weights (compute
        # it in each forward), an attribute read in the same step (nothing to fix)
        found += ["attr", "cache"] + (["same"] if retain == "none" else [])
    if (r, retain) == ("rnn", "none"):
        found += ["baseline", "meta"]  # other state carried across steps, not detached
    if (c, retain) == ("twice", "none"):
        found.append("closure")  # L-BFGS calls the closure, and its backward(), again
    if retain == "none":
        found += {
            "twice": ["zerograd", "nograd"],
            "rnn": ["nodetach", "fake"],
            "lstm-both": ["tuple"],
            "before": ["detach"],
            "ac": ["sum"],
        }.get(c if c != "one" else r, [])
    return found


def all_answers():
    """List every loop the checker captures: each combination, then its variants."""
    return [replace(a, variant=v) for a in combinations() for v in ("", *variants(a))]


def fix(answers):
    """Return the answers of the loop an expert writes instead of this one."""
    if answers.fixed:
        return answers
    if answers.variant == "wgan":
        return Answers("fixed", "gan", "nothing", "create")
    if answers.meta:
        return Answers("fixed", "grad", "rnn-detached", "create", "meta")
    if answers.closure:
        return Answers("fixed", "one", "nothing", "none", "closure")
    retain = "create" if answers.calls == "grad" or answers.retain == "create" else "none"
    reach = "saved-before" if answers.when == "saved" else FIXED_REACH[answers.reach]
    variant = "cell" if answers.cell else answers.variant if answers.variant in OWN_FIX else ""
    return Answers("fixed", FIXED_CALLS[answers.calls], reach, retain, variant)


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


MSE = "nn.functional.mse_loss"


def _retain(a):
    return "retain_graph=True" if a.retain == "retain" else ""


def _header(out):
    out.add("import torch")
    out.add("from torch import nn")
    out.add("")
    out.add("torch.manual_seed(0)")


def _gan(a, out):
    """A GAN step: D then G, G then D, or a WGAN-GP critic with a gradient penalty."""
    out.add("G = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 4))")
    out.add("D = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))")
    out.add("opt_g = torch.optim.SGD(G.parameters(), lr=0.1)")
    out.add("opt_d = torch.optim.SGD(D.parameters(), lr=0.1)")
    wgan = a.variant == "wgan" or (a.calls == "gan" and a.retain == "create")
    if not wgan:
        out.add("bce = nn.BCEWithLogitsLoss()")
    out.add(f"noise = torch.randn({STEPS}, 8, 2)")
    out.add(f"data = torch.randn({STEPS}, 8, 4)")
    if not wgan:
        out.add("real_label, fake_label = torch.ones(8, 1), torch.zeros(8, 1)")
    out.add("")
    out.add("for step, (z, real) in enumerate(zip(noise, data), start=1):")
    out.add("    fake = G(z)", *(() if a.variant == "reuse" else ("forward",)))
    fake_for_d = "fake.detach()" if a.fixed else "fake"
    retain = _retain(a)
    if wgan:
        out.add("    opt_d.zero_grad()")
        out.add("    eps = torch.rand(8, 1)")
        out.add(f"    mix = (eps * real + (1 - eps) * {fake_for_d}).requires_grad_()")
        both = ", retain_graph=True" if a.retain == "retain" else ""
        out.add(
            f"    (grad_mix,) = torch.autograd.grad(D(mix).sum(), mix, create_graph=True{both})"
        )
        out.add("    penalty = (grad_mix.norm(dim=1) - 1).pow(2).mean()  # the gradient penalty")
        out.add(f"    d_loss = D({fake_for_d}).mean() - D(real).mean() + 10 * penalty")
        out.add("    d_loss.backward()", "frees")
        out.add("    opt_d.step()")
        out.add("    opt_g.zero_grad()")
        out.add("    g_loss = -D(fake).mean()")
        out.add("    g_loss.backward()", "raises")
        out.add("    opt_g.step()")
        return
    if a.calls == "gfirst":
        out.add("    opt_g.zero_grad()")
        out.add("    g_loss = bce(D(fake), real_label)")
        out.add(f"    g_loss.backward({retain})", "frees")
        out.add("    opt_g.step()")
        out.add("    opt_d.zero_grad()")
        out.add(f"    d_loss = bce(D(real), real_label) + bce(D({fake_for_d}), fake_label)")
        out.add("    d_loss.backward()", "raises")
        out.add("    opt_d.step()")
        return
    out.add("    opt_d.zero_grad()")
    if a.variant == "reuse":
        out.add("    out_fake = D(fake)", "forward")
        out.add("    d_loss = bce(D(real), real_label) + bce(out_fake, fake_label)")
    else:
        out.add(f"    d_loss = bce(D(real), real_label) + bce(D({fake_for_d}), fake_label)")
    out.add(f"    d_loss.backward({retain})", "frees")
    out.add("    opt_d.step()")
    out.add("    opt_g.zero_grad()")
    if a.variant == "reuse":
        out.add("    g_loss = bce(out_fake, real_label)  # D's output from the D step, reused")
    else:
        out.add("    g_loss = bce(D(fake), real_label)")
    out.add("    g_loss.backward()", "raises")
    out.add("    opt_g.step()")


def _policy(a, out):
    """A policy-gradient step: one torch.distributions object, or an actor-critic on one trunk."""
    retain = _retain(a)
    ac = a.calls in ("ac", "acdetach")
    if ac:
        out.add("trunk = nn.Linear(4, 8)")
        out.add("actor = nn.Linear(8, 3)")
        out.add("critic = nn.Linear(8, 1)")
        params = "[*trunk.parameters(), *actor.parameters(), *critic.parameters()]"
        out.add(f"opt = torch.optim.SGD({params}, lr=0.1)")
    else:
        out.add("policy = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))")
        out.add("opt = torch.optim.SGD(policy.parameters(), lr=0.1)")
    out.add(f"inputs = torch.randn({STEPS}, 8, 4)")
    out.add(f"actions = torch.randint(3, ({STEPS}, 8))")
    out.add(f"returns = torch.randn({STEPS}, 8)")
    out.add("")
    out.add("for step, (x, act, ret) in enumerate(zip(inputs, actions, returns), start=1):")
    out.add("    opt.zero_grad()")
    if ac:
        out.add("    feat = torch.tanh(trunk(x))")
        out.add("    dist = torch.distributions.Categorical(logits=actor(feat))")
        out.add("    advantage = ret - critic(feat).squeeze(1)", "forward")
        adv = "advantage.detach()" if a.fixed else "advantage"
        out.add(f"    actor_loss = -(dist.log_prob(act) * {adv}).mean()")
        out.add("    critic_loss = advantage.pow(2).mean()")
        first, second = "critic_loss", "actor_loss"
        summed = a.fixed or a.variant == "sum"
    else:
        out.add("    dist = torch.distributions.Categorical(logits=policy(x))", "forward")
        out.add("    policy_loss = -(dist.log_prob(act) * ret).mean()")
        out.add("    entropy_loss = -0.01 * dist.entropy().mean()")
        first, second = "policy_loss", "entropy_loss"
        summed = a.fixed
    if summed:
        out.add(
            f"    ({'actor_loss + critic_loss' if ac else 'policy_loss + entropy_loss'}).backward()"
        )
    else:
        out.add(f"    {first}.backward({retain})", "frees")
        if a.variant == "step":
            out.add("    opt.step()  # e.g. a step per loss")
        out.add(f"    {second}.backward()", "raises")
    out.add("    opt.step()")


def _sequence(a, out):
    """An nn.GRU or nn.LSTM over a batch of sequences, its state carried from step to step."""
    lstm = a.reach.startswith(("lstm", "both"))
    out.add(f"rnn = nn.{'LSTM' if lstm else 'GRU'}(4, 8, batch_first=True)")
    out.add("head = nn.Linear(8, 1)")
    out.add("opt = torch.optim.SGD([*rnn.parameters(), *head.parameters()], lr=0.1)")
    out.add(f"inputs = torch.randn({STEPS}, 8, 5, 4)  # each step: 8 sequences of 5 time steps")
    out.add(f"targets = torch.randn({STEPS}, 8, 1)")
    both = a.reach in ("lstm-both", "both-detached")
    if both:
        out.add("hidden = (torch.zeros(1, 8, 8), torch.zeros(1, 8, 8))")
    elif lstm:
        out.add("h, c = torch.zeros(1, 8, 8), torch.zeros(1, 8, 8)")
    else:
        out.add("h = torch.zeros(1, 8, 8)")
    out.add("")
    out.add("for step, (x, y) in enumerate(zip(inputs, targets), start=1):")
    out.add("    opt.zero_grad()")
    if both:
        out.add(
            "    out, hidden = rnn(x, hidden)  # (h, c) carries the previous step's graph",
            "forward",
        )
    elif lstm:
        out.add("    out, (h, c) = rnn(x, (h, c))", "forward")
    else:
        out.add("    out, h = rnn(x, h)  # h carries the previous step's graph", "forward")
    out.add(f"    loss = {MSE}(head(out[:, -1]), y)")
    tags = ("raises", "frees") if not a.fixed else ()
    out.add(f"    loss.backward({_retain(a)})", *tags)
    out.add("    opt.step()")
    _step_end(a, out)


def _step_end(a, out):
    """What the loop does to its carried state at the step boundary."""
    if a.reach == "rnn-detached":
        out.add("    h = h.detach()  # cut the graph at the step boundary")
    if a.variant == "nodetach":
        out.add("    h.detach()  # returns a detached copy, which is thrown away")
    if a.reach == "lstm":
        out.add("    h = h.detach()  # only h is detached; c keeps its graph")
    if a.reach == "lstm-detached":
        out.add("    h, c = h.detach(), c.detach()  # cut both at the step boundary")
    if a.variant == "tuple":
        out.add("    hidden = hidden.detach()  # hidden is the tuple (h, c)")
    if a.reach == "both-detached":
        out.add("    hidden = tuple(t.detach() for t in hidden)  # cut both h and c")


def _smooth(a, out):
    """A module that keeps its last output as an attribute and averages the next one with it."""
    keep = "y.detach()" if a.fixed else "y"
    out.add("")
    out.add("")
    out.add("class Smooth(nn.Module):")
    out.add("    def __init__(self):")
    out.add("        super().__init__()")
    out.add("        self.encoder = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 8))")
    out.add("        self.prev = None")
    out.add("")
    out.add("    def forward(self, x):")
    out.add("        y = torch.tanh(self.encoder(x))", "forward")
    out.add("        if self.prev is not None:")
    out.add("            y = (y + self.prev) / 2")
    out.add(f"        self.prev = {keep}  # the output, kept on the module")
    out.add("        return y")
    out.add("")
    out.add("")
    _module_step(out, "Smooth", 8)
    tags = ("raises", "frees") if not a.fixed else ()
    out.add(f"    loss.backward({_retain(a)})", *tags)
    out.add("    opt.step()")


def _module_step(out, module, width):
    """A module and a head trained by one SGD: the loop up to its loss, `loss` on `model(x)`."""
    out.add(f"model = {module}()")
    out.add(f"head = nn.Linear({width}, 1)")
    out.add("opt = torch.optim.SGD([*model.parameters(), *head.parameters()], lr=0.1)")
    out.add(f"inputs = torch.randn({STEPS}, 8, 4)")
    out.add(f"targets = torch.randn({STEPS}, 8, 1)")
    out.add("")
    out.add("for step, (x, y) in enumerate(zip(inputs, targets), start=1):")
    out.add("    opt.zero_grad()")
    out.add(f"    loss = {MSE}(head(model(x)), y)")


def _cell(a, out):
    """A notebook: one cell runs the forward pass, the next backward and step, and is run again."""
    out.add("encoder = nn.Linear(4, 8)")
    out.add("head = nn.Linear(8, 1)")
    out.add("opt = torch.optim.SGD([*encoder.parameters(), *head.parameters()], lr=0.1)")
    out.add("x, y = torch.randn(8, 4), torch.randn(8, 1)")
    forward = (
        "feat = torch.tanh(encoder(x))",
        f"loss = {MSE}(head(feat), y)",
    )
    if not a.fixed:
        out.add("# cell 1: the forward pass")
        out.add(forward[0])
        out.add(forward[1], "forward")
    out.add("")
    out.add("for step in (1, 2):  # cell 2, run twice")
    out.add("    opt.zero_grad()")
    if a.fixed:
        out.add(f"    {forward[0]}  # the forward pass, in the same cell")
        out.add(f"    {forward[1]}")
    tags = ("raises", "frees") if not a.fixed else ()
    out.add(f"    loss.backward({_retain(a)})", *tags)
    out.add("    opt.step()")


def _closure(a, out):
    """An L-BFGS step: the optimizer calls the closure, and the backward() in it, several times."""
    out.add("encoder = nn.Linear(4, 8)")
    out.add("head = nn.Linear(8, 1)")
    out.add("opt = torch.optim.LBFGS([*encoder.parameters(), *head.parameters()], max_iter=4)")
    out.add(f"inputs = torch.randn({STEPS}, 8, 4)")
    out.add(f"targets = torch.randn({STEPS}, 8, 1)")
    out.add("")
    out.add("for step, (x, y) in enumerate(zip(inputs, targets), start=1):")
    forward = f"loss = {MSE}(head(torch.tanh(encoder(x))), y)"
    if not a.fixed:
        out.add(f"    {forward}", "forward")
        out.add("")
    out.add("    def closure():")
    out.add("        opt.zero_grad()")
    if a.fixed:
        out.add(f"        {forward}  # the forward pass, in the closure")
    tags = () if a.fixed else ("raises", "frees")
    out.add("        loss.backward()", *tags)
    out.add("        return loss")
    out.add("")
    out.add("    opt.step(closure)  # L-BFGS calls the closure several times")


def _meta(a, out):
    """Unrolled meta-learning: a learned update rule trained through the weights it updates."""
    out.add("learner = nn.Sequential(nn.Linear(1, 8), nn.Tanh(), nn.Linear(8, 1))  # the rule")
    out.add("opt = torch.optim.SGD(learner.parameters(), lr=0.01)")
    out.add(f"inputs = torch.randn({STEPS}, 8, 4)")
    out.add(f"targets = torch.randn({STEPS}, 8, 1)")
    out.add("w = torch.zeros(4, 1, requires_grad=True)  # the weights the rule updates")
    out.add("")
    out.add("for step, (x, y) in enumerate(zip(inputs, targets), start=1):")
    out.add(f"    inner_loss = {MSE}(x @ w, y)")
    out.add("    (g,) = torch.autograd.grad(inner_loss, w, create_graph=True)")
    out.add("    w = w - learner(g)  # the learned update, kept in the graph", "forward")
    out.add(f"    loss = {MSE}(x @ w, y)  # the meta-loss: how good the update was")
    out.add("    opt.zero_grad()")
    tags = () if a.fixed else ("raises", "frees")
    out.add("    loss.backward()", *tags)
    out.add("    opt.step()")
    if a.fixed:
        out.add("    w = w.detach().requires_grad_()  # the next unroll starts here")


def _baseline(a, out):
    """REINFORCE with a moving-average baseline carried across episodes."""
    out.add("policy = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))")
    out.add("opt = torch.optim.SGD(policy.parameters(), lr=0.1)")
    out.add(f"inputs = torch.randn({STEPS}, 8, 4)")
    out.add(f"returns = torch.randn({STEPS}, 8)")
    out.add("baseline = 0.0")
    out.add("")
    out.add("for step, (x, ret) in enumerate(zip(inputs, returns), start=1):")
    out.add("    opt.zero_grad()")
    out.add("    dist = torch.distributions.Categorical(logits=policy(x))")
    out.add("    act = dist.sample()")
    out.add("    reward = ret + dist.entropy() / 100  # an entropy bonus")
    mean = "reward.mean().item()" if a.fixed else "reward.mean()"
    out.add(f"    baseline = 0.9 * baseline + 0.1 * {mean}  # a moving average", "forward")
    out.add("    loss = -(dist.log_prob(act) * (reward - baseline)).mean()")
    tags = () if a.fixed else ("raises", "frees")
    out.add("    loss.backward()", *tags)
    out.add("    opt.step()")


def _attention(a, out):
    """A module that keeps a tensor on self: a position bias from trained weights, cached at the
    first forward, or attention weights a regulariser reads in the same step."""
    cache = a.variant == "cache"
    out.add("")
    out.add("")
    out.add("class Attention(nn.Module):")
    out.add("    def __init__(self):")
    out.add("        super().__init__()")
    out.add("        self.proj = nn.Linear(4, 8)")
    if cache:
        out.add("        self.rel = nn.Embedding(15, 1)  # a relative position bias, trained")
        out.add("        self.bias = None")
    else:
        out.add("        self.weights = None")
    out.add("")
    out.add("    def forward(self, x):")
    out.add("        q = self.proj(x)")
    if cache:
        out.add("        pos = torch.arange(8)")
        bias = "self.rel(pos[:, None] - pos[None, :] + 7).squeeze(-1)"
        if a.fixed:
            out.add(f"        bias = {bias}  # computed in each forward")
        else:
            out.add("        if self.bias is None:  # cached at the first forward")
            out.add(f"            self.bias = {bias}", "forward")
        scores = "q @ q.T + " + ("bias" if a.fixed else "self.bias")
        out.add(f"        return ({scores}).softmax(-1) @ x")
    else:
        out.add("        self.weights = (q @ q.T).softmax(-1)  # kept for the regulariser")
        out.add("        return self.weights @ x")
    out.add("")
    out.add("")
    _module_step(out, "Attention", 4)
    if not cache:
        out.add("    loss = loss + 0.01 * model.weights.pow(2).sum()  # read in the same step")
    tags = ("raises", "frees") if cache and not a.fixed else ()
    out.add(f"    loss.backward({_retain(a)})", *tags)
    out.add("    opt.step()")


def _models(a, out):
    """Write the models, data and optimizer of the one-model loops."""
    if a.reach.startswith("rnn"):
        out.add("cell = nn.RNNCell(4, 8)")
        modules = ("cell", "head")
    elif a.reach.startswith("lstm"):
        out.add("cell = nn.LSTMCell(4, 8)")
        modules = ("cell", "head")
    elif a.reach in ("frozen", "nograd"):
        out.add("pretrained = nn.Linear(4, 8)  # frozen: not in the optimizer")
        modules = ("head",)
    elif a.calls in ("shared", "summed") or a.reach.startswith("bank"):
        # two layers, as real encoders have: the second saves its weight for the backward pass
        out.add("encoder = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 8))")
        modules = ("encoder", "head")
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
        normalised = "encoder.weight / encoder.weight.norm(dim=1, keepdim=True)"
        if a.variant == "detach":
            out.add(f"weight = ({normalised}).detach()")
        else:
            out.add(f"weight = {normalised}  # normalised once", "forward")
    elif a.reach == "frozen":
        out.add("features = torch.tanh(pretrained(inputs))  # computed once", "forward")
    elif a.reach == "nograd":
        out.add("with torch.no_grad():  # the frozen model needs no graph")
        out.add("    features = torch.tanh(pretrained(inputs))  # computed once")
    elif a.reach.startswith("total"):
        out.add("running_loss = 0.0")
    elif a.reach.startswith(("kept", "bank")):
        out.add(f"{'replay' if a.reach.startswith('kept') else 'bank'} = []")


def _features(a, out):
    """Write the forward pass up to the features the heads read; return their name."""
    if a.reach == "rnn":
        out.add("    h = cell(x, h)", "forward")
        return "h"
    if a.reach == "rnn-detached":
        out.add("    h = cell(x, h)")
        return "h"
    if a.reach.startswith("lstm"):
        out.add("    h, c = cell(x, (h, c))", "forward")
        return "h"
    if a.reach in ("before",):
        out.add("    feat = torch.tanh(x @ weight.T + encoder.bias)")
        return "feat"
    if a.reach == "inside":
        out.add("    weight = encoder.weight / encoder.weight.norm(dim=1, keepdim=True)")
        out.add("    feat = torch.tanh(x @ weight.T + encoder.bias)")
        return "feat"
    tags = ("forward",) if a.calls == "shared" or a.when == "saved" or a.reach == "bank" else ()
    out.add("    feat = torch.tanh(encoder(x))", *tags)
    return "feat"


def _loss_and_backward(a, out, feat):
    """Write the loss or losses and the step's backward calls."""
    retain = _retain(a)
    if a.reach == "kept":
        out.add(f"    replay.append(head({feat}))  # the output is kept, with its graph", "forward")
        out.add(f"    loss = {MSE}(torch.cat(replay), targets[:step].flatten(0, 1))")
        out.add(f"    loss.backward({retain})", "raises", "frees")
        return
    if a.reach == "kept-inputs":
        out.add("    replay.append(x)  # keep the input; the forward pass runs again each step")
        out.add("    feat = torch.tanh(encoder(torch.cat(replay)))")
        out.add(f"    loss = {MSE}(head(feat), targets[:step].flatten(0, 1))")
        out.add("    loss.backward()")
        return
    if a.reach.startswith("bank"):
        kept = f"{feat}.detach()" if a.fixed else feat
        out.add(f"    bank.append({kept})  # a memory bank of features")
        out.add(f"    similarity = ({feat} @ torch.cat(bank).T).pow(2).mean()")
        out.add(f"    loss = {MSE}(head({feat}), y) + 0.1 * similarity")
        tags = ("raises", "frees") if not a.fixed else ()
        out.add(f"    loss.backward({retain})", *tags)
        return
    if a.calls == "grad":
        option = {"none": "", "retain": ", retain_graph=True", "create": ", create_graph=True"}
        out.add(f"    pred = head({feat})", "forward")
        out.add(f"    (grad_x,) = torch.autograd.grad(pred.sum(), x{option[a.retain]})", "frees")
        out.add("    penalty = (grad_x.norm(dim=1) - 1).pow(2).mean()  # a gradient penalty")
        out.add(f"    loss = {MSE}(pred, y) + penalty")
        out.add("    loss.backward()", "raises")
        return
    if a.calls in ("shared", "summed"):
        out.add(f"    loss_main = {MSE}(head({feat}), y)")
        out.add(f"    loss_aux = aux({feat}).pow(2).mean()")
        if a.calls == "summed":
            out.add("    (loss_main + loss_aux).backward()")
        else:
            out.add(f"    loss_main.backward({retain})", "frees")
            if a.variant == "step":
                out.add("    opt.step()  # e.g. a step per loss")
            out.add("    loss_aux.backward()", "raises")
        return
    tags = ("forward",) if a.calls == "twice" or a.reach == "total" else ()
    out.add(f"    loss = {MSE}(head({feat}), y)", *tags)
    if a.reach == "total":
        out.add("    running_loss = running_loss + loss  # a running total, with its graph")
        out.add(f"    running_loss.backward({retain})", "raises", "frees")
        return
    if a.reach == "total-item":
        out.add("    running_loss += loss.item()  # a number, without the graph")
    if a.calls == "twice":
        out.add(f"    loss.backward({retain})", "frees")
        between = {
            "zerograd": "    opt.zero_grad()  # clear the gradients first",
            "step": "    opt.step()",
        }.get(a.variant)
        if between:
            out.add(between)
        again = "loss.backward()  # again, e.g. in a helper that logs the gradient norm"
        if a.variant == "nograd":
            out.add("    with torch.no_grad():")
            out.add(f"        {again}", "raises")
        else:
            out.add(f"    {again}", "raises")
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
    if a.variant == "fake":
        out.add("    loss.detach().requires_grad_().backward()  # silences the error")
        return
    tags = ("raises", "frees") if a.reach in ("rnn", "lstm", "before", "frozen") else ()
    out.add(f"    loss.backward({retain})", *tags)


def _lines(a):
    out = _Lines()
    _header(out)
    special = {"cache": _attention, "same": _attention, "baseline": _baseline}
    if a.closure or a.meta or a.variant in special:
        (_closure if a.closure else _meta if a.meta else special[a.variant])(a, out)
        return out
    if a.gan:
        _gan(a, out)
        return out
    if a.calls in ("dist", "dsummed", "ac", "acdetach"):
        _policy(a, out)
        return out
    if a.variant == "seq" or a.reach in ("lstm-both", "both-detached"):
        _sequence(a, out)
        return out
    if a.variant == "attr":
        _smooth(a, out)
        return out
    if a.cell:
        _cell(a, out)
        return out
    _models(a, out)
    _before_loop(a, out)
    out.add("")
    if a.reach in ("frozen", "nograd"):
        out.add("for step, (feat, y) in enumerate(zip(features, targets), start=1):")
        out.add("    opt.zero_grad()")
        _loss_and_backward(a, out, "feat")
        out.add("    opt.step()")
        return out
    out.add("for step, (x, y) in enumerate(zip(inputs, targets), start=1):")
    if a.calls == "grad":
        out.add("    x = x.clone().requires_grad_()  # the penalty needs d(pred)/dx")
    out.add("    opt.zero_grad()")
    feat = _features(a, out)
    _loss_and_backward(a, out, feat)
    out.add("    opt.step()")
    _step_end(a, out)
    return out


def build_loop(answers):
    """Write the training loop for these answers as Python source."""
    return _lines(answers).source()


CAUSES = {
    "twice": "same-loss-twice",
    "shared": "shared-forward",
    "gan": "shared-forward",
    "gfirst": "shared-forward",
    "grad": "shared-forward",
    "dist": "shared-forward",
    "ac": "shared-forward",
}


def raises_this_error(answers):
    """Whether the loop raises 'Trying to backward through the graph a second time'.

    Without retain_graph=True every reader's loop does, except a dead end that silences it or
    fails first; a WGAN-GP whose critic keeps the generator's graph does however its penalty's
    call is answered; otherwise with retain_graph=True or create_graph=True none does.
    """
    if answers.fixed or answers.variant in ("fake", "tuple", "detach", "sum", "same"):
        return False
    if answers.meta:
        return True  # its create_graph=True is the method, not a retry
    if answers.variant == "wgan":
        return True  # the critic's backward frees G's graph, whatever the penalty's options
    if answers.retain == "create":
        return answers.gan
    return answers.retain == "none"


def expected(answers):
    """Say which lines of build_loop(answers) the diagnoser should name, 1-based.

    raises: the line whose call raises this error; frees: the earlier backward or grad call
    that freed the saved tensors; forward: the forward line that created the node whose saved
    tensors were gone; cause: 'same-loss-twice', 'carried-state', 'shared-forward',
    'saved-read', or None. A loop that does not raise this error (it was fixed, a dead end
    silenced it, or retain_graph=True let it run on) has None everywhere.
    """
    if not raises_this_error(answers):
        return {"raises": None, "frees": None, "forward": None, "cause": None}
    tags = _lines(answers).tags
    if answers.when == "saved":
        cause = "saved-read"
    elif answers.cell or answers.closure:
        cause = "same-loss-twice"
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
