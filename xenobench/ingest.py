"""Ingest of raw measurements laid out like the thesis's (../shared/thesis-data, formats in its
README) into the tidy schema, e.g. results/thesis/.

Every file under the data directory is accounted for: used, or listed as skipped or refused with
the reason, in <out>/provenance.json and on stderr. Nothing is dropped silently.

Layout (a repetition suffix _R is a repetition; without one, repetition 1):
    pps/NNb_R.txt                      per-second rx counts at payload NN
    loss/tx_NNm_R.txt, loss/rx_NNm_R.txt   per-second tx and rx counts at NN Mpps offered
    rtt/baseline/rtt_NAME[_R].*        probes through the load balancer
    rtt/baseline/pingpong_NAME[_R].*   the same probes without a load balancer (lb "none")
    rtt/under-load/rtt_NNm_X_Y[_R].*   probes through the LB under NN Mpps background, split X/Y
RTT files may be pcap, pcapng or tcpdump -e text (detected by content, xenobench.pcap_rtt).

Labels: the load balancer, the DNS server answering the probes, the testbed, the split names and
the pairing timeout come from the command line, else from DIR/manifest.yaml, else from the
thesis's defaults (xenoflow, reflector, thesis, 100_0 = single, 0_100 = worst, X_Y = "X/Y").

Steady state: xenobench.steady.steady_state (the project's one rule). Loss uses the seconds where
the transmit series is steady: loss = 1 − Σrx / Σtx over them.

Plausibility gates (flags go into the provenance and the rows' source; refusals keep the trial out
of the tidy CSVs):
- loss: the two counters are sampled on different hosts' clocks, so at loads the LB carries
  without loss rx/tx − 1 is not 0 but the clock skew (thesis data: −0.07 … −0.20 %). It is
  measured on the set's trials offered at most CAPACITY_FRACTION of the largest received rate:
  median and MAD of their losses. A loss below −(max(0, −median) + SKEW_MADS × MAD) is flagged;
  a loss above 100 %, below −LOSS_REFUSE_PCT, or from a negative count is impossible and refused.
- RTT: lost fraction, RTT range against the timeout, answers without a query, out-of-order stamps
  (RttResult.flags); a capture with no answered probe, or whose identical queries follow each other
  faster than twice the median RTT (answers cannot be attributed), is refused (RttResult.refusal).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import yaml

from .errors import DataError
from .layout import point_id
from .results import LOSS_MIN_PCT, row, write_tidy
from .steady import steady_state

MANIFEST = "manifest.yaml"
PROVENANCE = "provenance.json"
CAPACITY_FRACTION = 0.9   # trials offered <= 90 % of the set's largest received rate measure the skew
SKEW_MADS = 5.0           # losses this many MADs below the skew are flagged
MAD_SCALE = 1.4826        # MAD -> standard deviation for normal data
MIN_SKEW_TRIALS = 3
MAX_SERIES_BYTES = 16 << 20  # one line per second: months of counts
MAX_COUNT = 10**12           # per second: ~7000 x the 100 Gbit/s line rate at 64 B (148.8 Mpps); with
                             # MAX_SERIES_BYTES it keeps every int64 sum of a series exact
LOSS_REFUSE_PCT = -LOSS_MIN_PCT  # a 1 s counter sampler cannot gain 10 % (100 ms) from clock skew

PPS_RE = re.compile(r"(\d+)b_(\d+)\.txt")
LOSS_RE = re.compile(r"(tx|rx)_(\d+)m_(\d+)\.txt")
BASE_RE = re.compile(r"(rtt|pingpong)_([A-Za-z0-9-]+?)(?:_(\d+))?")
LOAD_RE = re.compile(r"rtt_(\d+)m_(\d+)_(\d+)(?:_(\d+))?")
SPLIT_RE = re.compile(r"(\d+)_(\d+)")


def read_series(path: Path) -> np.ndarray:
    """One integer per line; DataError naming file and line otherwise."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_SERIES_BYTES + 1)  # bounded before reading (a device, a wrong file)
        if len(data) > MAX_SERIES_BYTES:
            raise DataError(f"Failed to read series {path}: larger than {MAX_SERIES_BYTES} bytes")
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise DataError(f"Failed to read series {path}: {getattr(e, 'strerror', None) or e}") from None
    vals = []
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s:
            continue
        try:
            v = int(s)
        except ValueError:
            raise DataError(f"Failed to read series {path}: line {n}: {s[:40]!r} is not an integer") from None
        if abs(v) > MAX_COUNT:
            raise DataError(f"Failed to read series {path}: line {n}: {s[:40]!r} is out of range "
                            f"(a packet count per second is at most {MAX_COUNT:.0e})")
        vals.append(v)
    if not vals:
        raise DataError(f"Failed to read series {path}: the file is empty")
    x = np.array(vals, dtype=np.int64)
    if (x < 0).any():
        n = int(np.flatnonzero(x < 0)[0])
        raise DataError(f"Failed to read series {path}: value {n + 1} is negative ({x[n]}): a packet count "
                        "cannot be")
    return x


