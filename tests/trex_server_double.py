"""Test double of a TRex v3.04 server (there is no TRex server and no DPDK NIC here).

It speaks TRex's wire protocol over real ZeroMQ on loopback: JSON-RPC 2.0 on a REP socket (the
sync port) and the async channel on a PUB socket, so the unmodified `trex.stl.api.STLClient` of
lbr-trex-client 3.4.0 talks to it exactly as to a real server, in this process or in the TRex
worker process, and every check the client makes itself runs (decode_multiplier, port state,
stream and profile validation, ownership).

It refuses what the real server refuses and we know of (trex-core src/stx/stl/trex_stl_rpc_cmds.cpp
and src/stx/common/trex_rpc_cmds_common.cpp, facts only): an API name other than STL; a port
beyond the port count; a command on a port without the acquire handler; a stream without a packet,
mode or a known rate type; a start_traffic without streams, with a multiplier type outside
raw/bps/bpsl1/pps/percentage, op other than "abs", or value <= 0. Each refusal is a JSON-RPC error
with the server's wording, so the client raises TRexError with it.

Traffic is simulated: a started port "sends" rate × duration frames (times `achieved` to model a
generator that falls short) and announces the end with the profile-finished event, as TRex does.
"""

from __future__ import annotations

import json
import random
import struct
import threading
import time
import zlib

import zmq

VERSION = "v3.04"
MULT_TYPES = ("raw", "bps", "bpsl1", "pps", "percentage")   # TrexPortMultiplier::g_types
LINE_RATE_BPS = 100e9                                        # a 100 Gbit/s ConnectX port
ZIP_MAGIC = 0xABE85CEA   # TRex's compressed-message header: magic, uncompressed length (big endian)
EV_PORT_STARTED, EV_PORT_STOPPED, EV_PORT_ACQUIRED, EV_PORT_RELEASED = 0, 1, 5, 6
EV_PROFILE_STARTED, EV_PROFILE_STOPPED, EV_PROFILE_FINISHED_TX = 10, 11, 14
XSTATS = ["rx_good_packets", "tx_good_packets", "rx_good_bytes", "tx_good_bytes", "rx_missed_errors",
          "rx_errors", "tx_errors", "rx_phy_packets", "tx_phy_packets"]


class RpcError(Exception):
    def __init__(self, msg, code=-32000):
        super().__init__(msg)
        self.code = code


