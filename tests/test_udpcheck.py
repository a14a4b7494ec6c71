"""udpcheck recv proves a datagram to the VIP reached a backend without the VIP configured there
(a UDP socket bound to the VIP failed EADDRNOTAVAIL on the SSH testbed)."""

import time

from .conftest import needs_root, send_udp

NOT_HERE = "10.99.0.45"  # an address configured on no node of the testbed


@needs_root
def test_recv_without_the_address_configured_on_the_backend(testbed):
    b = testbed.cfg.backend_nodes()[-1]
    node = testbed.node(b.name)
    assert NOT_HERE not in node.run(["ip", "-o", "addr"]).stdout
    token = f"xbd-check-{time.time_ns()}"
    offset = len(node.read_text(node.log_path("udpcheck-test")))  # logs are appended across runs
    h = node.start_until("udpcheck-test", node.python_argv(
        "xenobench.agents.udpcheck", "recv", "--bind", NOT_HERE, "--iface", b.iface().name,
        "--port", "9", "--expect", token, "--timeout", "5"), "listening on", what="udpcheck recv")
    try:
        send_udp(testbed, "client", dst_mac=b.iface().mac, dst_ip="10.99.0.46", port=9, payload=token, count=1)
        send_udp(testbed, "client", dst_mac=b.iface().mac, dst_ip=NOT_HERE, port=8, payload=token, count=1)
        send_udp(testbed, "client", dst_mac=b.iface().mac, dst_ip=NOT_HERE, port=9, payload=token, count=1)
        deadline = time.monotonic() + 5
        while node.running("udpcheck-test") and time.monotonic() < deadline:
            time.sleep(0.05)
        out = node.read_text(h.log)[offset:].strip().splitlines()
    finally:
        node.stop("udpcheck-test")
    ci = testbed.cfg.role("client").iface()
    # it says when its socket is bound (the sender waits for that); then only the datagram to
    # NOT_HERE:9 matched (other address, other port ignored)
    assert out == [f"listening on {b.iface().name}", f"received {len(token)} bytes from {ci.addr}:40000"]
