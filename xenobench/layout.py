"""The results tree: where every record of a run lives. The one owner of these names; the trial
runner, the procedures, aggregation, the report and the workflow's rules ask here.

    results/<testbed>/                              ResultsTree(root, testbed).dir
        trials/<experiment>/<point-id>/             .point_dir(experiment, point)
            point.json                              .point_summary(...): the point's rule output
            rep-<r>/                                TrialDir: one trial (a repetition)
                params.json  metadata.json          what was asked, on which host and software
                attempt-<n>/                        AttemptDir: one attempt of the trial
                    counters_before.json  counters_after.json  outputs.json  validity.json
                    probes.jsonl  probes.pcap       the prober's raw records and capture
                    block-<b>-<lb>/probes.jsonl     paired RTT design: block b (1-based, in the
                                                    order run) measured with LB lb (.block(b, lb))
                search/                             SearchDir (.search): an NDR/PDR search
                    trial-<k>/                      TrialDir: the search's k-th measurement, a
                                                    normal trial (params, attempts, result.json)
                    search.json                     the search's record (goals, bounds, trials),
                                                    written last: the search is complete
                result.json                         written last: the trial is complete
        <kind>.csv  invalid.csv  report.md          tidy rows of the valid trials (xenobench.results)
        logs/<experiment>/<point-id>.log            the rule's log

A point's id is its variables in order (`lb-ebpf_payload-22`), so a result's key is explicit in
its path; re-running skips every trial whose result.json exists.
"""

from __future__ import annotations

import errno
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from .errors import DataError

POINT_SUMMARY = "point.json"
RESULT = "result.json"


def point_id(point: dict) -> str:
    """Stable directory name of a point: key-value pairs in the given order."""
    return "_".join(f"{k}-{v}".replace("/", "-") for k, v in point.items())


def write_json_atomic(path: Path, data, **kw) -> None:
    """Write through a temporary file, fsync'd, and rename (the directory fsync'd after), so a
    reader, a rerun after a kill or a machine that lost power sees the old file or the whole new
    one, never half of it. A failed write (a full disk) removes the temporary file and is one
    DataError naming the file and the fix; `path` is then as it was. So does any other way out
    (an interrupt): no temporary file is left."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    text = json.dumps(data, **kw)
    try:
        try:
            with open(tmp, "w") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            tmp.replace(path)
        except BaseException:
            if tmp.parent.is_dir():  # not there (or not a directory): the reason is the open's, not unlink's
                tmp.unlink(missing_ok=True)
            raise
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as e:
        raise write_failed(path, e) from None


def write_failed(path, e: OSError) -> DataError:
    """The one message of a record that could not be written: the file, why, and the fix."""
    fix = ("free space on its file system, or give --results a directory on another one, and run the "
           "same command again (the trial is re-run)" if e.errno in (errno.ENOSPC, errno.EDQUOT) else
           "check the directory's permissions and file system")
    return DataError(f"Failed to write {path}: {e.strerror or e} ({fix})")


def check_results_root(d: Path, min_free_mb: int, key: str = "experiments.min_free_mb") -> None:
    """Refuse a results root that cannot become a writable directory (naming the part in the way)
    or whose file system has fewer than `min_free_mb` MB free: before the testbed goes up and before
    a point's first trial, not half-way through a study (a full disk mid-trial is refused by
    write_failed, nothing half-written kept)."""
    d = Path(d)
    p = d
    while not p.exists() and p != p.parent:
        p = p.parent
    if not p.is_dir():
        raise DataError(f"Failed to use results directory {d}: {p} is not a directory (give --results a directory)")
    if not os.access(p, os.W_OK | os.X_OK):
        raise DataError(f"Failed to use results directory {d}: {p} is not writable (check its permissions, or "
                        "give --results another directory)")
    st = os.statvfs(p)
    free = st.f_bavail * st.f_frsize
    need = int(min_free_mb) << 20
    if free < need:
        raise DataError(f"Failed to use results directory {d}: its file system has {free} bytes free "
                        f"({free / (1 << 20):.1f} MB), below {key} = {min_free_mb} MB ({need} bytes); free "
                        f"space there, give --results a directory on another file system, or lower {key}")


MAX_JSON_BYTES = 256 << 20  # a trial's largest record (probe outputs of a long RTT trial) is a few MB


def read_json(path: Path, what: str):
    """A record of the results tree; any failure is one DataError naming the file."""
    from .config import read_capped
    try:
        return json.loads(read_capped(Path(path), MAX_JSON_BYTES))
    except FileNotFoundError:
        raise DataError(f"Failed to read {what} {path}: no such file") from None
    except OSError as e:
        raise DataError(f"Failed to read {what} {path}: {e.strerror or e}") from None
    except RecursionError:
        raise DataError(f"Failed to read {what} {path}: nested too deeply to be a record") from None
    except ValueError as e:  # not JSON, not UTF-8, too large
        raise DataError(f"Failed to read {what} {path}: {e}") from None


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


# result.json's keys and what each must be (xenobench.trials.run_trial writes them)
_RESULT_KEYS = {"experiment": (str, "a string"), "point": (dict, "an object"),
                "repetition": (_is_int, "an integer >= 1"), "valid": (bool, "true or false (a JSON boolean)"),
                "attempts": (list, "a list"), "chosen_attempt": (_is_int, "an integer"),
                "outputs": (dict, "an object")}


def chosen_reasons(res: dict) -> list[str]:
    """The validity reasons of a result.json's chosen attempt (the one its outputs are)."""
    return [str(r) for a in res["attempts"] if a["attempt"] == res["chosen_attempt"] for r in a["reasons"]]


