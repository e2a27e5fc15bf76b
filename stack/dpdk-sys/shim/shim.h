/*
 * SlimTCP's C shim over DPDK 22.11: wraps DPDK's static-inline functions and builds DPDK's
 * configuration structs in C, so the Rust side never mirrors DPDK's struct layouts. The only
 * structs shared with Rust are the small plain ones declared here.
 */
#ifndef SLIMTCP_DPDK_SHIM_H
#define SLIMTCP_DPDK_SHIM_H

#include <stddef.h>
#include <stdint.h>

struct rte_mbuf;
struct rte_mempool;
struct rte_mbuf_ext_shared_info;

/* Capability / offload bits of shim_dev_info.caps and shim_port_configure's `offloads`. */
#define SHIM_CAP_RX_IPV4_CKSUM (1u << 0)
#define SHIM_CAP_RX_TCP_CKSUM (1u << 1)
#define SHIM_CAP_RX_UDP_CKSUM (1u << 2)
#define SHIM_CAP_TX_IPV4_CKSUM (1u << 3)
#define SHIM_CAP_TX_TCP_CKSUM (1u << 4)
#define SHIM_CAP_TX_UDP_CKSUM (1u << 5)
#define SHIM_CAP_TX_MULTI_SEGS (1u << 6)
/* Reported only (never enabled by SlimTCP: the paper's profile keeps them off). */
#define SHIM_CAP_TX_TCP_TSO (1u << 7)
#define SHIM_CAP_RX_TCP_LRO (1u << 8)
#define SHIM_CAP_RX_RSS_HASH (1u << 9)

/* What SlimTCP needs to know about a port. */
struct shim_dev_info {
	char driver_name[64];
	char device_name[64];
	uint16_t max_rx_queues;
	uint16_t max_tx_queues;
	uint16_t rx_desc_max;
	uint16_t tx_desc_max;
	uint16_t min_mtu;
	uint16_t max_mtu;
	uint32_t caps; /* SHIM_CAP_* */
	uint8_t mac[6];
	int32_t socket_id;
};

/* Tx offload request bits for shim_mbuf_set_tx (mapped to RTE_MBUF_F_TX_*). */
#define SHIM_TX_IPV4_CKSUM (1u << 0)
#define SHIM_TX_TCP_CKSUM (1u << 1)
#define SHIM_TX_UDP_CKSUM (1u << 2)

/* Rx checksum verdicts in shim_rx_info.ip_cksum / l4_cksum. */
#define SHIM_CKSUM_UNKNOWN 0 /* the NIC did not check */
#define SHIM_CKSUM_GOOD 1
#define SHIM_CKSUM_BAD 2
#define SHIM_CKSUM_NONE 3 /* the NIC says the checksum is absent/not computed (valid data) */

/* Everything the Rust side reads from a received mbuf, in one call. */
struct shim_mbuf_info {
	uint8_t *buf_addr;
	uint32_t buf_len;
	uint16_t data_off;
	uint16_t data_len;
	uint32_t pkt_len;
	uint16_t nb_segs;
	uint8_t exclusive; /* 1: refcnt 1, a direct mbuf (not a clone, no external buffer) */
	uint8_t ip_cksum;  /* SHIM_CKSUM_* */
	uint8_t l4_cksum;  /* SHIM_CKSUM_* */
};

int shim_errno(void);
/* rte_lcore_id(): the calling thread's lcore id, UINT32_MAX (LCORE_ID_ANY) in an unregistered
 * non-EAL thread. */
unsigned int shim_lcore_id(void);

/* ethdev */
int shim_dev_info(uint16_t port, struct shim_dev_info *out);
/* rte_eth_dev_configure with the paper's profile: TSO, LRO, RSS off; `offloads` (SHIM_CAP_*
 * bits, already masked by the caller with the port's capabilities) enabled; `mtu` (0 = keep). */
