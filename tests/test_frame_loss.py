"""The report's "Where frames were lost" from fixture trial outputs (no testbed): an LB on the host
(the eBPF LB on fips5's port) and an LB in the DPU's eSwitch (XenoFlow's DOCA build on fips5-dpu,
whose frames enter p0 and leave p1 through the hairpin and never touch the host port). Each
fixture row gives the counts at every stage; the report must put each where it was lost."""

import json

import pytest

from xenobench.config import DEFAULT_CONFIG, load_config
from xenobench.layout import ResultsTree
from xenobench.report import DPU_STAGES, HOST_STAGES, _drop_rows, _drop_section

FIPS = DEFAULT_CONFIG.parent / "fips.yaml"


def _view(**v):
    return {"view": v}


def _trial(root, cfg, experiment, lb, point, counters, generator, valid=True, **extra):
    t = ResultsTree(root, cfg.name).trial(experiment, point, 1)
    att = t.attempt(1)
    att.path.mkdir(parents=True)
    t.metadata.write_text(json.dumps({"config": str(FIPS)}))
    att.outputs.write_text(json.dumps({"counters": counters, "generator": generator, **extra}))
    return t, {"experiment": experiment, "valid": valid, "chosen_attempt": 1, "outputs": {"facts": {"lb": lb}}}


def _names(cfg):
    lb = cfg.role("lb")
    dpu = cfg.nodes_with_role("dpu")[0]
    backends = [f"{b.name}:{b.iface().name}" for b in cfg.backend_nodes()]
    return (f"{lb.name}:{lb.iface().name}", f"{dpu.name}:{dpu.lb_port('ingress').name}",
            f"{dpu.name}:{dpu.lb_port('egress').name}", backends)


# (what, sent, link, refused, at-port or ingress counters, LB counters, backend rx each, expected stages, worst)
HOST_CASES = [
    # 1000 made, 990 taken by the device (10 refused: tx_dropped), 980 at the port (10 in the switch),
    # 30 dropped at its ring, 950 received, 940 sent back out (10 in the LB), 900 received (40 after)
    ("losses at every stage", 1000, 990, 10, dict(rx_packets=950, rx_dropped=30), 940, 450,
     [20, 10, 30, 10, 40], "after the LB"),
    ("nothing lost", 500, 500, 0, dict(rx_packets=500, rx_dropped=0), 500, 250, [0, 0, 0, 0, 0], "nowhere"),
]


@pytest.mark.parametrize("what,sent,link,refused,ing,tx,rx_each,stages,worst", HOST_CASES,
                         ids=[c[0] for c in HOST_CASES])
def test_frame_loss_of_an_lb_on_the_host(tmp_path, what, sent, link, refused, ing, tx, rx_each, stages, worst):
    cfg = load_config(FIPS)
    host_port, p0, p1, backends = _names(cfg)
    counters = {host_port: _view(**ing, tx_packets=tx), **{b: _view(rx_packets=rx_each) for b in backends}}
    trials = [_trial(tmp_path, cfg, "pps", "ebpf", {"lb": "ebpf", "payload": 22}, counters,
                     {"tx_packets": sent, "tx_link_packets": link, "tx_dropped": refused})]
    host, dpu = _drop_rows(trials)
    assert dpu == []
    assert host == [["pps", "ebpf", sent, *stages, rx_each * len(backends), worst]]
    assert len(HOST_STAGES) == len(stages)


# XenoFlow in the eSwitch: p0's phy counters, its per-backend counters (lb_forwarded), p1's phy
# counters; the host port sees none of it (0), which the old table read as "after the LB: negative"
DPU_CASES = [
    # 1000 made, 990 taken by the device (10 refused: tx_dropped), 980 reach p0 (10 in the switch) of
    # which 20 discarded (no buffer); 960 received, 950 forwarded by entries (10 missed the pipe); 945
    # out of p1 (5 in the hairpin); 900 received (45 after)
    ("losses at every stage", 1000, 990, 10, dict(rx_packets_phy=980, rx_discards_phy=20), 950, 945, 450,
     [20, 10, 20, 10, 5, 45], "after the LB"),
    ("the pipe misses most (a wrong class mask)", 1000, 1000, 0, dict(rx_packets_phy=1000, rx_discards_phy=0), 400,
     400, 200, [0, 0, 0, 600, 0, 0], "the LB's pipe"),
    ("a backend's own ARP: stray, not a disagreement", 1000, 1000, 0, dict(rx_packets_phy=1000, rx_discards_phy=0),
     1000, 1000, 501, [0, 0, 0, 0, 0, "0 (2 stray)"], "nowhere"),
]


