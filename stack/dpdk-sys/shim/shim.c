/* SlimTCP's C shim over DPDK 22.11 (see shim.h). */
#include "shim.h"

#include <stdlib.h>
#include <string.h>

#include <rte_dev.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

int shim_errno(void)
{
	return rte_errno;
}

static void copy_name(char *dst, size_t cap, const char *src)
{
	if (src == NULL)
		src = "";
	strncpy(dst, src, cap - 1);
	dst[cap - 1] = '\0';
}

int shim_dev_info(uint16_t port, struct shim_dev_info *out)
{
	struct rte_eth_dev_info info;
	struct rte_ether_addr mac;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = rte_eth_dev_info_get(port, &info);
	if (rc != 0)
		return rc;
	copy_name(out->driver_name, sizeof(out->driver_name), info.driver_name);
	copy_name(out->device_name, sizeof(out->device_name),
		  info.device != NULL ? rte_dev_name(info.device) : "");
	out->max_rx_queues = info.max_rx_queues;
	out->max_tx_queues = info.max_tx_queues;
	out->rx_desc_max = info.rx_desc_lim.nb_max;
	out->tx_desc_max = info.tx_desc_lim.nb_max;
	out->min_mtu = info.min_mtu;
	out->max_mtu = info.max_mtu;
	if (info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_IPV4_CKSUM)
		out->caps |= SHIM_CAP_RX_IPV4_CKSUM;
	if (info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_TCP_CKSUM)
		out->caps |= SHIM_CAP_RX_TCP_CKSUM;
	if (info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_UDP_CKSUM)
		out->caps |= SHIM_CAP_RX_UDP_CKSUM;
	if (info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_TCP_LRO)
		out->caps |= SHIM_CAP_RX_TCP_LRO;
	if (info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_RSS_HASH)
		out->caps |= SHIM_CAP_RX_RSS_HASH;
	if (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_IPV4_CKSUM)
		out->caps |= SHIM_CAP_TX_IPV4_CKSUM;
	if (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_TCP_CKSUM)
		out->caps |= SHIM_CAP_TX_TCP_CKSUM;
	if (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_UDP_CKSUM)
		out->caps |= SHIM_CAP_TX_UDP_CKSUM;
	if (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS)
		out->caps |= SHIM_CAP_TX_MULTI_SEGS;
	if (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_TCP_TSO)
		out->caps |= SHIM_CAP_TX_TCP_TSO;
	if (rte_eth_macaddr_get(port, &mac) == 0)
		memcpy(out->mac, mac.addr_bytes, sizeof(out->mac));
	out->socket_id = rte_eth_dev_socket_id(port);
	return 0;
}

int shim_port_mac_addr_add(uint16_t port, const uint8_t mac[6])
{
	struct rte_ether_addr addr;

	memcpy(addr.addr_bytes, mac, sizeof(addr.addr_bytes));
	return rte_eth_dev_mac_addr_add(port, &addr, 0);
}

int shim_port_configure(uint16_t port, uint16_t nb_rx, uint16_t nb_tx, uint32_t offloads, uint16_t mtu)
{
	struct rte_eth_conf conf;

	memset(&conf, 0, sizeof(conf));
	/* The paper's profile: no RSS (one queue pair per worker, steering is the operator's),
	 * no LRO, no TSO; checksum offloads when the port has them. */
	conf.rxmode.mq_mode = RTE_ETH_MQ_RX_NONE;
	conf.txmode.mq_mode = RTE_ETH_MQ_TX_NONE;
	conf.rxmode.mtu = mtu;
	if (offloads & SHIM_CAP_RX_IPV4_CKSUM)
		conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_IPV4_CKSUM;
	if (offloads & SHIM_CAP_RX_TCP_CKSUM)
		conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_TCP_CKSUM;
	if (offloads & SHIM_CAP_RX_UDP_CKSUM)
		conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_UDP_CKSUM;
	if (offloads & SHIM_CAP_TX_IPV4_CKSUM)
		conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_IPV4_CKSUM;
	if (offloads & SHIM_CAP_TX_TCP_CKSUM)
		conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_TCP_CKSUM;
	if (offloads & SHIM_CAP_TX_UDP_CKSUM)
		conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_UDP_CKSUM;
	if (offloads & SHIM_CAP_TX_MULTI_SEGS)
		conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
	return rte_eth_dev_configure(port, nb_rx, nb_tx, &conf);
}

static struct rte_device *port_device(uint16_t port)
{
	struct rte_eth_dev_info info;

