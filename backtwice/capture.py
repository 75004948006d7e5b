"""Run the scenarios in a child interpreter and turn its report into a Snapshot."""

import datetime
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from . import manifest, reuse
from .child import HARNESS, Child, quoted
from .errors import CaptureError, InputError
from .snapshot import (
    SCHEMA,
    Anomaly,
    CaseRun,
    Diagnosis,
    Environment,
    FixedRun,
    Grad,
    LoopRun,
    Output,
    Place,
    Raised,
    ScenarioRun,
    Snapshot,
    Step,
    Traversal,
)

STARTUP_TIMEOUT = 180.0  # importing torch on a cold disk can take a while


@dataclass(frozen=True)
class Job:
    """One piece of source for the child to run."""

    id: str
    """The scenario id, or 'loop <key>' for a checker loop."""
    file: str
    """The file name the source is compiled under (tracebacks name it)."""
    source: str
    """The source text that runs."""
    timeout: float
    """Seconds it may take."""
    where: str
    """How to name it in an error."""


def scenario_jobs(scenarios):
    """Make a job of each scenario, from the text the manifest read (the text that is hashed)."""
    return [Job(s.id, str(s.path.resolve()), s.source, s.timeout, str(s.path)) for s in scenarios]


def loop_jobs(builder, repro):
    """Make a job of each of the checker's loops and of each distinct fixed loop."""
    where = str(Path(repro) / manifest.LOOP_BUILDER)
    answers = builder.all_answers()
    fixes = {builder.fix(a).key: builder.fix(a) for a in answers}
    return [
        Job(
            f"{kind} {a.key}",
            f"<loop {a.key}>",
            builder.build_loop(a),
            manifest.DEFAULT_TIMEOUT,
            where,
        )
        for kind, group in (("loop", answers), ("fix", fixes.values()))
        for a in group
    ]


def case_jobs(cases):
    """Make a job of each diagnoser case, from the text the manifest read."""
    return [
        Job(
            f"case {c.name}", str(c.path.resolve()), c.source, manifest.DEFAULT_TIMEOUT, str(c.path)
        )
        for c in cases
    ]


def modules(repro):
    """The modules the harness installs from the text the snapshot hashes: the scenarios'
    support.py, and the diagnoser it runs every scenario under."""
    found = {
        "backtwice_diagnose": {
            "file": str(manifest.DIAGNOSER_FILE),
            "source": repro.sources[manifest.DIAGNOSER],
        }
    }
    if manifest.SUPPORT in repro.sources:
        found["support"] = {
            "file": str((repro.folder / manifest.SUPPORT).resolve()),
            "source": repro.sources[manifest.SUPPORT],
        }
    return found


def _sent(job):
    """A job as the child reads it."""
    return {"id": job.id, "file": job.file, "source": job.source}


def run_child(python, repro, jobs, later=None, meanwhile=None, child=None):
    """Run the jobs in one child; return (environment dict, results by job id, seconds the
    jobs took once it was ready).

    `later`, if given, is called with the environment once the child is ready and returns more
    jobs to run after these. `meanwhile`, if given, is called once the child has started, while
    it imports torch. `child`, if given, is a Child of `python` started earlier, which this
    closes; otherwise one is started now.
    """
    child = child or Child(python)
    results = {}
    try:
        child.send(
            {
                "repro": str(repro.folder.resolve()),
                "modules": modules(repro),
                "jobs": [_sent(job) for job in jobs],
            }
        )
        if meanwhile is not None:
            meanwhile()
        try:
            ready = child.next(STARTUP_TIMEOUT)
        except TimeoutError:
            raise CaptureError(
                python, f"did not import torch within {STARTUP_TIMEOUT:.0f} s; nothing was written"
            ) from None
        if ready is None:
            how, last = child.died()
            hint = "install torch in it" if "torch" in last else "check that it runs"
            raise CaptureError(
                python,
                f"{how} before it could run a scenario{last}; {hint}; nothing was written",
            )
        started = time.perf_counter()
        more = [] if later is None else later(ready["environment"])
        child.more([_sent(job) for job in more])
        starts = {}
        for job in [*jobs, *more]:
            done = _await_done(child, job, starts)
            starts.pop(job.id, None)
            if "crashed" in done:
                crash = done["crashed"]
                raise CaptureError(
                    job.where,
                    f"scenario '{job.id}' crashed the capture interpreter: it {crash['how']}"
                    f"{quoted(crash['last'])}; nothing was written",
                )
            result = done["result"]
            if "too_much_output" in result:
                raise CaptureError(
                    job.where,
                    f"scenario '{job.id}' printed too much: {result['too_much_output']}; "
                    "the page shows every printed line, so print less; nothing was written",
                )
            _check_text(job, result)
            results[done["id"]] = result
        seconds = time.perf_counter() - started
    finally:
        child.close()
    return ready["environment"], results, seconds


