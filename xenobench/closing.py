"""How a study run ends, in a few lines (the workflow's onstart and onsuccess, rules/common.smk):

- the closing summary: the planned experiments, each one's valid and invalid trials, the commonest
  causes of the invalid ones; judged (judge): a run fails when a planned experiment has no valid
  trial, or when one cause invalidated most of its trials (`xenobench experiment summary --check`);
- an interrupted run (Ctrl-C): one line saying that the same command resumes, instead of
  Snakemake's account of the interruption, which goes to a log (quiet_interrupt).
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from .layout import chosen_reasons, point_id, trial_results

#: the share of a run's trials one cause may invalidate before the run fails
MAX_CAUSE_SHARE = 0.5
#: causes the summary names
TOP_CAUSES = 5


@dataclass
class Closing:
    """What a run measured: per planned experiment (in plan order) its valid and invalid trials,
    and per cause (a validity check's name) the invalid trials it is a reason of, with one reason's
    text as the example."""
    resdir: Path
    counts: dict[str, list[int]] = field(default_factory=dict)  # experiment -> [valid, invalid]
    causes: Counter = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)

    @property
    def trials(self) -> int:
        return sum(v + i for v, i in self.counts.values())


def closing(resdir: str | Path, planned: list[tuple[str, str]]) -> Closing:
    """The closing summary of results/<testbed> for the (experiment, point id) pairs the config
    plans (xenobench.aggregate.planned_points, in plan order): their completed trials, supplementary
    repetitions included; trials of other points are not counted."""
    resdir = Path(resdir)
    c = Closing(resdir, {e: [0, 0] for e, _ in planned})
    wanted = set(planned)
    for _, res in trial_results(resdir) if resdir.is_dir() else []:
        if (res["experiment"], point_id(res["point"])) not in wanted:
            continue
        c.counts[res["experiment"]][0 if res["valid"] else 1] += 1
        if res["valid"]:
            continue
        reasons = chosen_reasons(res) or ["(no reason recorded)"]
        for cause in dict.fromkeys(r.split(":", 1)[0] for r in reasons):  # each cause once per trial
            c.causes[cause] += 1
            c.examples.setdefault(cause, next(r for r in reasons if r.split(":", 1)[0] == cause))
    return c


def judge(c: Closing) -> list[str]:
    """Why the run failed, one phrase each: every planned experiment without a valid trial, and a
    cause that invalidated more than MAX_CAUSE_SHARE of the trials; [] for a run that measured."""
    out = [f"experiment {e} has no valid trial ({i} invalid)" for e, (v, i) in c.counts.items() if v == 0]
    for cause, n in c.causes.most_common():
        if n > MAX_CAUSE_SHARE * c.trials:
            out.append(f"{cause} invalidated {n} of {c.trials} trials (e.g. {_short(c.examples[cause])})")
    return out


def summary_lines(c: Closing) -> list[str]:
    """The closing summary as the terminal shows it."""
    valid = sum(v for v, _ in c.counts.values())
    lines = [f"xenobench: closing summary of {c.resdir}: {len(c.counts)} experiments planned, {c.trials} trials "
             f"({valid} valid, {c.trials - valid} invalid)"]
    w = max((len(e) for e in c.counts), default=0)
    lines += [f"  {e:{w}}  {v:4} valid  {i:4} invalid" for e, (v, i) in c.counts.items()]
    if c.causes:
        lines.append("  invalid trials by cause (results in invalid.csv, the report):")
        lines += [f"  {n:4} {cause} (e.g. {_short(c.examples[cause])})" for cause, n in c.causes.most_common(TOP_CAUSES)]
        if len(c.causes) > TOP_CAUSES:
            lines.append(f"       and {len(c.causes) - TOP_CAUSES} more causes")
    return lines


def _short(text: str, n: int = 100) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."


def quiet_interrupt(log: Path, line: str) -> None:
    """From the first SIGINT (Ctrl-C) on, this process's stdout and stderr go to `log` (Snakemake's
    account of the interruption: the jobs it terminates, its error block), and at exit `line` goes to
    the terminal instead. Then the interrupt runs as without it (KeyboardInterrupt: Snakemake
    cancels its jobs, its onerror hook runs). Snakemake offers no hook of its own for an interrupt."""
    def on_sigint(signum, frame):
        if not hasattr(on_sigint, "tty"):
            sys.stdout.flush()
            sys.stderr.flush()
            on_sigint.tty = os.dup(2)
            Path(log).parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            os.close(fd)
            atexit.register(os.write, on_sigint.tty, f"{line}\n".encode())
        raise KeyboardInterrupt
    signal.signal(signal.SIGINT, on_sigint)