# --- labels ---------------------------------------------------------------------------------------
@dataclass
class Labels:
    lb: str = "xenoflow"
    server: str = "reflector"
    testbed: str = "thesis"
    split_map: dict[str, str] = field(default_factory=dict)  # "X_Y" -> split label
    timeout_s: float | None = None                          # None: the prober's default
    source: str = "defaults"                                 # where they came from

    def split(self, x: int, y: int) -> str:
        """x % of the background to the DNS backend, y % to the other one (thesis naming)."""
        return self.split_map.get(f"{x}_{y}") or split_name(x, y)


def split_name(x: int, y: int) -> str:
    """x % of the background to the DNS backend (fips2), y % to the other backend."""
    return "single" if (x, y) == (100, 0) else "worst" if (x, y) == (0, 100) else f"{x}/{y}"


def parse_split_map(items, where: str) -> dict[str, str]:
    """["30_70=70/30", ...] or {"30_70": "70/30"} -> {"30_70": "70/30"}; DataError naming `where`."""
    pairs = items.items() if isinstance(items, dict) else \
        [(s.split("=", 1) + [""])[:2] if isinstance(s, str) else (s, "") for s in items]
    out = {}
    for k, v in pairs:
        hint = " (YAML reads an unquoted 30_70 as the number 3070: quote the key)" if isinstance(k, int) else ""
        k, v = str(k).strip(), str(v).strip()
        if not SPLIT_RE.fullmatch(k) or not v:
            raise DataError(f"Failed to read labels {where}: split map entry {k}={v!r}: expected X_Y=NAME, "
                            f"e.g. 30_70=70/30{hint}")
        out[k] = v
    return out


def load_labels(datadir: Path, *, lb=None, server=None, testbed=None, split_map=(), timeout_s=None) -> Labels:
    """Labels from the command line over DIR/manifest.yaml over the thesis's defaults."""
    lab, srcs = Labels(), []
    man = datadir / MANIFEST
    if man.exists():
        from .config import read_capped
        try:
            doc = yaml.safe_load(read_capped(man)) or {}
        except (OSError, ValueError, yaml.YAMLError) as e:  # ValueError: too large, not UTF-8
            raise DataError(f"Failed to read labels {man}: {e}") from None
        except RecursionError:
            raise DataError(f"Failed to read labels {man}: nested too deeply") from None
        if not isinstance(doc, dict):
            raise DataError(f"Failed to read labels {man}: expected a mapping, got {type(doc).__name__}")
        known = {"lb", "server", "testbed", "split_map", "timeout_s"}
        for k, v in doc.items():
            if k not in known:
                raise DataError(f"Failed to read labels {man}: unknown key {k!r} (known: {', '.join(sorted(known))})")
            if k == "split_map":
                if not isinstance(v, dict):
                    raise DataError(f"Failed to read labels {man}: split_map: expected a mapping X_Y: NAME")
                lab.split_map = parse_split_map(v, str(man))
            elif k == "timeout_s":
                lab.timeout_s = _timeout(v, f"{man}: timeout_s")
            elif not isinstance(v, str) or not v.strip():
                raise DataError(f"Failed to read labels {man}: {k}: expected a name, got {v!r}")
            else:
                setattr(lab, k, v.strip())
        srcs.append(MANIFEST)
    cli = {k: v for k, v in (("lb", lb), ("server", server), ("testbed", testbed)) if v}
    for k, v in cli.items():
        setattr(lab, k, v)
    if split_map:
        lab.split_map |= parse_split_map(split_map, "--split-map")
    if timeout_s is not None:
        lab.timeout_s = _timeout(timeout_s, "--timeout")
    if cli or split_map or timeout_s is not None:
        srcs.append("command line")
    lab.source = " + ".join(srcs) or "defaults"
    return lab


def _timeout(v, where: str) -> float:
    try:
        t = float(v)
    except (TypeError, ValueError):
        t = float("nan")
    if not (0 < t < float("inf")):
        raise DataError(f"Failed to read labels {where}: timeout {v!r}: expected a finite number of seconds > 0")
    return t


