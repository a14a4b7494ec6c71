"""Load a TRex STL profile with the TRex client library and print its streams as JSON.

Runs in its own process (`python -m xenobench.traffic.stl_loader PROFILE ARG...`): importing the
TRex client replaces any scapy already imported by its bundled scapy 2.4.3 (trex/__init__.py
drops foreign scapy modules from sys.modules), which must not happen inside the harness. The TRex
worker (trex_worker.py), which has the client imported already, calls load() directly.

The profile is loaded by the client's own loader, as TRex's console `start -f FILE -t ...` loads it
(trex/stl/trex_stl_client.py: STLClient.start_line → STLProfile.load): by its suffix (.py, .json,
.yaml, .pcap), the tunables as an argv list. Profiles written for TRex 2.x import
`trex_stl_lib.api`; the client ships that module (interactive/trex_stl_lib/api.py re-exports
trex.stl.api), on sys.path once lbr_trex_client is imported.

Output (stdout, one JSON object): {"ok": true, "streams": [STLStream.to_json(), ...]} or
{"ok": false, "error": "<reason>"} where the reason is the loader's own: the last line of its
error (the exception the profile raised, with the profile's file and line), or argparse's message.
"""

import contextlib
import io
import json
import re
import sys
import warnings


class Refused(Exception):
    """The client's loader refused the profile; str() is its reason, .help the profile's output."""

    def __init__(self, reason: str, help_text: str = ""):
        super().__init__(reason)
        self.help = help_text


_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)')


def reason_of(text: str, path: str = "") -> str:
    """The loader's reason from a TRexError: load_py wraps what the profile raised as
    "Python Traceback follows: ... File "<f>", line N, in fn ... ExcType: message"
    (trex/stl/trex_stl_streams.py: STLProfile.load_py) → "ExcType: message (f line N, in fn)",
    the place being the profile's own last frame (none if it failed inside the library)."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return "no reason given"
    frames = [m for m in map(_FRAME.match, lines) if m and m.group(1) == path]
    last = lines[-1].strip()
    if frames:
        f, n, fn = frames[-1].groups()
        return f"{last} ({f.rsplit('/', 1)[-1]} line {n}, in {fn})"
    return last


@contextlib.contextmanager
def without_matplotlib():
    """matplotlib unimportable for the block, unless already imported. The client's bundled scapy
    2.4.3 imports matplotlib.pyplot at start-up only to offer plotting (scapy/extlib.py: without it
    plt is None and MATPLOTLIB 0); the STL loader never plots, and the import is most of the
    client's import time. A profile that imports matplotlib itself still can: the block ends before
    the profile is loaded."""
    if "matplotlib" in sys.modules:
        yield
        return
    sys.modules["matplotlib"] = None  # the import system raises ImportError for a None entry
    try:
        yield
    finally:
        if sys.modules.get("matplotlib", 0) is None:
            del sys.modules["matplotlib"]


def load(path: str, tunables: list[str], direction: int = 0, port_id: int = 0, kwargs: dict | None = None) -> list:
    """STLProfile.load(path, direction, port_id, tunables=...) → its STLStream list; Refused with
    the loader's reason. Output the profile prints goes to the Refused's help (or nowhere).
    kwargs: keyword arguments for the profile's get_streams besides the argv tunables, as TRex's
    simulator (trex_stl_sim.py) passes `-t key=value` tunables both ways."""
    with without_matplotlib():
        import lbr_trex_client  # noqa: F401  (puts trex and trex_stl_lib on sys.path)
        from trex.stl.api import STLProfile
    out = io.StringIO()
    try:
        with contextlib.redirect_stderr(out), contextlib.redirect_stdout(out):
            prof = STLProfile.load(path, direction=direction, port_id=port_id, tunables=list(tunables),
                                   **(kwargs or {}))
    except SystemExit:  # argparse at the profile's module level: load_py catches it only in get_streams
        prof = None
    except Exception as e:  # noqa: BLE001  TRexError carries the profile's traceback summary
        raise Refused(reason_of(str(e), path)) from None
    if prof is None:  # argparse error or --help: load_py swallows SystemExit
        lines = [line for line in out.getvalue().splitlines() if line.strip()]
        msg = next((line.split("error:", 1)[1].strip() for line in reversed(lines) if "error:" in line), None)
        raise Refused(msg or "bad tunables: " + (lines[-1] if lines else "no output"), out.getvalue())
    streams = prof.get_streams()
    return list(streams) if isinstance(streams, (list, tuple)) else [streams]


def batch(jobs: list) -> dict:
    """Several profiles in one process: [[key, path, argv, kwargs], ...] → {key: result}."""
    out = {}
    for key, path, tunables, kwargs in jobs:
        try:
            out[key] = {"ok": True, "streams": [s.to_json() for s in load(path, tunables, kwargs=kwargs)]}
        except Refused as e:
            out[key] = {"ok": False, "error": str(e)}
        except Exception as e:  # noqa: BLE001  the profile's own failure, reported as the loader reports it
            out[key] = {"ok": False, "error": reason_of(f"{type(e).__name__}: {e}")}
    return out


def main(argv: list[str]) -> int:
    warnings.simplefilter("ignore")
    if argv[:1] == ["--batch"]:   # jobs as JSON on stdin, results as one JSON object on stdout
        res = batch(json.loads(sys.stdin.read()))
        print(json.dumps(res))
        return 0
    path, tunables = argv[0], argv[1:]
    try:
        streams = load(path, tunables)
        res = {"ok": True, "streams": [s.to_json() for s in streams]}
    except Refused as e:
        res = {"ok": False, "error": str(e), "help": e.help}
    except Exception as e:  # noqa: BLE001  e.g. a stream the client cannot turn into JSON
        res = {"ok": False, "error": reason_of(f"{type(e).__name__}: {e}")}
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