	/* Checked first: rte_eth_dev_info_get logs an error for a closed port. */
	if (!rte_eth_dev_is_valid_port(port) || rte_eth_dev_info_get(port, &info) != 0)
		return NULL;
	return info.device;
}

int shim_port_dma_map(uint16_t port, void *addr, uint64_t iova, size_t len)
{
	struct rte_device *dev = port_device(port);

	if (dev == NULL) {
		rte_errno = ENODEV;
		return -1;
	}
	return rte_dev_dma_map(dev, addr, iova, len);
}

int shim_port_dma_unmap(uint16_t port, void *addr, uint64_t iova, size_t len)
{
	struct rte_device *dev = port_device(port);

	if (dev == NULL) {
		rte_errno = ENODEV;
		return -1;
	}
	return rte_dev_dma_unmap(dev, addr, iova, len);
}

unsigned int shim_lcore_id(void)
{
	return rte_lcore_id();
}

uint16_t shim_rx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n)
{
	return rte_eth_rx_burst(port, queue, pkts, n);
}

uint16_t shim_tx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n)
{
	return rte_eth_tx_burst(port, queue, pkts, n);
}

struct rte_mbuf *shim_pktmbuf_alloc(struct rte_mempool *mp)
{
	return rte_pktmbuf_alloc(mp);
}

int shim_pktmbuf_alloc_bulk(struct rte_mempool *mp, struct rte_mbuf **mbufs, unsigned int n)
{
	return rte_pktmbuf_alloc_bulk(mp, mbufs, n);
}

void shim_pktmbuf_free(struct rte_mbuf *m)
{
	rte_pktmbuf_free(m);
}

void *shim_pktmbuf_mtod(struct rte_mbuf *m)
{
	return rte_pktmbuf_mtod(m, void *);
}

uint16_t shim_pktmbuf_data_len(const struct rte_mbuf *m)
{
	return rte_pktmbuf_data_len(m);
}

uint32_t shim_pktmbuf_pkt_len(const struct rte_mbuf *m)
{
	return rte_pktmbuf_pkt_len(m);
}

uint16_t shim_pktmbuf_headroom(const struct rte_mbuf *m)
{
	return rte_pktmbuf_headroom(m);
}

uint16_t shim_pktmbuf_tailroom(const struct rte_mbuf *m)
{
	return rte_pktmbuf_tailroom(m);
}

char *shim_pktmbuf_append(struct rte_mbuf *m, uint16_t len)
{
	return rte_pktmbuf_append(m, len);
}

char *shim_pktmbuf_prepend(struct rte_mbuf *m, uint16_t len)
{
	return rte_pktmbuf_prepend(m, len);
}

char *shim_pktmbuf_adj(struct rte_mbuf *m, uint16_t len)
{
	return rte_pktmbuf_adj(m, len);
}

int shim_pktmbuf_trim(struct rte_mbuf *m, uint16_t len)
{
	return rte_pktmbuf_trim(m, len);
}

int shim_pktmbuf_chain(struct rte_mbuf *head, struct rte_mbuf *tail)
{
	return rte_pktmbuf_chain(head, tail);
}

struct rte_mbuf *shim_pktmbuf_next(const struct rte_mbuf *m)
{
	return m->next;
}

struct rte_mbuf *shim_pktmbuf_unchain(struct rte_mbuf *head)
{
	struct rte_mbuf *tail = head->next;

	if (tail == NULL)
		return NULL;
	tail->nb_segs = head->nb_segs - 1;
	tail->pkt_len = head->pkt_len - head->data_len;
	head->next = NULL;
	head->nb_segs = 1;
	head->pkt_len = head->data_len;
	return tail;
}

static uint8_t verdict(uint64_t flags, uint64_t mask, uint64_t good, uint64_t bad, uint64_t none)
{
	uint64_t v = flags & mask;

	if (v == good)
		return SHIM_CKSUM_GOOD;
	if (v == bad)
		return SHIM_CKSUM_BAD;
	if (v == none)
		return SHIM_CKSUM_NONE;
	return SHIM_CKSUM_UNKNOWN;
}

/* shim_mbuf_info, with the receive checksum verdicts only when `verdicts` (else
 * SHIM_CKSUM_UNKNOWN: a port without the offload sets none, a fresh mbuf has none). */
