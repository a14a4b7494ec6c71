"""Programs that run on a testbed node, driven by the harness over a transport.

Each module here is a small program (`python -m xenobench.agents.<name> ...`) or a helper for one:
the RTT prober, the DNS servers and the XDP responder's controller, the eBPF LB's controller, the
UDP check, the backends parser. They import nothing of the harness but `xenobench.errors` and
each other (no config schema, no pandas, no matplotlib), so a node needs only Python, numpy,
dnspython and bpftool. Drivers (xenobench.lb, xenobench.dns, xenobench.rtt, xenobench.traffic)
import agents, never the reverse; tests/test_layout.py checks it.
"""
