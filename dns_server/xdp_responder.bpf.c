// SPDX-License-Identifier: GPL-2.0
/* The XDP DNS responder: the low-variance backend of the RTT measurements.
 *
 * A UDP query to vip:port is answered in place and sent back with XDP_TX, without the kernel's
 * stack (XDP_TX, or a redirect to the same port on veth): an A/IN query for a name in the zone gets one A record (the configured address, the
 * configured TTL, AA set); a name outside the zone gets REFUSED. In reflect mode every query is
 * sent back with swapped addresses and ports and QR set, nothing else changed (the paper's
 * reflector, plus the IP swap a kernel socket on the client needs to receive it).
 *
 * Malformed queries (truncated header or question, a compression pointer in the question,
 * qdcount != 1, answer/authority records, names longer than 255 bytes) are counted and dropped;
 * answers (QR set) and other opcodes are counted and dropped, so two responders never loop.
 * Everything that is not IPv4/UDP to vip:port passes to the kernel. Other query types pass too
 * (counted): the responder holds no other records.
 *
 * Replies: additional records (EDNS OPT) are cut off; IPv4 header rebuilt with a fresh checksum;
 * UDP checksum 0 (allowed for IPv4, RFC 768). The destination MAC comes from the `peers` map
 * (client address -> MAC, filled by the loader) because with a load balancer in front the
 * query's source MAC is the LB's, and replies go straight to the client (direct server return).
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "dns_common.h"
#include "xb_stats.h"

#define DNS_HDR 12
#define A_RR    16  /* name pointer 2, type 2, class 2, TTL 4, rdlength 2, address 4 */

/* the one configuration record (key 0), written by the loader before attaching */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct xdns_config);
} config SEC(".maps");

/* client address (network byte order) -> the MAC replies to it go to */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, XDNS_MAX_PEERS);
	__type(key, __u32);
	__type(value, struct xdns_peer);
} peers SEC(".maps");

/* per-CPU counts, enum xdns_stat */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, XDNS_STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");


static __always_inline __u16 ip_checksum(struct iphdr *ip)
{
	__u16 *w = (__u16 *)ip;
	__u32 sum = 0;

#pragma unroll
	for (int i = 0; i < 10; i++)
		sum += w[i];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return ~sum;
}

/* Walk the question name from DNS offset 12. Returns the offset just past the root label, or 0
 * if the name is malformed (truncated, a pointer or extended label, too long, too many labels).
 * starts[] gets each label's offset. */
static __always_inline __u32 walk_name(__u8 *dns, void *end, __u32 dns_len, __u16 *starts, __u32 *nlabels)
{
	__u32 off = DNS_HDR;

	for (int i = 0; i <= XDNS_MAX_LABELS; i++) {
		__u8 *p = dns + (off & 0x1ff);

		if (off >= dns_len || (void *)(p + 1) > end)
			return 0;
		__u8 len = *p;

		if (len == 0)
			return off + 1;
		if (len & 0xc0)  /* compression pointer or extended label: not in a question we accept */
			return 0;
		if (i == XDNS_MAX_LABELS)
			return 0;
		starts[i & (XDNS_MAX_LABELS - 1)] = off;
		*nlabels = i + 1;
		off += len + 1;
		if (off > DNS_HDR + XDNS_MAX_NAME - 1)
			return 0;
	}
	return 0;
}

/* Is the name's suffix starting at a label boundary equal (case-insensitively) to the zone? */
static __always_inline int in_zone(__u8 *dns, void *end, const struct xdns_config *cfg, __u32 name_end,
				   const __u16 *starts, __u32 nlabels)
{
	__u32 zl = cfg->zone_len;
	__u32 cand, ok = 0;

	if (zl == 0 || zl > XDNS_MAX_ZONE)
		return 0;
	if (zl == 1)  /* the root zone holds every name */
		return 1;
	if (name_end < DNS_HDR + zl)
		return 0;
	cand = name_end - zl;
	for (int i = 0; i < XDNS_MAX_LABELS; i++) {
		if ((__u32)i >= nlabels)
			break;
		if (starts[i] == cand) {
			ok = 1;
			break;
		}
	}
	if (!ok)
		return 0;
	for (int i = 0; i < XDNS_MAX_ZONE; i++) {
		if ((__u32)i >= zl)
			break;
		__u8 *p = dns + ((cand + i) & 0x1ff);

		if ((void *)(p + 1) > end)
			return 0;
		__u8 c = *p;

		if (c >= 'A' && c <= 'Z')
			c += 'a' - 'A';
		if (c != cfg->zone[i])
			return 0;
	}
	return 1;
}