# --- the inventory --------------------------------------------------------------------------------
@dataclass
class FileEntry:
    path: str                     # relative to the data directory
    status: str = "skipped"       # used | skipped | refused
    kind: str | None = None       # manifest | pps | loss | rtt
    reason: str | None = None     # why skipped or refused
    flags: list[str] = field(default_factory=list)


class Inventory:
    """Every file under the data directory, with what became of it."""

    def __init__(self, datadir: Path):
        self.datadir = datadir
        self.entries = {self.rel(p): FileEntry(self.rel(p)) for p in sorted(datadir.rglob("*")) if p.is_file()}

    def rel(self, p: Path) -> str:
        return p.relative_to(self.datadir).as_posix()

    def use(self, p: Path, kind: str, flags=()):
        e = self.entries[self.rel(p)]
        e.status, e.kind, e.reason, e.flags = "used", kind, None, list(flags)

    def skip(self, p: Path, kind: str | None, reason: str, status: str = "skipped"):
        e = self.entries[self.rel(p)]
        e.status, e.kind, e.reason = status, kind, reason

    def refuse(self, p: Path, kind: str, reason: str):
        self.skip(p, kind, reason, "refused")

    def pending(self) -> list[FileEntry]:
        return [e for e in self.entries.values() if e.status == "skipped" and e.reason is None]


def _rel(f: Path) -> str:
    """A data file as provenance names it: from the data directory's name on
    (thesis-data/pps/2b_1.txt), so the tidy files do not carry this machine's paths."""
    parts = f.parts
    for kind in ("pps", "loss", "rtt"):
        if kind in parts:
            i = len(parts) - 1 - parts[::-1].index(kind)
            return "/".join(parts[max(i - 1, 0):])
    return f.name


def _source(text: str, flags: list[str]) -> str:
    return text + ("; flags: " + " | ".join(flags) if flags else "")


# --- the kinds ------------------------------------------------------------------------------------
def ingest_pps(d: Path, lab: Labels | None = None, inv: Inventory | None = None) -> list[dict]:
    lab = lab or Labels()
    rows = []
    for f in sorted(p for p in d.iterdir() if p.is_file()):
        m = PPS_RE.fullmatch(f.name)
        if not m:
            if inv:
                inv.skip(f, "pps", "name is not NNb_R.txt (payload NN bytes, repetition R)")
            continue
        try:
            x = read_series(f)
        except DataError as e:
            if inv is None:
                raise
            inv.refuse(f, "pps", str(e))
            continue
        st = steady_state(x)
        if st.intervals == 0:
            if inv is None:
                raise DataError(f"Failed to ingest {f}: no traffic (every second is 0)")
            inv.refuse(f, "pps", "no traffic (every second is 0)")
            continue
        common = dict(testbed=lab.testbed, experiment="pps", point=point_id({"lb": lab.lb, "payload": int(m[1])}),
                      lb=lab.lb, payload_bytes=int(m[1]), repetition=int(m[2]),
                      measured_pps=st.rate, source=f"{_rel(f)} lines {st.first + 1}-{st.last} of {len(x)}")
        rows.append(row(**common, metric="rx_pps", value=st.rate, unit="packets/s"))
        # spread of the per-second rate inside the trial (the paper quotes CV < 0.08 %)
        if st.cv_pct is not None:
            rows.append(row(**common, metric="cv_pct", value=st.cv_pct, unit="%"))
        if inv:
            inv.use(f, "pps")
    return rows


def clock_skew(losses_pct: list[float], offered: list[float], received: list[float]) -> dict:
    """The counters' clock skew measured on the trials below capacity (module docstring)."""
    if not losses_pct:
        return {"trials": 0, "median_pct": None, "mad_pct": None, "tolerance_pct": 0.0}
    cap = max(received)
    under = [v for v, o in zip(losses_pct, offered) if o <= CAPACITY_FRACTION * cap]
    if len(under) < MIN_SKEW_TRIALS:
        return {"trials": len(under), "median_pct": None, "mad_pct": None, "tolerance_pct": 0.0,
                "note": f"fewer than {MIN_SKEW_TRIALS} trials offered <= {CAPACITY_FRACTION:g} x the largest "
                        "received rate: not measurable, every negative loss is flagged"}
    med = float(np.median(under))
    mad = float(np.median(np.abs(np.array(under) - med))) * MAD_SCALE
    return {"trials": len(under), "median_pct": round(med, 4), "mad_pct": round(mad, 4),
            "tolerance_pct": round(max(0.0, -med) + SKEW_MADS * mad, 4),
            "rule": f"loss of the trials offered <= {CAPACITY_FRACTION:g} x the largest received rate "
                    f"({cap / 1e6:.2f} Mpps): median, MAD x {MAD_SCALE}; tolerance = max(0, -median) + "
                    f"{SKEW_MADS:g} MAD"}