def _check_text(job, result):
    """Stop on text that cannot be stored as UTF-8: a lone surrogate printed or raised."""
    try:
        json.dumps(result, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = exc.object[exc.start : exc.end].encode("unicode_escape").decode("ascii")
        raise CaptureError(
            job.where,
            f"scenario '{job.id}' printed or raised text holding {bad}, a lone surrogate that "
            "is not Unicode text and cannot be stored; print valid text; nothing was written",
        ) from None


def _await_done(child, job, starts):
    """Read messages until this job's "done" (they come in job order); enforce its timeout,
    counted from its "start" (later jobs may start while it runs)."""
    while True:
        begun = starts.get(job.id)
        left = job.timeout if begun is None else begun + job.timeout - time.monotonic()
        try:
            message = child.next(max(left, 0.0))
        except TimeoutError:
            raise CaptureError(
                job.where,
                f"scenario '{job.id}' did not finish within {job.timeout:g} s; make it finish or raise its timeout; nothing was written",
            ) from None
        if message is None:
            how, last = child.died()
            # Jobs report in order: any started one not yet reported may be the one it was.
            under_way = list(starts) or [job.id]
            if len(under_way) == 1:
                what = f"while it ran scenario '{under_way[0]}'{last}"
            else:
                names = ", ".join(f"'{ident}'" for ident in under_way[:-1])
                what = (
                    f"while scenarios {names} and '{under_way[-1]}' were under way{last}; "
                    "one of them caused it"
                )
            raise CaptureError(
                job.where, f"the capture interpreter {how} {what}; nothing was written"
            )
        if message.get("event") == "start":
            starts[message.get("id")] = time.monotonic()
        elif message.get("event") == "done" and message.get("id") == job.id:
            return message
        else:
            raise CaptureError(
                job.where, f"unexpected message from the capture interpreter: {message}"
            )


def _raised(result):
    raised = result["raised"]
    if raised is None:
        return None
    return Raised(raised["type"], raised["message"], raised["line"], raised["code"])


def _anomaly(result):
    found = result["anomaly"]
    return None if found is None else Anomaly(found["node"], found["line"], found["code"])


def _outputs(result):
    return tuple(Output(o["line"], o["text"], tuple(o["values"])) for o in result["outputs"])


def scenario_run(scenario, result):
    """Check a scenario's result against its declaration and record it."""
    raised = result["raised"]
    diagnosis = result["diagnosis"]
    if diagnosis is not None and diagnosis["changed"]:
        raise CaptureError(
            scenario.path,
            f"scenario '{scenario.id}' did something else under backtwice/diagnose.py "
            f"({diagnosis['changed']}); the diagnoser must not change what a script does: fix it",
        )
    if scenario.expect == "runs" and raised is not None:
        raise CaptureError(
            scenario.path,
            f"is declared to run but raised {raised['type']}: {raised['message']}\n{raised['frames']}"
            f'Fix the scenario, or set expect = "raises" in repro/scenarios.toml',
            raised["line"],
        )
    if scenario.expect == "raises" and raised is None:
        raise CaptureError(
            scenario.path,
            'is declared to raise but ran to the end; fix the scenario, or set expect = "runs" in repro/scenarios.toml',
        )
    return ScenarioRun(
        scenario.expect,
        _raised(result),
        _anomaly(result),
        _outputs(result),
        _diagnosis(result["diagnosis"]),
    )


def _place(found, call=True):
    if found is None:
        return None
    return Place(found["line"], found["code"], found["call"] if call else None)


def _diagnosis(report):
    """Record the diagnoser's report on a scenario: lines, cause, fix, and the text it prints."""
    if report is None:
        return None
    freed = report["freed_by"]
    node = report["node"]
    return Diagnosis(
        report["cause"],
        _place(report["raised"]),
        _place(freed),
        None if freed is None else freed["retain_graph"],
        None if node is None else node["name"],
        _place(node, call=False),
        report["fix"],
        report["checker"],
        tuple(
            Traversal(_place(d["first"]), _place(d["second"])) for d in report["double_traversals"]
        ),
        report["text"],
    )


def loop_steps(result):
    """Read the measured steps of a loop's result."""
    return tuple(
        Step(
            s["step"],
            tuple(s["depths"]),
            s["saved"],
            tuple(Grad(g["name"], g["norm"]) for g in s["grads"]),
        )
        for s in result["steps"]
    )


def check_agreement(job, result):
    """Stop unless the plain and the measuring run raised alike: same step, line and text."""
    plain, measured = result["raised"], result["measured_raised"]
    same = (plain is None) == (measured is None)
    if same and plain is not None:
        same = (plain["type"], plain["message"], plain["line"], result["raised_step"]) == (
            measured["type"],
            measured["message"],
            measured["line"],
            measured["step"],
        )
    if not same:
        raise CaptureError(
            job.where,
            f"{job.id}: measuring changed what it did ({plain and plain['message']!r} plain, "
            f"{measured and measured['message']!r} measured); fix the measurement in backtwice/harness.py",
        )


def fixed_run(job, result):
    """Record a fixed loop; stop if it raised or its optimizer did not step every step."""
    check_agreement(job, result)
    raised = _raised(result)
    steps = loop_steps(result)
    if raised is not None:
        raise CaptureError(
            job.where,
            f"the fixed loop {job.id[4:]} raised {raised.type}: {raised.message}; change fix() in repro/loop.py",
        )
    if not steps or any(not s.grads for s in steps):
        raise CaptureError(
            job.where, f"the fixed loop {job.id[4:]} did not step an optimizer every step"
        )
    return FixedRun(job.id[4:], job.source, raised, steps)


def loop_run(answers, fixed, job, result):
    """Record one checker loop: plain verdict, step and text, measured steps, and its fix."""
    check_agreement(job, result)
    return LoopRun(
        answers.when,
        answers.calls,
        answers.reach,
        answers.retain,
        job.source,
        _raised(result),
        result["raised_step"],
        loop_steps(result),
        fixed,
    )


def capture(repro, python=None, say=print, today=None, meanwhile=None, reuse_from=None, child=None):
    """Run every scenario and loop under `python` and return the Snapshot; write nothing.

    Every diagnoser case runs too, unless `reuse_from` names a snapshot folder: then a case whose
    record that folder's snapshot of the same torch holds, captured from the same inputs (see
    reuse.py), is not run and its record is taken as it is. `meanwhile` is called while the
    capture interpreter imports torch: other work that can overlap it. `child`, if given, is
    that interpreter, started earlier with Child(python)."""
    python = python or sys.executable
    if not isinstance(repro, manifest.Repro):
        repro = manifest.load(repro)
    harness = reuse.harness_digest(HARNESS)
    scenarios, builder = repro.scenarios, repro.builder
    jobs = scenario_jobs(scenarios)
    if builder is not None:
        jobs += loop_jobs(builder, repro.folder)
    taken = []  # [Reuse], once the environment is known

    def cases_to_run(environment):
        if reuse_from is not None:
            taken.append(reuse.choose(reuse_from, repro, environment, harness))
        records = taken[0].records if taken else {}
        return case_jobs([case for case in repro.cases if case.name not in records])

    env, results, seconds = run_child(python, repro, jobs, cases_to_run, meanwhile, child)
    say(_ran(len(jobs), repro.cases, taken, seconds))
    edited = manifest.changed(repro)
    if edited:
        name = edited[0]
        raise InputError(
            repro.path_of(name),
            "changed while the scenarios ran, so the capture is of text that is no longer there; "
            "run the build again once nothing writes into repro/; nothing was written",
        )
    runs = {s.id: scenario_run(s, results[s.id]) for s in scenarios}
    loops = {}
    if builder is not None:
        by_id = {job.id: job for job in jobs}
        fixes = {}
        for answers in builder.all_answers():
            key = builder.fix(answers).key
            if key not in fixes:
                fixes[key] = fixed_run(by_id[f"fix {key}"], results[f"fix {key}"])
            job = by_id[f"loop {answers.key}"]
            loops[answers.key] = loop_run(answers, fixes[key], job, results[job.id])
    today = today or datetime.datetime.now(datetime.UTC).date().isoformat()
    environment = Environment(
        env["torch"],
        env["build"],
        env["python"],
        env["platform"],
        env["device"],
        env["cuda"],
        today,
        env["variables"],
    )
    records = taken[0].records if taken else {}
    reports = {
        case.name: records[case.name]
        if case.name in records
        else CaseRun(results[f"case {case.name}"]["ended"], results[f"case {case.name}"]["report"])
        for case in repro.cases
    }
    return Snapshot(SCHEMA, environment, repro.hashes(), runs, loops, reports, harness)


def _ran(count, cases, taken, seconds):
    """The line that says what the capture ran, and how many cases it reused and why."""
    if not cases:
        return f"ran {count} scenarios and loops in {seconds:.2f} s"
    if not taken:  # every case was asked for (--check, --recapture)
        return (
            f"ran {count} scenarios and loops and {len(cases)} diagnoser cases in {seconds:.2f} s"
        )
    reused = len(taken[0].records)
    note = (
        f"{reused} reused, unchanged since the capture"
        if reused
        else f"none reused: {taken[0].why}"
    )
    return (
        f"ran {count} scenarios and loops and {len(cases) - reused} of {len(cases)} diagnoser "
        f"cases ({note}) in {seconds:.2f} s"
    )