def check_result(res, where) -> None:
    """Refuse a result.json that run_trial could not have written, naming the key and value."""
    def bad(key, v, want):
        raise DataError(f"Failed to read trial result {where}: {key}: {json.dumps(v, default=str)[:60]} is not {want}")
    if not isinstance(res, dict):
        bad("(top level)", res, "an object")
    for key, (kind, want) in _RESULT_KEYS.items():
        if key not in res:
            raise DataError(f"Failed to read trial result {where}: {key}: missing")
        ok = kind(res[key]) if callable(kind) and not isinstance(kind, type) else isinstance(res[key], kind)
        if not ok or (key == "repetition" and res[key] < 1):
            bad(key, res[key], want)
    for i, a in enumerate(res["attempts"]):
        if not (isinstance(a, dict) and _is_int(a.get("attempt")) and isinstance(a.get("reasons"), list)):
            bad(f"attempts[{i}]", a, "an object with attempt (an integer) and reasons (a list)")
    if not any(a["attempt"] == res["chosen_attempt"] for a in res["attempts"]):
        bad("chosen_attempt", res["chosen_attempt"], "one of the attempts")


@dataclass(frozen=True)
class AttemptDir:
    path: Path

    @property
    def counters_before(self) -> Path:
        return self.path / "counters_before.json"

    @property
    def counters_after(self) -> Path:
        return self.path / "counters_after.json"

    @property
    def outputs(self) -> Path:
        return self.path / "outputs.json"

    @property
    def validity(self) -> Path:
        return self.path / "validity.json"

    @property
    def probe_records(self) -> Path:
        """The prober's raw records (JSON lines); its capture is the same name with .pcap."""
        return self.path / "probes.jsonl"

    @property
    def trial(self) -> "TrialDir":
        """The trial this attempt belongs to (<trial>/attempt-<n>)."""
        return TrialDir(self.path.parent)

    def block(self, n: int, lb: str) -> "BlockDir":
        """Block n (1-based, in run order) of a paired RTT repetition, measured with LB `lb`."""
        return BlockDir(self.path / f"block-{n}-{lb}")


@dataclass(frozen=True)
class BlockDir:
    path: Path

    @property
    def probe_records(self) -> Path:
        return self.path / "probes.jsonl"