def ingest_loss(d: Path, lab: Labels | None = None, inv: Inventory | None = None) -> tuple[list[dict], dict]:
    """Rows and the measured clock skew."""
    lab = lab or Labels()
    files = sorted(p for p in d.iterdir() if p.is_file())
    names = {f.name for f in files}
    trials = []
    for f in files:
        m = LOSS_RE.fullmatch(f.name)
        if not m:
            if inv:
                inv.skip(f, "loss", "name is not tx_NNm_R.txt or rx_NNm_R.txt")
            continue
        other = ("rx_" if m[1] == "tx" else "tx_") + f.name[3:]
        if other not in names:
            if inv is None:
                raise DataError(f"Failed to ingest {f}: no {other} beside it")
            inv.skip(f, "loss", f"no {other} beside it")
            continue
        if m[1] == "rx":
            continue  # taken with its tx file
        rx_f = d / other
        try:
            tx, rx = read_series(f), read_series(rx_f)
        except DataError as e:
            if inv is None:
                raise
            for p in (f, rx_f):
                inv.refuse(p, "loss", str(e))
            continue
        n = min(len(tx), len(rx))
        st = steady_state(tx[:n])
        a, b = st.first, st.last
        stx = int(tx[a:b].sum())
        if stx == 0:
            if inv is None:
                raise DataError(f"Failed to ingest {f}: no traffic sent (every second is 0)")
            for p in (f, rx_f):
                inv.refuse(p, "loss", f"{f.name}: no traffic sent (every second is 0)")
            continue
        loss = 100.0 * (1.0 - int(rx[a:b].sum()) / stx)
        trials.append(dict(tx=f, rx=rx_f, m=m, a=a, b=b, loss=loss, offered=float(np.median(tx[a:b])),
                           measured=float(np.median(rx[a:b]))))
    # the impossible first, so that it cannot distort the skew measurement
    ok = []
    for t in trials:
        why = (f"loss {t['loss']:.3f} % > 100 %: a negative number of packets received" if t["loss"] > 100
               else f"loss {t['loss']:.3f} % < -{LOSS_REFUSE_PCT:g} %: rx exceeds tx by more than a 1 s sampler's "
                    "clock skew can explain (wrong pair of files?)" if t["loss"] < -LOSS_REFUSE_PCT else None)
        if why:
            if inv is None:
                raise DataError(f"Failed to ingest {t['tx']}: {why}")
            for p in (t["tx"], t["rx"]):
                inv.refuse(p, "loss", why)
        else:
            ok.append(t)
    skew = clock_skew([t["loss"] for t in ok], [t["offered"] for t in ok], [t["measured"] for t in ok])
    rows = []
    for t in ok:
        flags = []
        if t["loss"] < -skew["tolerance_pct"]:
            flags.append(f"loss {t['loss']:.3f} % is below 0 beyond the measured clock skew (median "
                         f"{skew['median_pct']} %, tolerance {skew['tolerance_pct']} %)")
        m = t["m"]
        src = f"{_rel(t['tx'])},{t['rx'].name} lines {t['a'] + 1}-{t['b']}"
        common = dict(testbed=lab.testbed, experiment="loss",
                      point=point_id({"lb": lab.lb, "rate_pps": int(m[2]) * 1_000_000}), lb=lab.lb, payload_bytes=22,
                      repetition=int(m[3]),
                      offered_pps=t["offered"], measured_pps=t["measured"], source=_source(src, flags))
        rows.append(row(**common, metric="loss_pct", value=t["loss"], unit="%"))
        rows.append(row(**common, metric="nominal_offered_pps", value=int(m[2]) * 1e6, unit="packets/s"))
        if inv:
            for p in (t["tx"], t["rx"]):
                inv.use(p, "loss", flags)
    return rows, skew


RTT_SUMMARY_KEYS = ("n", "lost", "median_us", "median_raw_us", "resolution_us", "mean_us", "std_us", "min_us",
                    "max_us") + tuple(f"p{q}_us" for q in (1, 5, 25, 50, 75, 90, 95, 99))


