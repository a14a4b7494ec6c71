"""Trial directories → tidy CSVs (docs/results.md). Nothing but the trial directories is read, so
the CSVs can be regenerated at any time: `xenobench experiment aggregate results/<testbed>`.

Only valid trials become rows; invalid ones are listed in invalid.csv (and in the run report) with
their reasons, never dropped silently.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pandas as pd

from . import latency
from .errors import ConfigError, DataError
from .experiments import definition, is_capacity_point
from .layout import ResultsTree, TrialDir, point_id
from .results import COLUMNS, KINDS, metric, row, validate, write_tidy

RTT_PERCENTILES = (1, 5, 25, 75, 95, 99)


def trial_results(resdir: Path) -> list[tuple[TrialDir, dict]]:
    """(trial, result.json) of every completed trial under <resdir>/trials, in sorted order."""
    if not Path(resdir).is_dir():
        raise DataError(f"Failed to read results {resdir}: no such directory (run the experiments first, or "
                        "give results/<testbed>)")
    return [(t, t.read_result()) for t in ResultsTree.of(resdir).completed_trials()]


def trial_rows(testbed: str, trial: TrialDir, res: dict, resdir: Path, paired: dict) -> dict[str, list[dict]]:
    """rows_for_trial, with a malformed result named by its file and the rows checked against the
    metrics' units and ranges (xenobench.results.validate) before any is written."""
    try:
        rows = rows_for_trial(testbed, trial, res, resdir, paired)
    except KeyError as e:
        raise DataError(f"Failed to aggregate trial {trial.result}: {e.args[0]!r} is missing "
                        "(not a result xenobench wrote?)") from None
    except (TypeError, ValueError, AttributeError) as e:
        raise DataError(f"Failed to aggregate trial {trial.result}: malformed ({e})") from None
    _check_rows(rows, f"of trial {trial.result}")
    return rows


def _check_rows(rows: dict[str, list[dict]], where: str) -> None:
    for k, rs in rows.items():
        if rs:
            validate(k, pd.DataFrame(rs, columns=COLUMNS), where, by_source=True)


def check_trial(trial: TrialDir, result: dict) -> None:
    """The rows aggregate would make of a trial just measured (its result as it would be written,
    valid), and its point's paired or ranking rows from this repetition alone, checked as
    aggregate checks them: a DataError names what cannot exist."""
    paired: dict = {}
    resdir = trial.results_dir
    trial_rows(resdir.name, trial, result, resdir, paired)
    for ent in paired.values():
        _check_rows(point_rows(ent), f"of trial {trial.path}")


