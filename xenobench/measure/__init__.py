"""The measurement kinds: one module each, owning its procedures (what a trial does), the knobs they
read (TrialContext.knob: the point first, then the experiment's config section) and the tidy rows
they make of a valid trial (`rows`, and `point_rows` over a point's valid repetitions where a kind
compares within a point).

Each module declares KIND, PROCEDURES {name: procedure(ctx, lb) -> (outputs, Validity)}, TABLES
(tables it writes besides its definitions' own tidy.tables) and rows(TrialRecord); a kind whose
definitions' tidy.metrics read its outputs declares OUTPUTS; one that checks the testbed before a
point's set-up declares precheck(testbed, experiment, section). This package's KINDS is the one list.
"""

from __future__ import annotations

from ..errors import ConfigError
from . import distribution, latency, rank, rate, search, update
from ..definitions import is_capacity_point
from .common import TrialRecord

#: every measurement kind, by name (an experiment definition's `kind`)
KINDS = {m.KIND: m for m in (rate, latency, search, update, rank, distribution)}
#: every procedure, by name (a definition's `procedure`), and the kind that owns it
PROCEDURES = {name: (kind, fn) for kind, m in KINDS.items() for name, fn in m.PROCEDURES.items()}

__all__ = ["KINDS", "PROCEDURES", "TrialRecord", "rows_module", "procedure"]


def procedure(name: str):
    """A procedure by name; refused by name (a definition names it: checked when the definitions load)."""
    if name not in PROCEDURES:
        raise ConfigError(f"Failed to find procedure {name!r}: unknown (known: {', '.join(PROCEDURES)})")
    return PROCEDURES[name][1]


def rows_module(kind: str, point: dict):
    """The module whose rows a valid trial of `kind` at `point` gives: a capacity point ran the rate
    kind's procedure (its maximum), whatever its experiment's kind."""
    return rate if is_capacity_point(point) else KINDS[kind]


def trial_rows(t: TrialRecord) -> dict[str, list[dict]]:
    """The tidy rows of one valid trial, by the module that measured it."""
    m = rows_module(t.definition.kind, t.point)
    return (m.capacity_rows if m is rate and is_capacity_point(t.point) else m.rows)(t)


def point_rows(kind: str, records: list[TrialRecord]) -> dict[str, list[dict]]:
    """The rows a kind makes over one point's valid repetitions (the paired RTT comparison, the
    rate ranking); {} for kinds without."""
    fn = getattr(KINDS[kind], "point_rows", None)
    recs = [t for t in records if not is_capacity_point(t.point)]
    return fn(recs) if fn is not None and recs else {}