static inline void mbuf_info(const struct rte_mbuf *m, struct shim_mbuf_info *out, int verdicts)
{
	/* Writable in place only when it is a plain mbuf nobody else references: not a clone, not
	 * attached to an external buffer (which may be someone's memory, e.g. a guest's). */
	int exclusive = rte_mbuf_refcnt_read(m) == 1 && RTE_MBUF_DIRECT(m);
	out->buf_addr = m->buf_addr;
	out->buf_len = m->buf_len;
	out->data_off = m->data_off;
	out->data_len = m->data_len;
	out->pkt_len = m->pkt_len;
	out->nb_segs = m->nb_segs;
	out->exclusive = (uint8_t)exclusive;
	if (!verdicts) {
		out->ip_cksum = SHIM_CKSUM_UNKNOWN;
		out->l4_cksum = SHIM_CKSUM_UNKNOWN;
		return;
	}
	out->ip_cksum = verdict(m->ol_flags, RTE_MBUF_F_RX_IP_CKSUM_MASK, RTE_MBUF_F_RX_IP_CKSUM_GOOD,
				RTE_MBUF_F_RX_IP_CKSUM_BAD, RTE_MBUF_F_RX_IP_CKSUM_NONE);
	out->l4_cksum = verdict(m->ol_flags, RTE_MBUF_F_RX_L4_CKSUM_MASK, RTE_MBUF_F_RX_L4_CKSUM_GOOD,
				RTE_MBUF_F_RX_L4_CKSUM_BAD, RTE_MBUF_F_RX_L4_CKSUM_NONE);
}

void shim_mbuf_info(const struct rte_mbuf *m, struct shim_mbuf_info *out)
{
	mbuf_info(m, out, 1);
}

uint16_t shim_rx_burst_info(uint16_t port, uint16_t queue, struct rte_mbuf **pkts,
			    struct shim_mbuf_info *infos, uint16_t n, int verdicts)
{
	uint16_t got = rte_eth_rx_burst(port, queue, pkts, n);

	for (uint16_t i = 0; i < got; i++)
		mbuf_info(pkts[i], &infos[i], verdicts);
	return got;
}

struct rte_mbuf *shim_pktmbuf_alloc_info(struct rte_mempool *mp, struct shim_mbuf_info *out)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(mp);

	if (m != NULL)
		mbuf_info(m, out, 0);
	return m;
}

void shim_mbuf_set_offload(struct rte_mbuf *m, uint16_t l2_len, uint16_t l3_len, uint32_t tx_flags)
{
	/* Keep only the attachment flags: rx flags of a reused mbuf must not leak into tx. */
	uint64_t ol = m->ol_flags & (RTE_MBUF_F_EXTERNAL | RTE_MBUF_F_INDIRECT);

	if (tx_flags != 0) {
		ol |= RTE_MBUF_F_TX_IPV4;
		if (tx_flags & SHIM_TX_IPV4_CKSUM)
			ol |= RTE_MBUF_F_TX_IP_CKSUM;
		if (tx_flags & SHIM_TX_TCP_CKSUM)
			ol |= RTE_MBUF_F_TX_TCP_CKSUM;
		else if (tx_flags & SHIM_TX_UDP_CKSUM)
			ol |= RTE_MBUF_F_TX_UDP_CKSUM;
		m->l2_len = l2_len;
		m->l3_len = l3_len;
	}
	m->ol_flags = ol;
}

void shim_mbuf_set_tx(struct rte_mbuf *m, uint16_t data_off, uint16_t data_len,
		      uint16_t l2_len, uint16_t l3_len, uint32_t tx_flags)
{
	m->data_off = data_off;
	m->data_len = data_len;
	m->pkt_len = data_len;
	shim_mbuf_set_offload(m, l2_len, l3_len, tx_flags);
}

struct rte_mbuf_ext_shared_info *shim_shinfo_array_alloc(size_t n)
{
	return calloc(n, sizeof(struct rte_mbuf_ext_shared_info));
}

void shim_shinfo_array_free(struct rte_mbuf_ext_shared_info *arr)
{
	free(arr);
}

struct rte_mbuf_ext_shared_info *shim_shinfo_arm(struct rte_mbuf_ext_shared_info *arr, size_t i,
						 shim_ext_free_cb cb, void *opaque)
{
	struct rte_mbuf_ext_shared_info *s = &arr[i];

	s->free_cb = cb;
	s->fcb_opaque = opaque;
	rte_mbuf_ext_refcnt_set(s, 1);
	return s;
}

void shim_attach_extbuf(struct rte_mbuf *m, void *addr, uint64_t iova, uint16_t len,
			struct rte_mbuf_ext_shared_info *shinfo)
{
	rte_pktmbuf_attach_extbuf(m, addr, iova, len, shinfo);
	m->data_len = len;
	m->pkt_len = len;
}