def read_probe_records(path: Path) -> list[float]:
    """RTTs in µs of the answered probes (status ok) in a prober's raw records: JSON lines
    (xenobench.rtt) or CSV, each with rtt_ns and status. A line that is not a record or an
    rtt_ns that is not a whole number of ns is refused, naming the line."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise DataError(f"Failed to read probe records {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise DataError(f"Failed to read probe records {path}: {getattr(e, 'strerror', None) or e}") from None
    recs = []  # (line, record)
    if path.suffix == ".jsonl":
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataError(f"Failed to read probe records {path}: line {n}: {e.msg}") from None
            except RecursionError:
                raise DataError(f"Failed to read probe records {path}: line {n}: nested too deeply") from None
            if not isinstance(r, dict):
                raise DataError(f"Failed to read probe records {path}: line {n}: {line[:40]!r} is not a record "
                                "(a JSON object)")
            recs.append((n, r))
    else:
        rd = csv.DictReader(text.splitlines())
        if rd.fieldnames is None or "rtt_ns" not in rd.fieldnames:
            raise DataError(f"Failed to read probe records {path}: no rtt_ns column")
        recs = list(enumerate(rd, 2))
    out = []
    for n, r in recs:
        v = r.get("rtt_ns")
        if r.get("status", "ok") != "ok" or v in ("", None):
            continue
        try:
            ns = int(v) if not isinstance(v, float) else None  # 1.5 or NaN ns: not the prober's record
        except ValueError:
            ns = None
        if ns is None or isinstance(v, bool):
            raise DataError(f"Failed to read probe records {path}: line {n}: rtt_ns: {v!r} is not a whole number "
                            "of nanoseconds")
        out.append(ns / 1000.0)
    return out


def _rtt_stats(v: np.ndarray) -> dict:
    st = {"median": float(np.median(v)), "mean": float(np.mean(v)),
          "std": float(np.std(v, ddof=1)) if len(v) > 1 else 0.0,
          "min": float(v.min()), "max": float(v.max())}
    for p in RTT_PERCENTILES:
        st[f"p{p}"] = float(np.percentile(v, p))
    return st


def _ndr_pdr_rows(testbed: str, trial: TrialDir, res: dict, resdir: Path, facts: dict) -> list[dict]:
    """Per goal of the search: the relevant lower bound (the highest load at the goal's loss ratio:
    NDR, PDR), the upper bound, the conditional throughput and the width reached; the search's
    trial count and time. offered_pps = the lower bound, measured_pps = its conditional throughput."""
    o = res["outputs"]
    src = str((trial.path / o["search_record"]).relative_to(resdir))
    common = dict(testbed=testbed, lb=facts.get("lb"), generator=facts.get("generator"), payload_bytes=o["payload"],
                  repetition=int(res["repetition"]), source=src)
    out = []
    for g in o["goals"]:
        if g["lower_bound_pps"] is None:
            continue
        n = g["name"].lower()
        c = dict(common, offered_pps=g["lower_bound_pps"], measured_pps=g["conditional_throughput_pps"])
        out.append(row(**c, metric=f"{n}_pps", value=g["lower_bound_pps"], unit="packets/s"))
        out.append(row(**c, metric=f"{n}_conditional_throughput_pps", value=g["conditional_throughput_pps"],
                       unit="packets/s"))
        if g["upper_bound_pps"] is not None:
            out.append(row(**c, metric=f"{n}_upper_bound_pps", value=g["upper_bound_pps"], unit="packets/s"))
            out.append(row(**c, metric=f"{n}_relative_width", value=g["relative_width"], unit="ratio"))
    out.append(row(**common, metric="search_trials", value=o["n_trials"], unit="count"))
    out.append(row(**common, metric="search_trial_seconds", value=o["trial_seconds"], unit="s"))
    out.append(row(**common, metric="search_wall_s", value=o["search_wall_s"], unit="s"))
    return out


def _rtt_rows(common: dict, rtts: np.ndarray, s: dict, rel_records: Path, rel_summary: Path,
              out: dict[str, list[dict]], samples: bool = True) -> None:
    for i, v in enumerate(rtts if samples else ()):
        out["rtt_samples"].append(row(**common, metric="rtt_us", value=float(v), unit="us",
                                      source=f"{rel_records}:{i}"))
    summ = [("n", len(rtts), "count"), ("lost", s.get("lost", 0), "count")]
    if len(rtts):
        summ += [(f"rtt_{k}_us", v, "us") for k, v in _rtt_stats(rtts).items()]
    pc = s.get("pcap") or {}
    if pc.get("median_us") is not None:
        summ += [("rtt_pcap_median_us", pc["median_us"], "us"),
                 ("rtt_pcap_diff_us", s.get("pcap_median_diff_us"), "us")]
    for m, v, u in summ:
        if v is not None:
            out["rtt_summary"].append(row(**common, metric=m, value=float(v), unit=u, source=str(rel_summary)))


def _paired_rtt_rows(common: dict, trial: TrialDir, res: dict, resdir: Path, out: dict[str, list[dict]]) -> list:
    """Paired design: samples per block (source names the block), one summary per LB and
    repetition over its blocks; returns (repetition, round, lb, block median) for latency.compare."""
    o = res["outputs"]
    att = trial.attempt(res["chosen_attempt"])
    rep = int(res["repetition"])
    per_lb: dict[str, list[float]] = {}
    lost: dict[str, int] = {}
    captured: dict[str, dict] = {}
    medians = []
    for b in o["blocks"]:
        f = att.path / b["records"]
        r = read_probe_records(f)
        rel = f.relative_to(resdir)
        c = dict(common, lb=b["lb"])
        for i, v in enumerate(r):
            out["rtt_samples"].append(row(**c, metric="rtt_us", value=float(v), unit="us", source=f"{rel}:{i}"))
        per_lb.setdefault(b["lb"], []).extend(r)
        lost[b["lb"]] = lost.get(b["lb"], 0) + int(b["probe"].get("lost") or 0)
        if b["captured"]:
            captured[b["lb"]] = b["probe"]
        if r:
            medians.append((rep, int(b["round"]), b["lb"], float(np.median(r))))
    rel_att = att.path.relative_to(resdir)
    for lb, r in per_lb.items():
        s = {"lost": lost[lb], **{k: captured.get(lb, {}).get(k) for k in ("pcap", "pcap_median_diff_us")}}
        _rtt_rows(dict(common, lb=lb), np.array(r), s, rel_att, rel_att, out, samples=False)
    return medians


def paired_rows(blocks: list, lbs: list[str], common: dict, resamples: int, seed: int) -> list[dict]:
    """rtt_paired rows of one point: every LB against 'none' (the added latency) and every other
    pair of LBs, each the median of per-round differences with its bootstrap 95 % CI; verdict
    +1 / -1 where the CI excludes zero (higher / lower than the reference), 0 = not distinguishable."""
    refs = [(lb, "none") for lb in lbs if lb != "none" and "none" in lbs]
    others = [x for x in lbs if x != "none"]
    refs += [(a, b) for i, a in enumerate(others) for b in others[i + 1:]]
    out = []
    for lb, ref in refs:
        d = latency.compare(blocks, lb, ref, resamples, seed)
        if d is None:
            continue
        c = dict(common, lb=lb)
        sign = {"higher": 1, "lower": -1}.get(d.verdict, 0)
        for m, v, u in ((f"rtt_vs_{ref}_median_us", d.median_us, "us"),
                        (f"rtt_vs_{ref}_ci_low_us", d.ci_low_us, "us"),
                        (f"rtt_vs_{ref}_ci_high_us", d.ci_high_us, "us"),
                        (f"rtt_vs_{ref}_pairs", d.pairs, "count"),
                        (f"rtt_vs_{ref}_verdict", sign, "sign"),
                        (f"rtt_vs_{ref}_bootstrap_seed", d.seed, "seed"),
                        (f"rtt_vs_{ref}_bootstrap_resamples", d.resamples, "count")):
            out.append(row(**c, metric=m, value=float(v), unit=u))
    return out


def _rank_rows(testbed: str, trial: TrialDir, res: dict, facts: dict, src: str) -> tuple[list[dict], list]:
    """rank (xenobench.rank): rate_blocks rows per block (source: the trial, block and round): its rate
    and, where recorded, its rx per second of the DUT NAPI thread's CPU time, the figures its round
    was judged by (xenobench.rank.ROUND_RULES) and whether it was kept; returns them and, per measure
    ("rate", "rate_per_cpu"), (repetition, round, lb, value) per block of a kept round for the point's
    rate_ranking rows (a round the trial left out is in no ranking)."""
    o = res["outputs"]
    rep = int(res["repetition"])
    common = dict(testbed=testbed, generator=facts.get("generator"), payload_bytes=o["payload"], repetition=rep)
    rows, blocks = [], {"rate": [], "rate_per_cpu": []}
    for b in o["blocks"]:
        if b.get("rate_pps") is None:
            continue
        where = dict(common, lb=b["lb"], measured_pps=b["rate_pps"], source=f"{src}:block-{b['block']}:round-{b['round']}")
        kept = b.get("round_kept", True)  # trials before the allocator check kept every round
        rows.append(row(**where, metric="block_rx_pps", value=float(b["rate_pps"]), unit="packets/s"))
        rows.append(row(**where, metric="block_round_kept", value=float(kept), unit="flag"))
        for field, unit in (("page_allocs_per_frame", "pages/frame"), ("cpu_pair_rtt_ns", "ns")):
            if b.get(field) is not None:
                rows.append(row(**where, metric=f"block_{field}", value=float(b[field]), unit=unit))
        if kept:
            blocks["rate"].append((rep, int(b["round"]), b["lb"], float(b["rate_pps"])))
        if b.get("rx_per_dut_cpu_s"):  # the DUT NAPI thread's CPU share divided out (xenobench.rank.dut_cpu_reader)
            rows.append(row(**where, metric="block_rx_per_dut_cpu_s", value=float(b["rx_per_dut_cpu_s"]),
                            unit="packets/cpu-s"))
            if kept:
                blocks["rate_per_cpu"].append((rep, int(b["round"]), b["lb"], float(b["rx_per_dut_cpu_s"])))
    return rows, blocks


RANK_MEASURES = ("rate", "rate_per_cpu")  # rate_ranking's metric prefixes: <measure>_vs_<ref>_<part>


def rank_rows(blocks: list, lbs: list[str], reference: str, common: dict, resamples: int, seed: int,
              measure: str = "rate") -> list[dict]:
    """rate_ranking rows of one point (xenobench.rank.ranking over its valid repetitions' rounds):
    each LB against the reference, then every pair of the others; verdict +1 / -1 where the CI
    excludes 1 (faster / slower than the one it is compared with), 0 = not distinguishable.
    measure: "rate" (block_rx_pps) or "rate_per_cpu" (block_rx_per_dut_cpu_s)."""
    from .rank import ranking
    out = []
    for r in ranking(blocks, lbs, reference, resamples, seed):
        c = dict(common, lb=r.lb)
        sign = {"faster": 1, "slower": -1}.get(r.verdict, 0)
        pre = f"{measure}_vs_{r.reference}_"
        for m, v, u in (("median", r.median, "ratio"), ("ci_low", r.ci_low, "ratio"), ("ci_high", r.ci_high, "ratio"),
                        ("half_width_pct", r.half_width_pct, "%"), ("rounds", r.rounds, "count"),
                        ("repetitions", r.repetitions, "count"),
                        ("verdict", sign, "sign"), ("bootstrap_seed", seed, "seed"),
                        ("bootstrap_resamples", resamples, "count")):
            out.append(row(**c, metric=pre + m, value=float(v), unit=u))
    return out


def ratios_from_rows(df, measure: str = "rate") -> list:
    """rateblocks.RateRatio's back from rate_ranking rows of one point (metrics <measure>_vs_<ref>_<part>)."""
    from .rateblocks import RateRatio
    parts = ("median", "ci_low", "ci_high", "rounds")
    got: dict[tuple[str, str], dict] = {}
    pre = f"{measure}_vs_"
    for lb, m, v in zip(df.lb, df.metric, df.value):
        rest = m[len(pre):] if m.startswith(pre) else None
        part = next((p for p in (*parts, "repetitions") if rest and rest.endswith("_" + p)), None)
        if part:
            got.setdefault((lb, rest[: -len(part) - 1]), {})[part] = float(v)
    return [RateRatio(lb, ref, d["median"], d["ci_low"], d["ci_high"], int(d["rounds"]), int(d.get("repetitions", 1)))
            for (lb, ref), d in sorted(got.items()) if all(p in d for p in parts)]


def _facts(trial: TrialDir, res: dict) -> dict:
    """What the trial recorded it ran with (xenobench.procedures.point_facts)."""
    f = res["outputs"].get("facts")
    if not isinstance(f, dict):
        raise DataError(f"Failed to aggregate trial {trial.path}: its result.json records no facts (which LB, "
                        "server, generator); it was written by an older xenobench: delete the trial directory "
                        "and run the point again")
    return f


def _output(o: dict, dotted: str):
    """outputs[a][b]... for a definition's metric `from: a.b`; None where absent."""
    v = o
    for part in dotted.split("."):
        v = v.get(part) if isinstance(v, dict) else None
    return v


def _rate_rows(testbed: str, d, trial: TrialDir, res: dict, facts: dict, src: str) -> dict[str, list[dict]]:
    """A rate experiment's rows: one per metric of its definition's tidy.metrics."""
    o = res["outputs"]
    gen = o.get("generator") or {}
    common = dict(testbed=testbed, lb=facts.get("lb"), generator=facts.get("generator"), payload_bytes=o["payload"],
                  repetition=int(res["repetition"]), offered_pps=gen.get("achieved_pps"),
                  measured_pps=o["rx_pps"], source=src)
    table = d.tidy["tables"][0]
    rows = []
    for m in d.tidy.get("metrics") or ():
        v = _output(o, m["from"])
        if v is None:
            if m.get("optional"):
                continue
            raise DataError(f"Failed to aggregate trial {trial.path}: outputs.{m['from']} (metric {m['metric']} "
                            f"of experiments/{d.id}.yaml) is missing from result.json")
        rows.append(row(**common, metric=m["metric"], value=v, unit=metric(m["metric"]).unit))
    return {table: rows}


def _ms(v):
    return None if v is None else 1e3 * float(v)


def _update_rows(testbed: str, trial: TrialDir, res: dict, facts: dict, src: str) -> dict[str, list[dict]]:
    """update (xenobench.update): a row per metric of each change cycle (source: the trial and
    cycle), of each burst (changes_per_s: its requested rate; 0 the reference) and of each change of
    the installation sizes (source: the trial, change, k and direction; the rows of one change share
    it) and the refused change above the limit. A metric the cycle could not measure (the removed
    backend never drained) has no row."""
    o = res["outputs"]
    common = dict(testbed=testbed, lb=facts.get("lb"), generator=facts.get("generator"), payload_bytes=o["payload"],
                  repetition=int(res["repetition"]), background_pps=o["load_pps"])
    cyc = []
    for i, c in enumerate(o["cycles"], 1):
        rm, add = c["remove"], c["add"]
        vals = [("remove_control_ms", _ms(rm["control_s"])), ("add_control_ms", _ms(add["control_s"])),
                ("remove_apply_ms", _ms(rm.get("apply_s"))), ("add_apply_ms", _ms(add.get("apply_s"))),
                ("remove_last_frame_ms", _ms(rm.get("remove_last_frame_s"))),
                ("done_to_last_frame_ms", _ms(rm.get("done_to_last_frame_s"))),
                ("add_first_frame_ms", _ms(add.get("add_first_frame_s"))),
                ("after_done_frames", rm.get("after_done_frames")),
                ("after_done_frames_max", rm.get("after_done_frames_max")),
                ("drained", None if rm.get("drained") is None else int(rm["drained"])),
                ("loss_pct", c.get("loss_pct"))]
        cyc += [row(**common, offered_pps=o["load_pps"], metric=m, value=float(v), unit=metric(m).unit,
                    source=f"{src}:cycle-{i}") for m, v in vals if v is not None]
    bursts = []
    for i, b in enumerate(o["bursts"], 1):
        c = dict(common, offered_pps=b.get("generator_achieved_pps"), measured_pps=b["rx_pps"],
                 changes_per_s=b["changes_per_s"], source=f"{src}:burst-{i}")
        vals = [("rx_pps", b["rx_pps"]), ("loss_pct", b.get("loss_pct")), ("changes", b["changes"]),
                ("achieved_changes_per_s", b.get("achieved_changes_per_s"))]
        bursts += [row(**c, metric=m, value=float(v), unit=metric(m).unit) for m, v in vals if v is not None]
    inst = []
    ins = o.get("install") or {}
    for i, c in enumerate(ins.get("changes") or (), 1):
        k = "real" if c["k"] is None else c["k"]
        vals = [("entries", c.get("entries")), ("lb_entries", c.get("lb_entries")),
                ("install_control_ms", _ms(c["control_s"])), ("install_apply_ms", _ms(c.get("apply_s"))),
                ("entries_per_s", c.get("entries_per_s")), ("apply_entries_per_s", c.get("apply_entries_per_s"))]
        inst += [row(**common, offered_pps=ins.get("load_pps"), metric=m, value=float(v), unit=metric(m).unit,
                     source=f"{src}:install-{i}:k-{k}:{c['direction']}") for m, v in vals if v is not None]
    over = ins.get("over")
    if over is not None:
        inst += [row(**common, metric=m, value=float(v), unit=metric(m).unit, source=f"{src}:install-over")
                 for m, v in (("over_limit_refused", int(over["refused"])),
                              ("frames_after_refusal", over["frames_at_old_set_after"]))]
    return {"update": cyc, "update_burst": bursts, "update_install": inst}


def rows_for_trial(testbed: str, trial: TrialDir, res: dict, resdir: Path,
                   paired: dict | None = None) -> dict[str, list[dict]]:
    """Tidy rows of one valid trial, by its experiment's kind (experiments/<id>.yaml); a paired RTT
    trial's block medians go into `paired` (keyed by experiment and point) for the per-point
    rtt_paired rows."""
    exp, pt, rep = res["experiment"], res["point"], int(res["repetition"])
    o = res["outputs"]
    src = str(trial.path.relative_to(resdir))
    out: dict[str, list[dict]] = {k: [] for k in KINDS}
    try:
        d = definition(exp)
    except ConfigError:
        raise DataError(f"Failed to aggregate trial {trial.path}: unknown experiment {exp!r}") from None
    facts = _facts(trial, res)
    if d.kind == "search":
        out["ndr_pdr"] = _ndr_pdr_rows(testbed, trial, res, resdir, facts)
        return out
    if d.kind == "rate":
        out.update(_rate_rows(testbed, d, trial, res, facts, src))
        return out
    if is_capacity_point(pt):  # the maximum rtt_load's levels (update's load) are shares of: no probes, no RTT rows
        from .procedures import delivered_pps
        gen, cap = o.get("generator") or {}, delivered_pps(o)
        if cap is None:
            raise DataError(f"Failed to aggregate trial {trial.result}: a capacity trial without rx_packets, "
                            "tx_packets or generator.duration_s (not a result xenobench wrote?)")
        out["rtt_capacity"] = [row(testbed=testbed, lb=facts.get("lb"), server=facts.get("server"),
                                   generator=facts.get("generator"), payload_bytes=o["payload"],
                                   offered_pps=gen.get("achieved_pps"), measured_pps=cap, repetition=rep,
                                   split=pt.get("split"), metric="max_pps", value=cap, unit="packets/s", source=src)]
        return out
    if d.kind == "update":
        out.update(_update_rows(testbed, trial, res, facts, src))
        return out
    if d.kind == "rank":
        out["rate_blocks"], blocks = _rank_rows(testbed, trial, res, facts, src)
        if paired is not None:  # the point's ranking, over its valid repetitions (as the paired RTT rows)
            ent = paired.setdefault(("rank", exp, point_id(pt)), {
                "kind": "rank", "blocks_by": {}, "lbs": o["lbs"], "reference": o["reference"],
                "seed": o["bootstrap_seed"], "resamples": o["bootstrap_resamples"],
                "common": dict(testbed=testbed, generator=facts.get("generator"), payload_bytes=o["payload"]),
                "source": str(trial.path.parent.relative_to(resdir))})
            for k, bl in blocks.items():
                ent["blocks_by"].setdefault(k, []).extend(bl)
        return out
    # latency
    common = dict(testbed=testbed, lb=facts.get("lb"), server=facts.get("server"), repetition=rep,
                  # the rate the background ran at (rtt_load records it; older trials' point named it)
                  split=pt.get("split"), background_pps=o.get("background_pps", pt.get("level_pps")))
    if facts.get("paired"):
        medians = _paired_rtt_rows(common, trial, res, resdir, out)
        if paired is not None:
            key = (exp, point_id(pt))
            ent = paired.setdefault(key, {"blocks": [], "lbs": o["lbs"], "seed": o["bootstrap_seed"],
                                          "resamples": o["bootstrap_resamples"],
                                          "common": dict(common, repetition=None),
                                          "source": str(trial.path.parent.relative_to(resdir))})
            ent["blocks"] += medians
        return out
    chosen = trial.attempt(res["chosen_attempt"]).probe_records
    rtts = np.array(read_probe_records(chosen))
    rel = chosen.relative_to(resdir)
    _rtt_rows(common, rtts, o["probe"], rel, rel, out)
    return out


def point_rows(ent: dict) -> dict[str, list[dict]]:
    """The rows of one point over its valid repetitions (`ent`: what rows_for_trial gathered in
    `paired`): the paired RTT comparison or the rate ranking."""
    common = dict(ent["common"], source=ent["source"])
    if ent.get("kind") == "rank":
        return {"rate_ranking": [r for m in RANK_MEASURES
                                 for r in rank_rows(ent["blocks_by"].get(m, []), ent["lbs"], ent["reference"], common,
                                                    ent["resamples"], ent["seed"], m)]}
    return {"rtt_paired": paired_rows(ent["blocks"], ent["lbs"], common, ent["resamples"], ent["seed"])}


def aggregate(resdir: str | Path, testbed: str | None = None, progress=print) -> dict:
    """Write <resdir>/<kind>.csv for every kind with rows, and <resdir>/invalid.csv."""
    resdir = Path(resdir)
    testbed = testbed or resdir.name
    rows: dict[str, list[dict]] = {k: [] for k in KINDS}
    invalid = []
    paired: dict = {}
    for trial, res in trial_results(resdir):
        if not res.get("valid"):
            reasons = [r for a in res["attempts"] if a["attempt"] == res["chosen_attempt"] for r in a["reasons"]]
            invalid.append({"trial": str(trial.path.relative_to(resdir)), "experiment": res["experiment"],
                            "attempts": len(res["attempts"]), "reasons": "; ".join(reasons)})
            continue
        for k, rs in trial_rows(testbed, trial, res, resdir, paired).items():
            rows[k] += rs
    for _, ent in sorted(paired.items(), key=lambda kv: tuple(map(str, kv[0]))):  # per point, over its valid repetitions
        for k, rs in point_rows(ent).items():
            rows[k] += rs
    written = {}
    for k, rs in rows.items():
        if rs:
            write_tidy(k, rs, resdir, header=f"xenobench experiment aggregate {resdir} (valid trials only)")
            written[k] = len(rs)
            progress(f"{k}.csv: {len(rs)} rows")
        elif (resdir / f"{k}.csv").exists():  # this directory's CSVs are ours: none stale
            (resdir / f"{k}.csv").unlink()
    try:
        with open(resdir / "invalid.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=["trial", "experiment", "attempts", "reasons"])
            w.writeheader()
            w.writerows(invalid)
    except OSError as e:
        raise DataError(f"Failed to write {resdir / 'invalid.csv'}: {e.strerror or e}") from None
    written["invalid"] = len(invalid)
    progress(f"invalid.csv: {len(invalid)} invalid trials")
    return written