def ingest_rtt(d: Path, lab: Labels | None = None, inv: Inventory | None = None) -> tuple[list[dict], list[dict]]:
    from .pcap_rtt import analyze_pcap
    lab = lab or Labels()
    samples, summary, seen = [], [], {}

    def add(f, lb, rep, split=None, bg=None):
        key = (lb, split, bg, rep)
        if key in seen:
            if inv is None:
                raise DataError(f"Failed to ingest {f}: the same trial as {seen[key]}")
            inv.skip(f, "rtt", f"the same trial as {seen[key]} (lb {lb}, split {split}, background {bg}, "
                               f"repetition {rep})")
            return
        try:
            res = analyze_pcap(f, timeout_s=lab.timeout_s)
        except DataError as e:
            if inv is None:
                raise
            inv.refuse(f, "rtt", str(e))
            return
        if res.refusal():
            if inv is None:
                raise DataError(f"Failed to ingest {f}: {res.refusal()}")
            inv.refuse(f, "rtt", res.refusal())
            return
        seen[key] = f.name
        sm, flags = res.summary(), res.flags()
        unit = "lines" if sm["format"] == "tcpdump-text" else "packets"
        src = _source(f"{_rel(f)} {unit} {sm['first_packet']}-{sm['last_packet']} (0-based), "
                      f"client {res.client_mac}", flags)
        # the thesis's RTT without background is the rtt experiment's, with one rtt_load's
        at = ({"experiment": "rtt", "point": point_id({"lb": lb, "server": lab.server})} if split is None else
              {"experiment": "rtt_load", "point": point_id({"lb": lb, "level_pps": bg, "split": split})})
        common = dict(testbed=lab.testbed, **at, lb=lb, server=lab.server, repetition=rep, split=split,
                      background_pps=bg)
        for (qi, ai), v in zip(res.pairs, res.rtts_us):
            samples.append(row(**common, metric="rtt_us", value=float(v), unit="us", source=f"{f.name}:{qi}>{ai}"))
        for k in RTT_SUMMARY_KEYS:
            summary.append(row(**common, metric=k if k in ("n", "lost") else f"rtt_{k}", value=sm[k],
                               unit="us" if k.endswith("_us") else "count", source=src))
        if inv:
            inv.use(f, "rtt", flags)

    for sub in sorted(p for p in d.iterdir() if p.is_dir()):
        if sub.name not in ("baseline", "under-load") and inv:
            for f in sorted(p for p in sub.rglob("*") if p.is_file()):
                inv.skip(f, "rtt", f"rtt/{sub.name}/ is not rtt/baseline/ or rtt/under-load/")
    base = d / "baseline"
    # through the LB first, then without (the order the tidy files have always had)
    for f in sorted((p for p in base.rglob("*") if p.is_file()), key=lambda p: (p.name.startswith("pingpong"), p))\
            if base.is_dir() else []:
        m = BASE_RE.fullmatch(f.stem) if f.parent == base else None
        if not m:
            if inv:
                inv.skip(f, "rtt", "name is not rtt_NAME[_R].* or pingpong_NAME[_R].*")
            continue
        add(f, lab.lb if m[1] == "rtt" else "none", int(m[3] or 1))
    # rtt_NNm_X_Y: X % of the background to fips2 (the probe's backend) — an assumption, see the
    # data README: 100_0 = single endpoint, 0_100 = worst case
    load = d / "under-load"
    for f in sorted(p for p in load.rglob("*") if p.is_file()) if load.is_dir() else []:
        m = LOAD_RE.fullmatch(f.stem) if f.parent == load else None
        if not m:
            if inv:
                inv.skip(f, "rtt", "name is not rtt_NNm_X_Y[_R].* (NN Mpps background, X/Y split, repetition R)")
            continue
        add(f, lab.lb, int(m[4] or 1), lab.split(int(m[2]), int(m[3])), int(m[1]) * 1e6)
    for f in sorted(p for p in d.iterdir() if p.is_file()) if inv else []:
        inv.skip(f, "rtt", "not in rtt/baseline/ or rtt/under-load/")
    return samples, summary


