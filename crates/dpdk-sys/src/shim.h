/* Wrappers exporting DPDK's static-inline fast-path functions as real symbols,
 * so that Rust can call them. Compiled by build.rs with the libdpdk cflags. */
#ifndef DDOS_DPDK_SHIM_H
#define DDOS_DPDK_SHIM_H

#include <stdint.h>
#include <rte_config.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

uint16_t shim_rx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n);
uint16_t shim_tx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n);
struct rte_mbuf *shim_pktmbuf_alloc(struct rte_mempool *pool);
int shim_pktmbuf_alloc_bulk(struct rte_mempool *pool, struct rte_mbuf **pkts, unsigned n);
void shim_pktmbuf_free(struct rte_mbuf *m);
char *shim_pktmbuf_prepend(struct rte_mbuf *m, uint16_t len);
char *shim_pktmbuf_adj(struct rte_mbuf *m, uint16_t len);
char *shim_pktmbuf_append(struct rte_mbuf *m, uint16_t len);
int shim_pktmbuf_trim(struct rte_mbuf *m, uint16_t len);
void *shim_pktmbuf_mtod(struct rte_mbuf *m);
uint16_t shim_pktmbuf_headroom(const struct rte_mbuf *m);
uint16_t shim_pktmbuf_tailroom(const struct rte_mbuf *m);
uint32_t shim_mbuf_rss_hash(const struct rte_mbuf *m);
int shim_mbuf_has_rss_hash(const struct rte_mbuf *m);
int shim_errno(void);
unsigned shim_lcore_id(void);
uint64_t shim_rss_hf_ip_udp_tcp(void);
uint64_t shim_rss_hf_ip(void);
uint64_t shim_rss_l3_src_only(void);
uint64_t shim_rss_l3_dst_only(void);
uint32_t shim_mq_rx_rss(void);
uint64_t shim_rx_offload_scatter(void);
uint16_t shim_mbuf_default_buf_size(void);

#endif