@dataclass(frozen=True)
class TrialDir:
    path: Path

    @property
    def params(self) -> Path:
        return self.path / "params.json"

    @property
    def metadata(self) -> Path:
        return self.path / "metadata.json"

    @property
    def result(self) -> Path:
        return self.path / RESULT

    @property
    def complete(self) -> bool:
        return self.result.exists()

    def attempt(self, n: int) -> AttemptDir:
        return AttemptDir(self.path / f"attempt-{n}")

    def read_result(self) -> dict:
        """result.json, checked key by key (a malformed file is named, never a KeyError later)."""
        res = read_json(self.result, "trial result")
        check_result(res, self.result)
        if self.path.name.startswith("rep-") and res["repetition"] != check_trial_dir(self.path):
            raise DataError(f"Failed to read trial result {self.result}: repetition: {res['repetition']} is not "
                            f"{self.path.name}'s (a copied or moved trial?)")
        return res

    def write_result(self, result: dict) -> None:
        write_json_atomic(self.result, result, indent=1, default=str)

    @property
    def search(self) -> "SearchDir":
        return SearchDir(self.path / "search")

    @property
    def results_dir(self) -> Path:
        """results/<testbed>: the tree this trial belongs to (trials/<experiment>/<point>/rep-<n>)."""
        return self.path.parents[3]


SEARCH_RECORD = "search.json"


@dataclass(frozen=True)
class SearchDir:
    """One NDR/PDR search (xenobench.search): its trials and its record."""
    path: Path

    def trial(self, k: int) -> TrialDir:
        return TrialDir(self.path / f"trial-{k}")

    @property
    def record(self) -> Path:
        return self.path / SEARCH_RECORD

    @property
    def complete(self) -> bool:
        return self.record.exists()

    def trials(self) -> list[TrialDir]:
        """The search's trials in the order they were run (trial-1, trial-2, ...)."""
        ks = sorted(int(p.name.split("-", 1)[1]) for p in self.path.glob("trial-*")
                    if p.name.split("-", 1)[1].isdigit())
        return [self.trial(k) for k in ks]

    def read_record(self) -> dict:
        return read_json(self.record, "search record")

    def write_record(self, record: dict) -> None:
        write_json_atomic(self.record, record, indent=1, default=str)


@dataclass(frozen=True)
class ResultsTree:
    root: Path
    testbed: str

    @property
    def dir(self) -> Path:
        return Path(self.root) / self.testbed

    @property
    def trials_dir(self) -> Path:
        return self.dir / "trials"

    def point_dir(self, experiment: str, point: dict | str) -> Path:
        pid = point if isinstance(point, str) else point_id(point)
        return self.trials_dir / experiment / pid

    def point_summary(self, experiment: str, point: dict | str) -> Path:
        return self.point_dir(experiment, point) / POINT_SUMMARY

    def trial(self, experiment: str, point: dict | str, repetition: int) -> TrialDir:
        return TrialDir(self.point_dir(experiment, point) / f"rep-{repetition}")

    def completed_trials(self) -> Iterator[TrialDir]:
        """Every trial with a result, in sorted order. Trial directories are named strictly
        rep-<n> and are real directories: a copy (rep-1-copy) or a symlink (rep-7 -> rep-1) would
        count a trial twice, so either is refused by name (check_trial_dir)."""
        for d in sorted(self.trials_dir.glob("*/*/rep-*")):
            if (d / RESULT).exists() or d.is_symlink() or not d.is_dir():
                check_trial_dir(d)
                yield TrialDir(d)

    @classmethod
    def of(cls, resdir: Path) -> "ResultsTree":
        """The tree whose dir is `resdir` (results/<testbed>)."""
        resdir = Path(resdir)
        return cls(resdir.parent, resdir.name)


TRIAL_NAME = re.compile(r"rep-([1-9][0-9]*)")


def trial_results(resdir: Path) -> list[tuple[TrialDir, dict]]:
    """(trial, result.json) of every completed trial under <resdir>/trials, in sorted order."""
    if not Path(resdir).is_dir():
        raise DataError(f"Failed to read results {resdir}: no such directory (run the experiments first, or "
                        "give results/<testbed>)")
    return [(t, t.read_result()) for t in ResultsTree.of(resdir).completed_trials()]


def check_trial_dir(d: Path) -> int:
    """The repetition n of a trial directory named rep-<n>; anything else is refused by name."""
    m = TRIAL_NAME.fullmatch(d.name)
    if d.is_symlink():
        raise DataError(f"Failed to read trial {d}: a symlink (to {os.readlink(d)}); a trial directory is a real "
                        "directory, or it would be counted twice: remove the link")
    if m is None or not d.is_dir():
        raise DataError(f"Failed to read trial {d}: not a trial directory (rep-<n>, n = 1, 2, ...): move it "
                        "out of the results tree or rename it")
    return int(m.group(1))