# --- the whole directory --------------------------------------------------------------------------
def ingest_thesis(datadir: str | Path, outdir: str | Path, progress=print, labels: Labels | None = None,
                  **label_args) -> dict[str, int]:
    """Ingest whichever of pps/, loss/, rtt/ exist; returns rows written per kind. Writes
    <outdir>/provenance.json: labels, rules, clock skew, and every file's fate. label_args: lb,
    server, testbed, split_map, timeout_s (load_labels)."""
    datadir, outdir = Path(datadir), Path(outdir)
    if not datadir.is_dir():
        raise DataError(f"Failed to ingest thesis data {datadir}: no such directory")
    lab = labels or load_labels(datadir, **label_args)
    inv = Inventory(datadir)
    if (datadir / MANIFEST).exists():
        inv.use(datadir / MANIFEST, "manifest")
    written, skew, out = {}, None, {}
    if (datadir / "pps").is_dir():
        out["pps"] = ingest_pps(datadir / "pps", lab, inv)
    if (datadir / "loss").is_dir():
        out["loss"], skew = ingest_loss(datadir / "loss", lab, inv)
    if (datadir / "rtt").is_dir():
        out["rtt_samples"], out["rtt_summary"] = ingest_rtt(datadir / "rtt", lab, inv)
    for e in inv.pending():
        top = e.path.split("/")[0]
        e.reason = ("documentation, not a measurement" if "/" not in e.path
                    and e.path.lower().endswith((".md", ".rst", ".html", ".pdf")) else
                    "not in pps/, loss/ or rtt/" if "/" not in e.path else
                    f"in a subdirectory of {top}/ that the layout does not have" if top in ("pps", "loss", "rtt")
                    else f"{top}/ is not one of pps/, loss/, rtt/")
    if not out:
        raise DataError(f"Failed to ingest thesis data {datadir}: none of pps/, loss/, rtt/ present")
    if not any(out.values()):
        raise DataError(f"Failed to ingest thesis data {datadir}: no file could be used "
                        f"({'; '.join(f'{e.path}: {e.reason}' for e in inv.entries.values())[:600]})")
    how = (f"raw data laid out like the thesis's ({datadir.resolve().name}) through xenobench.ingest; labels "
           f"{', '.join(f'{k}={v}' for k, v in asdict(lab).items() if v not in (None, {}))}; every raw "
           "file's fate in provenance.json")
    for kind, rows in out.items():
        write_tidy(kind, rows, outdir, how=how)
        written[kind] = len(rows)
    prov = {"datadir": datadir.resolve().name, "labels": asdict(lab),  # no machine paths in results
            "rules": {"steady_state": "xenobench.steady.steady_state",
                      "rtt_pairing": "xenobench.pcap_rtt (module docstring)",
                      "timeout_s": lab.timeout_s if lab.timeout_s is not None else _default_timeout()},
            "clock_skew": skew, "files": [asdict(e) for e in inv.entries.values()]}
    outdir.mkdir(parents=True, exist_ok=True)
    (outdir / PROVENANCE).write_text(json.dumps(prov, indent=1, ensure_ascii=False) + "\n")
    if "pps" in written:
        progress(f"pps: {written['pps']} rows ({sum(1 for r in out['pps'] if r['metric'] == 'rx_pps')} trials)")
    if "loss" in written:
        progress(f"loss: {written['loss']} rows; clock skew {skew.get('median_pct')} % (tolerance "
                 f"{skew.get('tolerance_pct')} %, {skew.get('trials')} trials below capacity)")
    if "rtt_samples" in written:
        progress(f"rtt: {written['rtt_samples']} samples")
    for line in provenance_lines(prov):
        progress(line)
    return written


def _default_timeout() -> float:
    from .pcap_rtt import default_timeout_s
    return default_timeout_s()


def provenance_lines(prov: dict | str | Path) -> list[str]:
    """Plain lines for stderr and the report: counts, then every skipped or refused file with its
    reason and every flag. `prov`: the provenance dict, its file, or the results directory."""
    if not isinstance(prov, dict):
        p = Path(prov)
        p = p / PROVENANCE if p.is_dir() else p
        try:
            prov = json.loads(p.read_text())
        except (OSError, ValueError) as e:
            raise DataError(f"Failed to read provenance {p}: {e}") from None
    files = prov.get("files", [])
    count = {s: sum(1 for f in files if f["status"] == s) for s in ("used", "skipped", "refused")}
    lab = prov.get("labels", {})
    out = [f"files: {count['used']} used, {count['skipped']} skipped, {count['refused']} refused "
           f"(labels from {lab.get('source', '?')}: lb {lab.get('lb')}, server {lab.get('server')})"]
    out += [f"{f['status']}: {f['path']}: {f['reason']}" for f in files if f["status"] != "used"]
    out += [f"flagged: {f['path']}: {fl}" for f in files for fl in f.get("flags", [])]
    return out