SEC("xdp")
int xdns_responder(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u32 zero = 0;
	struct xdns_config *cfg = bpf_map_lookup_elem(&config, &zero);
	struct ethhdr *eth = data;
	struct iphdr *ip;
	struct udphdr *udp;
	__u8 *dns;

	if (!cfg)
		return XDP_PASS;
	if ((void *)(eth + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		return xb_stats_verdict(&stats, XDNS_STAT_PASSED, XDP_PASS);
	ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > end || ip->version != 4 || ip->ihl != 5 || ip->protocol != IPPROTO_UDP ||
	    ip->daddr != cfg->vip || (ip->frag_off & bpf_htons(0x3fff)))
		return xb_stats_verdict(&stats, XDNS_STAT_PASSED, XDP_PASS);
	udp = (void *)(ip + 1);
	if ((void *)(udp + 1) > end)
		return xb_stats_verdict(&stats, XDNS_STAT_MALFORMED, XDP_DROP);
	if (udp->dest != cfg->port)
		return xb_stats_verdict(&stats, XDNS_STAT_PASSED, XDP_PASS);
	dns = (void *)(udp + 1);
	__u32 udp_len = bpf_ntohs(udp->len);
	if (udp_len < sizeof(*udp) + DNS_HDR || (void *)(dns + DNS_HDR) > end ||
	    (void *)udp + udp_len > end)
		return xb_stats_verdict(&stats, XDNS_STAT_MALFORMED, XDP_DROP);
	__u32 dns_len = udp_len - sizeof(*udp);
	if ((dns[2] & 0x80) || (dns[2] & 0x78))  /* QR set, or opcode != QUERY */
		return xb_stats_verdict(&stats, XDNS_STAT_NOT_QUERY, XDP_DROP);

	__u32 new_len = dns_len;  /* DNS bytes of the reply */
	int stat = XDNS_STAT_ANSWERED;

	if (cfg->mode == XDNS_MODE_REFLECT) {
		dns[2] |= 0x80;
	} else {
		__u16 starts[XDNS_MAX_LABELS] = {};
		__u32 nlabels = 0, name_end;

		/* exactly one question, no answer or authority records in a query */
		if (dns[4] != 0 || dns[5] != 1 || dns[6] || dns[7] || dns[8] || dns[9])
			return xb_stats_verdict(&stats, XDNS_STAT_MALFORMED, XDP_DROP);
		name_end = walk_name(dns, end, dns_len, starts, &nlabels);
		if (name_end == 0 || name_end + 4 > dns_len)
			return xb_stats_verdict(&stats, XDNS_STAT_MALFORMED, XDP_DROP);
		__u8 *q = dns + (name_end & 0x1ff);
		if ((void *)(q + 4) > end)
			return xb_stats_verdict(&stats, XDNS_STAT_MALFORMED, XDP_DROP);
		int zone = in_zone(dns, end, cfg, name_end, starts, nlabels);
		if (zone && (q[0] != 0 || q[1] != 1 || q[2] != 0 || q[3] != 1))  /* not A, not IN */
			return xb_stats_verdict(&stats, XDNS_STAT_NOT_A, XDP_PASS);
		/* header: QR, opcode 0, AA, RD kept; RA 0; rcode NOERROR or REFUSED */
		dns[2] = 0x80 | 0x04 | (dns[2] & 0x01);
		dns[3] = zone ? 0 : 5;
		dns[6] = 0;
		dns[7] = zone ? 1 : 0;
		dns[10] = 0;
		dns[11] = 0;
		new_len = name_end + 4 + (zone ? A_RR : 0);
		stat = zone ? XDNS_STAT_ANSWERED : XDNS_STAT_REFUSED;
	}

	/* resize the frame to headers + new_len (cuts additional records, makes room for the A) */
	int delta = (int)(sizeof(*eth) + sizeof(*ip) + sizeof(*udp) + new_len) - (int)(end - data);
	if (delta != 0 && bpf_xdp_adjust_tail(ctx, delta))
		return xb_stats_verdict(&stats, XDNS_STAT_TX_ERROR, XDP_DROP);
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	eth = data;
	ip = (void *)(eth + 1);
	udp = (void *)(ip + 1);
	dns = (void *)(udp + 1);
	if ((void *)(dns + DNS_HDR) > end)
		return xb_stats_verdict(&stats, XDNS_STAT_TX_ERROR, XDP_DROP);
	if (stat == XDNS_STAT_ANSWERED && cfg->mode == XDNS_MODE_ANSWER) {
		__u8 *a = dns + ((new_len - A_RR) & 0x1ff);

		if ((void *)(a + A_RR) > end)
			return xb_stats_verdict(&stats, XDNS_STAT_TX_ERROR, XDP_DROP);
		a[0] = 0xc0;  /* pointer to the question name at offset 12 */
		a[1] = DNS_HDR;
		a[2] = 0;
		a[3] = 1;     /* A */
		a[4] = 0;
		a[5] = 1;     /* IN */
		__builtin_memcpy(a + 6, &cfg->ttl, 4);
		a[10] = 0;
		a[11] = 4;
		__builtin_memcpy(a + 12, &cfg->answer, 4);
	}

	/* addresses: reply from the VIP to the client, straight to the client's MAC */
	__u32 client = ip->saddr;
	struct xdns_peer *peer = bpf_map_lookup_elem(&peers, &client);
	if (peer) {
		__builtin_memcpy(eth->h_dest, peer->mac, ETH_ALEN);
	} else {
		__builtin_memcpy(eth->h_dest, eth->h_source, ETH_ALEN);
		xb_stats_inc(&stats, XDNS_STAT_PEER_MISS);
	}
	__builtin_memcpy(eth->h_source, cfg->src_mac, ETH_ALEN);
	ip->saddr = ip->daddr;
	ip->daddr = client;
	ip->tot_len = bpf_htons(sizeof(*ip) + sizeof(*udp) + new_len);
	ip->ttl = 64;
	ip->check = 0;
	ip->check = ip_checksum(ip);
	__u16 sport = udp->source;
	udp->source = udp->dest;
	udp->dest = sport;
	udp->len = bpf_htons(sizeof(*udp) + new_len);
	udp->check = 0;
	xb_stats_inc(&stats, stat);
	if (cfg->egress == XDNS_EGRESS_REDIRECT)
		return bpf_redirect(ctx->ingress_ifindex, 0);
	return XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
