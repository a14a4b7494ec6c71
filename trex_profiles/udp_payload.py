"""UDP frames of one payload size (2…1472 B) to the service, from `flows` consecutive source
addresses (src-ip-base … src-ip-base + flows − 1), so with k class bits the load spreads evenly
over the 2^k classes when flows is a multiple of 2^k (class = source & (2^k − 1)).

One stream cycle = `flows` frames. Tunables (TRex: -t "--payload 64 --flows 256"):
payload, flows, vip, dport, sport, dst-mac, src-mac, src-ip-base, cache-size, cores.
"""

import ipaddress

import xb_common as xb

# the testbed tunables this profile takes from the harness (xb_common.parser; the rest are the user's)
TESTBED_TUNABLES = ("vip", "dport", "dst_mac", "src_mac", "src_ip_base", "cores")


class UdpPayload:
    def get_streams(self, direction=0, port_id=0, tunables=(), **kwargs):
        p = xb.parser("udp_payload", __doc__.split("\n\n")[0])
        p.add_argument("--flows", type=xb.int_range(1, xb.MAX_CYCLE, "number of source addresses"), default=256)
        a = xb.parse(p, tunables)
        base = int(ipaddress.IPv4Address(a.src_ip_base))
        if base + a.flows - 1 > 0xFFFFFFFF:
            p.error(f"argument --flows: {a.flows} addresses from {a.src_ip_base} run past 255.255.255.255")
        var = xb.flow_var_range("src", base, base + a.flows - 1) if a.flows > 1 \
            else xb.flow_var_list("src", [base])
        return [xb.source_stream(a, var, xb.cache_size(p, a, a.flows))]


def register():
    return UdpPayload()
