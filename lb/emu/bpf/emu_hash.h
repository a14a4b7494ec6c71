/* The hash of a DOCA_FLOW_PIPE_HASH pipe, one copy for the datapath (emu.bpf.c) and the library
 * (src/doca_flow.c: doca_flow_pipe_calc_hash), so the two cannot differ.
 *
 * What the hardware computes (lb/README.md, "Hash pipes"): DOCA's hash pipe is an index-addressed
 * table whose entry is picked by a hash of the pipe's match_mask fields; DPDK's mlx5 steering
 * (drivers/net/mlx5/hws: mlx5dr_rule_hash_calculate, mlx5dr_crc32_calc) computes that hash as
 * CRC-32 over the rule's 32-byte match tag: the reflected IEEE 802.3 polynomial 0xEDB88320,
 * initial value 0, no final XOR, the result read big-endian (rte_be_to_cpu_32 on a
 * little-endian host such as the BlueField's Arm cores, i.e. byte-swapped), then masked to the
 * table's log2 size. The emulation does the same over its own 32-byte tag: struct emu_key
 * masked with the pipe's hash mask (the named fields and the l3/l4 selectors; the port never),
 * in emu_key's field order, network byte order. The hardware's tag places the fields where its
 * definer puts them (device dependent, not documented), so the emulation's values are not the
 * BlueField's: the function is, the byte layout is the emulation's.
 *
 * The table is built from the polynomial at compile time (no literal table): a reflected CRC is
 * linear in its input byte, so entry n is the XOR of the entries of n's set bits, and the entry
 * of bit b is the polynomial shifted through the 7 - b steps left after that bit reaches bit 0. */
#ifndef XB_EMU_HASH_H
#define XB_EMU_HASH_H

#define EMU_CRC32_POLY 0xedb88320u /* IEEE 802.3 CRC-32, bit-reflected */
/* one step of the bitwise CRC: shift right, XOR the polynomial when a 1 falls out */
#define EMU_CRC_STEP(c) (((c) >> 1) ^ (((c) & 1u) ? EMU_CRC32_POLY : 0u))
#define EMU_CRC_B7 EMU_CRC32_POLY
#define EMU_CRC_B6 EMU_CRC_STEP(EMU_CRC_B7)
#define EMU_CRC_B5 EMU_CRC_STEP(EMU_CRC_B6)
#define EMU_CRC_B4 EMU_CRC_STEP(EMU_CRC_B5)
#define EMU_CRC_B3 EMU_CRC_STEP(EMU_CRC_B4)
#define EMU_CRC_B2 EMU_CRC_STEP(EMU_CRC_B3)
#define EMU_CRC_B1 EMU_CRC_STEP(EMU_CRC_B2)
#define EMU_CRC_B0 EMU_CRC_STEP(EMU_CRC_B1)
#define EMU_CRC_BIT(n, b) ((((n) >> (b)) & 1u) ? EMU_CRC_B##b : 0u)
#define EMU_CRC_T(n)                                                                                   \
	(EMU_CRC_BIT(n, 0) ^ EMU_CRC_BIT(n, 1) ^ EMU_CRC_BIT(n, 2) ^ EMU_CRC_BIT(n, 3) ^ EMU_CRC_BIT(n, 4) ^ \
	 EMU_CRC_BIT(n, 5) ^ EMU_CRC_BIT(n, 6) ^ EMU_CRC_BIT(n, 7))
#define EMU_CRC_T4(n) EMU_CRC_T(n), EMU_CRC_T((n) + 1), EMU_CRC_T((n) + 2), EMU_CRC_T((n) + 3)
#define EMU_CRC_T16(n) EMU_CRC_T4(n), EMU_CRC_T4((n) + 4), EMU_CRC_T4((n) + 8), EMU_CRC_T4((n) + 12)
#define EMU_CRC_T64(n) EMU_CRC_T16(n), EMU_CRC_T16((n) + 16), EMU_CRC_T16((n) + 32), EMU_CRC_T16((n) + 48)

/* entry n: the CRC (initial value 0) of the single byte n */
static const __u32 emu_crc32_table[256] = {EMU_CRC_T64(0u), EMU_CRC_T64(64u), EMU_CRC_T64(128u), EMU_CRC_T64(192u)};

/* CRC-32 over `len` bytes, initial value 0, no final XOR (mlx5dr_crc32_calc before its byte order) */
static inline __u32 emu_crc32(const __u8 *p, __u32 len)
{
	__u32 crc = 0;

	for (__u32 i = 0; i < len; i++)
		crc = (crc >> 8) ^ emu_crc32_table[(crc ^ p[i]) & 0xff];
	return crc;
}

/* The hash of a 32-byte tag (struct emu_key masked with the hash pipe's mask), as the hash pipe
 * uses it before masking it to its size: the CRC read big-endian, i.e. byte-swapped on the
 * little-endian hosts this runs on (x86, the BlueField's Arm cores) */
static inline __u32 emu_hash_tag(const void *tag)
{
	return __builtin_bswap32(emu_crc32((const __u8 *)tag, 32));
}

#endif