class TrexServerDouble:
    """Start with `with TrexServerDouble(ports=2) as srv:`; srv.sync_port / srv.async_port;
    srv.calls: (method, params) in arrival order. achieved: fraction of the requested frames a
    port sends; queue_full: TRex's queue-full counter grows by this per transmission."""

    def __init__(self, ports: int = 2, achieved: float = 1.0, queue_full: int = 0, version: str = VERSION,
                 frame_len: int = 64):
        self.nports, self.achieved, self.queue_full, self.version = ports, achieved, queue_full, version
        self.frame_len = frame_len
        self.queue_full_total = 0   # grows by queue_full per transmission (the client reports the delta)
        self.calls: list[tuple[str, dict]] = []
        self.ports = {p: {"owner": "", "handler": None, "state": "IDLE", "streams": {}, "tx": None,
                          "opackets": 0, "obytes": 0, "mult": None} for p in range(ports)}
        self.events: list[dict] = []
        self.seq = 0
        self.lock = threading.Lock()
        self._stop = threading.Event()

    # --- lifecycle -------------------------------------------------------------------------
    def __enter__(self):
        self.ctx = zmq.Context()
        self.rep = self.ctx.socket(zmq.REP)
        self.sync_port = self.rep.bind_to_random_port("tcp://127.0.0.1")
        self.pub = self.ctx.socket(zmq.PUB)
        self.async_port = self.pub.bind_to_random_port("tcp://127.0.0.1")
        self.rep.setsockopt(zmq.RCVTIMEO, 100)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self.thread.join(5)
        self.rep.close(0)
        self.pub.close(0)
        self.ctx.term()

    def methods(self) -> list[str]:
        return [m for m, _ in self.calls if m not in ("get_async_events", "publish_now")]

    def call(self, method: str) -> list[dict]:
        return [p for m, p in self.calls if m == method]

    # --- the loop --------------------------------------------------------------------------
    def _serve(self):
        while not self._stop.is_set():
            self._tick()
            try:
                raw = self.rep.recv()
            except zmq.Again:
                continue
            zipped = len(raw) >= 8 and struct.unpack(">I", raw[:4])[0] == ZIP_MAGIC
            if zipped:
                raw = zlib.decompress(raw[8:])
            try:
                req = json.loads(raw.decode())
            except ValueError:
                req = None
            if req is None:
                out = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
            elif isinstance(req, list):
                out = [self._one(r) for r in req]
            else:
                out = self._one(req)
            data = json.dumps(out).encode()
            if zipped:   # the server answers a compressed request compressed
                data = struct.pack(">II", ZIP_MAGIC, len(data)) + zlib.compress(data)
            self.rep.send(data)
            if self._publish:
                self._publish = False
                self.pub.send(b"{}")

    _publish = False

    def _one(self, req: dict) -> dict:
        method, params = req.get("method"), dict(req.get("params") or {})
        self.calls.append((method, params))
        fn = getattr(self, "rpc_" + str(method), None)
        if fn is None:
            return {"jsonrpc": "2.0", "id": req.get("id"),
                    "error": {"code": -32601, "message": "Method not found"}}
        try:
            with self.lock:
                res = fn(params)
        except RpcError as e:
            return {"jsonrpc": "2.0", "id": req.get("id"),
                    "error": {"code": e.code, "message": "Server error", "specific_err": str(e)}}
        return {"jsonrpc": "2.0", "id": req.get("id"), "result": res}

    def _event(self, ev_type: int, data: dict):
        self.events.append({"name": "trex-event", "type": ev_type, "data": data})
        self._publish = True

    def _tick(self):
        """End the transmission of ports whose duration is over."""
        now = time.monotonic()
        with self.lock:
            for pid, p in self.ports.items():
                tx = p["tx"]
                if tx and tx["duration"] > 0 and now >= tx["t0"] + tx["duration"]:
                    self._finish(pid, tx["duration"])
                    self._event(EV_PROFILE_FINISHED_TX, {"port_id": pid, "profile_id": tx["profile"]})
        if self._publish:
            self._publish = False
            self.pub.send(b"{}")

    def _finish(self, pid: int, seconds: float):
        p = self.ports[pid]
        n = int(round(p["tx"]["pps"] * seconds * self.achieved))
        p["opackets"] += n
        p["obytes"] += n * self.frame_len
        self.queue_full_total += self.queue_full
        p["tx"] = None
        p["state"] = "STREAMS" if p["streams"] else "IDLE"

    # --- parameter checks as the server makes them -----------------------------------------
    def _port(self, params) -> int:
        if "port_id" not in params:
            raise RpcError("field 'port_id' is missing", -32602)
        pid = params["port_id"]
        if not isinstance(pid, int) or pid not in self.ports:
            raise RpcError(f"invalid port id - should be between 0 and {self.nports - 1}", -32602)
        return pid

    def _owned(self, params) -> int:
        pid = self._port(params)
        if params.get("handler") != self.ports[pid]["handler"] or self.ports[pid]["handler"] is None:
            raise RpcError("port is not owned by you or your current executing session")
        return pid

    # --- general ---------------------------------------------------------------------------
    def rpc_api_sync_v2(self, params):
        if params.get("name") != "STL":
            raise RpcError(f"API type '{params.get('name')}' is not supported by the server (mode STL)")
        return {"api_h": "hb%08x" % random.getrandbits(32)}

    def rpc_get_version(self, params):
        return {"version": self.version, "build_date": "Jan  1 2024", "build_time": "00:00:00",
                "built_by": "trex", "mode": "STL"}

    def rpc_ping(self, params):
        return {"ts": time.time()}

    def rpc_get_system_info(self, params):
        ports = [{"index": i, "driver": "net_mlx5", "pci_addr": f"0000:18:00.{i}", "numa": 0,
                  "hw_mac": f"08:c0:eb:a5:61:{0x26 + i:02x}", "description": "ConnectX-6 Dx",
                  "rx": {"caps": ["flow_stats", "latency", "rx_bytes"], "counters": 127},
                  "is_fc_supported": True, "is_led_supported": True, "is_link_supported": True,
                  "is_prom_supported": True, "is_vxlan_supported": False, "is_virtual": False,
                  "supp_speeds": [100000], "cores": [1, 2, 3, 4]} for i in range(self.nports)]
        return {"hostname": "fips4", "uptime": "0 days", "dp_core_count": 14,
                "dp_core_count_per_port": 14 // max(1, self.nports // 2) if self.nports > 1 else 14,
                "core_type": "Intel(R) Xeon(R)", "is_multiqueue_mode": False, "port_count": self.nports,
                "ports": ports}

    def rpc_get_supported_cmds(self, params):
        return sorted(n[4:] for n in dir(self) if n.startswith("rpc_"))

    def rpc_publish_now(self, params):
        if not isinstance(params.get("key"), int) or not isinstance(params.get("baseline"), bool):
            raise RpcError("publish_now: key (uint32) and baseline (bool) are required", -32602)
        self.events.append({"name": "trex-barrier", "type": params["key"], "data": {}})
        self._publish = True
        return {}

    def rpc_get_async_events(self, params):
        out = []
        for e in self.events:
            out.append({**e, "seq": self.seq})
            self.seq += 1
        self.events = []
        return {"data": out}

    def rpc_get_global_stats(self, params):
        tx = sum(p["opackets"] for p in self.ports.values())
        return {"m_cpu_util": 0.0, "m_cpu_util_raw": 0.0, "m_bw_per_core": 0.0, "m_rx_cpu_util": 0.0,
                "m_rx_core_pps": 0.0, "m_platform_factor": 1.0, "m_tx_bps": 0.0, "m_rx_bps": 0.0,
                "m_tx_pps": 0.0, "m_rx_pps": 0.0, "m_total_tx_pkts": tx, "m_total_rx_pkts": 0,
                "m_total_tx_bytes": tx * self.frame_len, "m_total_rx_bytes": 0, "m_tx_expected_cps": 0.0,
                "m_tx_expected_pps": 0.0, "m_tx_expected_bps": 0.0, "m_total_alloc_error": 0,
                "m_total_queue_full": self.queue_full_total, "m_total_queue_drop": 0,
                "m_rx_drop_bps": 0.0, "m_active_flows": 0, "m_open_flows": 0, "m_total_nat_time_out": 0,
                "m_total_nat_no_fid": 0, "m_total_nat_active": 0, "m_total_nat_open": 0,
                "m_total_nat_learn_error": 0, "m_socket_util": 0.0, "m_total_clients": 0,
                "m_total_servers": 0, "m_active_sockets": 0}

    def rpc_get_active_pgids(self, params):
        return {"ids": {"latency": [], "flow_stats": []}}

    def rpc_get_pgid_stats(self, params):
        if params.get("pgids"):
            raise RpcError("this double has no flow-stats streams (pgids must be empty)")
        return {"ver_id": {}, "flow_stats": {}, "latency": {}}

    def rpc_get_tpg_status(self, params):
        return {"enabled": False}

    def rpc_capture(self, params):
        if params.get("command") != "status":
            raise RpcError(f"capture command {params.get('command')!r}: this double has no captures")
        return []

    # --- ports -----------------------------------------------------------------------------
    def _status(self, pid):
        p = self.ports[pid]
        return {"owner": p["owner"], "state": p["state"], "service": False, "service_filtered": False,
                "max_stream_id": max(p["streams"], default=0),
                "state_profile": {"_": p["state"]} if p["streams"] or p["state"] != "IDLE" else {},
                "attr": {"promiscuous": {"enabled": False}, "multicast": {"enabled": False},
                         "link": {"up": True}, "speed": 100000, "fc": {"mode": 0}, "vxlan_fs": None,
                         "layer_cfg": {"ether": {"src": f"08:c0:eb:a5:61:{0x26 + pid:02x}",
                                                 "dst": "c4:70:bd:a0:56:ac", "state": "configured"},
                                       "ipv4": {"state": "none"}, "ipv6": {"enabled": False}},
                         "vlan": {"tags": []}, "rx_filter_mode": "hw", "src_mac": f"08:c0:eb:a5:61:{0x26 + pid:02x}",
                         "dest": "c4:70:bd:a0:56:ac", "tpg": {"enabled": False}},
                "rx_info": {"grat_arp": {"is_active": False}, "queue": {"is_active": False},
                            "capture": {"is_active": False}, "latency": {"is_active": False},
                            "capwap_proxy": {"is_active": False}}}

    def rpc_get_port_status(self, params):
        return self._status(self._port(params))

    def rpc_get_port_xstats_names(self, params):
        self._port(params)
        return {"xstats_names": XSTATS}

    def rpc_get_port_xstats_values(self, params):
        p = self.ports[self._port(params)]
        vals = {"tx_good_packets": p["opackets"], "tx_good_bytes": p["obytes"], "tx_phy_packets": p["opackets"]}
        return {"xstats_values": [vals.get(n, 0) for n in XSTATS]}

    def rpc_get_port_stats(self, params):
        p = self.ports[self._port(params)]
        return {"opackets": p["opackets"], "ipackets": 0, "obytes": p["obytes"], "ibytes": 0,
                "oerrors": 0, "ierrors": 0, "m_total_tx_bps": 0.0, "m_total_tx_pps": 0.0,
                "m_total_rx_bps": 0.0, "m_total_rx_pps": 0.0, "m_cpu_util": 0.0, "m_line_util": 0.0}

    def rpc_acquire(self, params):
        pid = self._port(params)
        p = self.ports[pid]
        if p["owner"] and p["owner"] != params.get("user") and not params.get("force"):
            raise RpcError(f"port is already owned by '{p['owner']}'")
        p["owner"], p["handler"] = params.get("user"), "h%08x" % random.getrandbits(32)
        self._event(EV_PORT_ACQUIRED, {"port_id": pid, "who": params.get("user"),
                                       "session_id": params.get("session_id"), "force": bool(params.get("force"))})
        return p["handler"]

    def rpc_release(self, params):
        pid = self._owned(params)
        self.ports[pid].update(owner="", handler=None)
        self._event(EV_PORT_RELEASED, {"port_id": pid, "who": "", "session_id": 0})
        return {}

    def rpc_get_profile_list(self, params):
        p = self.ports[self._port(params)]
        return ["_"] if p["streams"] else []

    def rpc_get_all_streams(self, params):
        p = self.ports[self._port(params)]
        return {"profiles": {"_": {str(k): v for k, v in p["streams"].items()}} if p["streams"] else {}}

    def rpc_remove_all_streams(self, params):
        pid = self._owned(params)
        p = self.ports[pid]
        if p["tx"]:
            raise RpcError("cannot remove streams while the port is transmitting")
        p["streams"] = {}
        p["state"] = "IDLE"
        return {}

    def rpc_service(self, params):
        self._owned(params)
        return {}

    def rpc_set_port_attr(self, params):
        self._owned(params)
        return {}

    def rpc_set_rx_feature(self, params):
        self._owned(params)
        return {}

    def rpc_remove_rx_filters(self, params):
        self._owned(params)
        return {}

    def rpc_add_stream(self, params):
        pid = self._owned(params)
        s = params.get("stream")
        if not isinstance(s, dict):
            raise RpcError("field 'stream' is missing or not an object", -32602)
        for key in ("packet", "mode", "vm", "enabled", "self_start", "isg", "flags"):
            if key not in s:
                raise RpcError(f"field '{key}' is missing", -32602)
        if not isinstance(s["packet"], dict) or "binary" not in s["packet"]:
            raise RpcError("field 'binary' is missing", -32602)
        rate = (s["mode"] or {}).get("rate") or {}
        if rate.get("type") not in ("pps", "bps_L1", "bps_L2", "percentage"):
            raise RpcError(f"rate type '{rate.get('type')}' is not one of pps, bps_L1, bps_L2, percentage")
        if not isinstance(rate.get("value"), (int, float)) or rate["value"] <= 0:
            raise RpcError("rate value must be positive")
        vm = s["vm"]
        if not isinstance(vm, dict) or not isinstance(vm.get("instructions"), list):
            raise RpcError("field 'instructions' is missing", -32602)
        if "cache" in vm and (not isinstance(vm["cache"], int) or vm["cache"] < 0):
            raise RpcError(f"vm cache {vm['cache']!r} must be a non-negative integer")
        sid = params.get("stream_id")
        p = self.ports[pid]
        if sid in p["streams"]:
            raise RpcError(f"stream {sid} already exists")
        p["streams"][sid] = s
        p["state"] = "STREAMS"
        return {}

    def rpc_start_traffic(self, params):
        pid = self._owned(params)
        p = self.ports[pid]
        mul = params.get("mul")
        if not isinstance(mul, dict):
            raise RpcError("field 'mul' is missing or not an object", -32602)
        if mul.get("type") not in MULT_TYPES:
            raise RpcError(f"field 'type' is not one of {', '.join(MULT_TYPES)}", -32602)
        if not isinstance(mul.get("value"), (int, float)) or mul["value"] < 0:
            raise RpcError("field 'value' must be a non-negative double", -32602)
        if mul["value"] == 0:
            raise RpcError("multiplier can't be zero", -32602)
        if mul.get("op") != "abs":
            raise RpcError("start message can only specify absolute speed rate", -32602)
        if not isinstance(params.get("duration"), (int, float)) or not isinstance(params.get("force"), bool):
            raise RpcError("fields 'duration' (double) and 'force' (bool) are required", -32602)
        if not p["streams"]:
            raise RpcError("no streams attached to port")
        if p["tx"] and not params["force"]:
            raise RpcError("port is active - please stop the port or use force")
        base_pps = sum(s["mode"]["rate"]["value"] for s in p["streams"].values() if s["mode"]["rate"]["type"] == "pps")
        if mul["type"] == "pps":
            pps = mul["value"]
        elif mul["type"] == "raw":
            pps = base_pps * mul["value"]
        elif mul["type"] == "percentage":
            pps = LINE_RATE_BPS * mul["value"] / 100 / ((self.frame_len + 24) * 8)
        else:
            pps = mul["value"] / ((self.frame_len + (24 if mul["type"] == "bpsl1" else 4)) * 8)
        p["tx"] = {"pps": pps, "duration": float(params["duration"]), "t0": time.monotonic(), "profile": "_"}
        p["mult"] = mul
        p["state"] = "TX"
        self._event(EV_PROFILE_STARTED, {"port_id": pid, "profile_id": "_"})
        return {"multiplier": pps / base_pps if base_pps else 1.0, "ts": time.time()}

    def rpc_stop_traffic(self, params):
        pid = self._owned(params)
        p = self.ports[pid]
        if p["tx"]:
            self._finish(pid, time.monotonic() - p["tx"]["t0"])
            self._event(EV_PROFILE_STOPPED, {"port_id": pid, "profile_id": "_"})
        return {}