@pytest.mark.parametrize("what,sent,link,refused,p0,fwd,p1_tx,rx_each,stages,worst", DPU_CASES,
                         ids=[c[0] for c in DPU_CASES])
def test_frame_loss_of_an_lb_in_the_dpu_eswitch(tmp_path, what, sent, link, refused, p0, fwd, p1_tx, rx_each,
                                                stages, worst):
    cfg = load_config(FIPS)
    host_port, p0_key, p1_key, backends = _names(cfg)
    counters = {host_port: _view(rx_packets=0, rx_dropped=0, tx_packets=0),  # not on the frames' path
                p0_key: _view(**p0, tx_packets_phy=0), p1_key: _view(rx_packets_phy=0, rx_discards_phy=0,
                                                                       tx_packets_phy=p1_tx),
                **{b: _view(rx_packets=rx_each) for b in backends}}
    trials = [_trial(tmp_path, cfg, "pps", "xenoflow", {"lb": "xenoflow", "payload": 22}, counters,
                     {"tx_packets": sent, "tx_link_packets": link, "tx_dropped": refused}, lb_forwarded=fwd)]
    host, dpu = _drop_rows(trials)
    assert host == []
    assert dpu == [["pps", "xenoflow", sent, *stages, rx_each * len(backends), worst]]
    assert len(DPU_STAGES) == len(stages)
    text = "\n".join(_drop_section(trials))
    assert "counters disagree" not in text and "LB in the DPU's eSwitch (XenoFlow on the BlueField)" in text


def test_both_tables_and_what_is_left_out(tmp_path):
    """One study with both LBs: a table each; an invalid trial and a DPU trial without the LB's own
    count (its stats unreadable) are left out of the sums, not guessed."""
    cfg = load_config(FIPS)
    host_port, p0, p1, backends = _names(cfg)
    gen = {"tx_packets": 100, "tx_link_packets": 100, "tx_dropped": 0}
    be = {b: _view(rx_packets=50) for b in backends}
    dpu_c = {p0: _view(rx_packets_phy=100, rx_discards_phy=0), p1: _view(tx_packets_phy=100), **be}
    trials = [
        _trial(tmp_path / "a", cfg, "pps", "ebpf", {"lb": "ebpf", "payload": 22},
               {host_port: _view(rx_packets=100, rx_dropped=0, tx_packets=100), **be}, gen),
        _trial(tmp_path / "b", cfg, "pps", "xenoflow", {"lb": "xenoflow", "payload": 22}, dpu_c, gen,
               lb_forwarded=100),
        _trial(tmp_path / "c", cfg, "pps", "xenoflow", {"lb": "xenoflow", "payload": 64}, dpu_c, gen,
               lb_forwarded=None),
        _trial(tmp_path / "d", cfg, "pps", "xenoflow", {"lb": "xenoflow", "payload": 128}, dpu_c, gen,
               valid=False, lb_forwarded=1),
    ]
    host, dpu = _drop_rows(trials)
    assert host == [["pps", "ebpf", 100, 0, 0, 0, 0, 0, 100, "nowhere"]]
    assert dpu == [["pps", "xenoflow", 100, 0, 0, 0, 0, 0, 0, 100, "nowhere"]]
    text = _drop_section(trials)
    assert text[0] == "## Where frames were lost (offered-load trials, from the trials' counters)"
    heads = [line for line in text if line.startswith("| experiment")]
    assert len(heads) == 2 and "at the DPU's port" in heads[1] and "in the hairpin" in heads[1]
