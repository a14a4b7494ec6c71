"""Runs a scenario of STLClient calls (lbr-trex-client 3.4.0, unmodified) against a TRex server and
prints one JSON result per step; used by tests/test_trex_standin.py inside the stand-in's network
namespace (the TRex client replaces scapy and PyYAML in its process, so it never runs in pytest's).

stdin: {"sync_port", "async_port", "steps": [{"op": ..., "client": name, ...}, ...]}
ops: connect (user), acquire (force), load (profile, tunables: reset + add_streams on port 0),
start (mult, duration, force), wait, stats, release, disconnect, rpc (method, params; the client's
own RPC channel, with its api handler and, if owned, its port handler added).
stdout: a JSON list, per step {"ok": value} or {"error": str(TRexError)}.
"""

import json
import sys
import warnings


def main() -> int:
    warnings.simplefilter("ignore")
    # the client's bundled scapy imports matplotlib.pyplot only to offer plotting, most of the
    # client's import time; this process never plots (as xenobench/traffic/stl_loader.py loads it)
    sys.modules.setdefault("matplotlib", None)
    import lbr_trex_client  # noqa: F401  (puts trex on sys.path)
    from trex.common.trex_exceptions import TRexError
    from trex.stl.api import STLClient, STLProfile

    job = json.load(sys.stdin)
    clients, out = {}, []
    for st in job["steps"]:
        name = st.get("client", "a")
        c = clients.get(name)
        try:
            op = st["op"]
            if op == "connect":
                c = clients[name] = STLClient(username=st.get("user", name), server="127.0.0.1",
                                              sync_port=job["sync_port"], async_port=job["async_port"])
                c.connect()
                val = c.get_server_version()["version"]
            elif op == "acquire":
                c.acquire(ports=[0], force=st.get("force", False))
                val = None
            elif op == "load":
                c.reset(ports=[0])
                prof = STLProfile.load_py(st["profile"], direction=0, port_id=0, tunables=st.get("tunables", []))
                c.add_streams(prof.get_streams(), ports=[0])
                val = [s.to_json()["vm"].get("cache") for s in prof.get_streams()]
            elif op == "start":
                c.clear_stats(ports=[0])
                c.start(ports=[0], mult=st["mult"], duration=st["duration"], force=st.get("force", True))
                val = None
            elif op == "wait":
                c.wait_on_traffic(ports=[0], timeout=st.get("timeout", 60))
                val = None
            elif op == "stats":
                s = c.get_stats(ports=[0])
                val = {"opackets": s[0]["opackets"], "obytes": s[0]["obytes"], "oerrors": s[0]["oerrors"],
                       "queue_full": s["global"]["queue_full"], "xstats": c.get_xstats(0)}
            elif op == "release":
                c.release(ports=[0])
                val = None
            elif op == "disconnect":
                c.disconnect()
                val = None
            elif op == "rpc":
                params = dict(st.get("params", {}))
                if st.get("owned"):
                    params["handler"] = c.ports[0].handler
                rc = c.conn.rpc.transmit(st["method"], params=params)
                if not rc:
                    raise TRexError(rc.err())
                val = rc.data()
            else:
                raise ValueError(f"unknown op {op!r}")
            out.append({"ok": val})
        except TRexError as e:
            out.append({"error": str(e)})
    for c in clients.values():
        try:
            c.disconnect()
        except TRexError:
            pass
    print()
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