int shim_port_configure(uint16_t port, uint16_t nb_rx, uint16_t nb_tx, uint32_t offloads, uint16_t mtu);
/* rte_eth_dev_mac_addr_add(port, mac, pool 0): the port also receives unicast frames to `mac`. */
int shim_port_mac_addr_add(uint16_t port, const uint8_t mac[6]);
int shim_port_dma_map(uint16_t port, void *addr, uint64_t iova, size_t len);
int shim_port_dma_unmap(uint16_t port, void *addr, uint64_t iova, size_t len);
uint16_t shim_rx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n);
uint16_t shim_tx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n);
/* rte_eth_rx_burst and shim_mbuf_info of each mbuf received, into infos[0..returned]; the
 * checksum verdicts only when `verdicts` (else SHIM_CKSUM_UNKNOWN). */
uint16_t shim_rx_burst_info(uint16_t port, uint16_t queue, struct rte_mbuf **pkts,
			    struct shim_mbuf_info *infos, uint16_t n, int verdicts);

/* mbuf */
struct rte_mbuf *shim_pktmbuf_alloc(struct rte_mempool *mp);
int shim_pktmbuf_alloc_bulk(struct rte_mempool *mp, struct rte_mbuf **mbufs, unsigned int n);
void shim_pktmbuf_free(struct rte_mbuf *m);
void *shim_pktmbuf_mtod(struct rte_mbuf *m);
uint16_t shim_pktmbuf_data_len(const struct rte_mbuf *m);
uint32_t shim_pktmbuf_pkt_len(const struct rte_mbuf *m);
uint16_t shim_pktmbuf_headroom(const struct rte_mbuf *m);
uint16_t shim_pktmbuf_tailroom(const struct rte_mbuf *m);
char *shim_pktmbuf_append(struct rte_mbuf *m, uint16_t len);
char *shim_pktmbuf_prepend(struct rte_mbuf *m, uint16_t len);
char *shim_pktmbuf_adj(struct rte_mbuf *m, uint16_t len);
int shim_pktmbuf_trim(struct rte_mbuf *m, uint16_t len);
int shim_pktmbuf_chain(struct rte_mbuf *head, struct rte_mbuf *tail);
struct rte_mbuf *shim_pktmbuf_next(const struct rte_mbuf *m);
/* Detaches the segments after `head` (head becomes a single segment); returns them or NULL. */
struct rte_mbuf *shim_pktmbuf_unchain(struct rte_mbuf *head);
void shim_mbuf_info(const struct rte_mbuf *m, struct shim_mbuf_info *out);
/* rte_pktmbuf_alloc and, when it gave one, its shim_mbuf_info (verdicts SHIM_CKSUM_UNKNOWN): one
 * call per transmit buffer. */
struct rte_mbuf *shim_pktmbuf_alloc_info(struct rte_mempool *mp, struct shim_mbuf_info *out);
/* Sets a single-segment mbuf's data window and tx offload request in one call. */
void shim_mbuf_set_tx(struct rte_mbuf *m, uint16_t data_off, uint16_t data_len,
		      uint16_t l2_len, uint16_t l3_len, uint32_t tx_flags);
/* Sets only the tx offload request (any mbuf, e.g. the head of a chain). */
void shim_mbuf_set_offload(struct rte_mbuf *m, uint16_t l2_len, uint16_t l3_len, uint32_t tx_flags);

/* External buffers. The shared-info array lives in C memory; free with shim_shinfo_array_free. */
typedef void (*shim_ext_free_cb)(void *addr, void *opaque);
struct rte_mbuf_ext_shared_info *shim_shinfo_array_alloc(size_t n);
void shim_shinfo_array_free(struct rte_mbuf_ext_shared_info *arr);
/* Arms slot `i`: refcnt 1, callback `cb(addr, opaque)` when the last user frees it. */
struct rte_mbuf_ext_shared_info *shim_shinfo_arm(struct rte_mbuf_ext_shared_info *arr, size_t i,
						 shim_ext_free_cb cb, void *opaque);
/* Attaches [addr, addr+len) (iova given) to `m` as its data (data_off 0, data_len = len). */
void shim_attach_extbuf(struct rte_mbuf *m, void *addr, uint64_t iova, uint16_t len,
			struct rte_mbuf_ext_shared_info *shinfo);

#endif
