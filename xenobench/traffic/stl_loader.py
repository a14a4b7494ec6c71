"""Load a TRex STL profile with the TRex client library and print its streams as JSON.

Runs in its own process (`python -m xenobench.traffic.stl_loader PROFILE ARG...`): importing the
TRex client replaces any scapy already imported by its bundled scapy 2.4.3 (trex/__init__.py
drops foreign scapy modules from sys.modules), which must not happen inside the harness.

Output (stdout, one JSON object): {"ok": true, "streams": [STLStream.to_json(), ...]} or
{"ok": false, "error": "<reason>"}.
"""

import contextlib
import io
import json
import sys
import warnings


def main(argv: list[str]) -> int:
    path, tunables = argv[0], argv[1:]
    warnings.simplefilter("ignore")
    err = io.StringIO()
    try:
        import lbr_trex_client  # noqa: F401  (puts trex on sys.path)
        from trex.stl.api import STLProfile
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(err):
            prof = STLProfile.load_py(path, direction=0, port_id=0, tunables=tunables)
    except Exception as e:  # TRexError carries the profile's traceback summary
        text = str(e).strip().splitlines()
        print(json.dumps({"ok": False, "error": text[-1] if text else type(e).__name__}))
        return 0
    if prof is None:  # argparse error or --help: load_py swallows SystemExit
        lines = [l for l in err.getvalue().splitlines() if l.strip()]
        msg = next((l.split("error:", 1)[1].strip() for l in reversed(lines) if "error:" in l), None)
        print(json.dumps({"ok": False, "error": msg or "bad tunables: " + (lines[-1] if lines else "no output"),
                          "help": err.getvalue()}))
        return 0
    print(json.dumps({"ok": True, "streams": [s.to_json() for s in prof.get_streams()]}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
