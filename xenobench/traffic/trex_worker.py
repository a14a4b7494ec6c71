"""One TRex trial in a child process: `python -m xenobench.traffic.trex_worker`.

Why a child: importing the TRex client (trex/__init__.py) evicts the harness's scapy, yaml and zmq
from sys.modules and puts its bundled copies (scapy 2.4.3, PyYAML 3.11) first on sys.path, which
would break later imports in the harness process.

Protocol (JSON lines): stdin line 1 = the job {"tcfg", "profile", "tunables", "spec" (a
TrialSpec as a dict)}; stdout: {"event": "started"} once traffic runs, then {"event": "result", "result": {...}};
or {"event": "error", "error": "Failed to ..."}. A line "stop" on stdin ends the trial early.
"""

import json
import sys
import threading
import warnings


def emit(obj) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main() -> int:
    warnings.simplefilter("ignore")
    from xenobench.errors import XenobenchError
    from xenobench.traffic.trex import TrexDriver, _stl_client_class, _stl_profile_loader
    from xenobench.traffic.trial import TrialSpec
    job = json.loads(sys.stdin.readline())
    spec = TrialSpec(**job["spec"])
    try:
        drv = TrexDriver(job["tcfg"], client_factory=_stl_client_class(), profile_loader=_stl_profile_loader)
        run = drv.start(job["profile"], job["tunables"], spec)
    except XenobenchError as e:
        emit({"event": "error", "error": str(e)})
        return 0
    except Exception as e:  # noqa: BLE001  any library failure becomes one clear line
        emit({"event": "error", "error": f"Failed to start traffic on TRex: {type(e).__name__}: {e}"})
        return 0
    emit({"event": "started"})
    stop = threading.Event()

    def watch_stdin():
        for line in sys.stdin:
            if line.strip() == "stop":
                break
        stop.set()  # "stop" or the parent went away

    threading.Thread(target=watch_stdin, daemon=True).start()
    try:
        if spec.duration_s:
            done = threading.Event()
            box = {}

            def waiter():
                try:
                    box["r"] = run.wait()
                except XenobenchError as e:  # the trial stopped meanwhile ("stop"), or the server is gone
                    box["e"] = e
                done.set()
            threading.Thread(target=waiter, daemon=True).start()
            while not done.is_set() and not stop.is_set():
                done.wait(0.1)
            if done.is_set() and "e" in box:
                raise box["e"]
            res = box["r"] if done.is_set() else run.stop()
        else:
            stop.wait()
            res = run.stop()
        emit({"event": "result", "result": res})
    except XenobenchError as e:
        emit({"event": "error", "error": str(e)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
