#include "shim.h"

uint16_t shim_rx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n) {
    return rte_eth_rx_burst(port, queue, pkts, n);
}
uint16_t shim_tx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n) {
    return rte_eth_tx_burst(port, queue, pkts, n);
}
struct rte_mbuf *shim_pktmbuf_alloc(struct rte_mempool *pool) { return rte_pktmbuf_alloc(pool); }
int shim_pktmbuf_alloc_bulk(struct rte_mempool *pool, struct rte_mbuf **pkts, unsigned n) {
    return rte_pktmbuf_alloc_bulk(pool, pkts, n);
}
void shim_pktmbuf_free(struct rte_mbuf *m) { rte_pktmbuf_free(m); }
char *shim_pktmbuf_prepend(struct rte_mbuf *m, uint16_t len) { return rte_pktmbuf_prepend(m, len); }
char *shim_pktmbuf_adj(struct rte_mbuf *m, uint16_t len) { return rte_pktmbuf_adj(m, len); }
char *shim_pktmbuf_append(struct rte_mbuf *m, uint16_t len) { return rte_pktmbuf_append(m, len); }
int shim_pktmbuf_trim(struct rte_mbuf *m, uint16_t len) { return rte_pktmbuf_trim(m, len); }
void *shim_pktmbuf_mtod(struct rte_mbuf *m) { return rte_pktmbuf_mtod(m, void *); }
uint16_t shim_pktmbuf_headroom(const struct rte_mbuf *m) { return rte_pktmbuf_headroom(m); }
uint16_t shim_pktmbuf_tailroom(const struct rte_mbuf *m) { return rte_pktmbuf_tailroom(m); }
uint32_t shim_mbuf_rss_hash(const struct rte_mbuf *m) { return m->hash.rss; }
int shim_mbuf_has_rss_hash(const struct rte_mbuf *m) { return (m->ol_flags & RTE_MBUF_F_RX_RSS_HASH) != 0; }
int shim_errno(void) { return rte_errno; }
unsigned shim_lcore_id(void) { return rte_lcore_id(); }
uint64_t shim_rss_hf_ip_udp_tcp(void) { return RTE_ETH_RSS_IP | RTE_ETH_RSS_UDP | RTE_ETH_RSS_TCP; }
uint64_t shim_rss_hf_ip(void) { return RTE_ETH_RSS_IP; }
uint64_t shim_rss_l3_src_only(void) { return RTE_ETH_RSS_L3_SRC_ONLY; }
uint64_t shim_rss_l3_dst_only(void) { return RTE_ETH_RSS_L3_DST_ONLY; }
uint32_t shim_mq_rx_rss(void) { return RTE_ETH_MQ_RX_RSS; }
uint64_t shim_rx_offload_scatter(void) { return RTE_ETH_RX_OFFLOAD_SCATTER; }
uint16_t shim_mbuf_default_buf_size(void) { return RTE_MBUF_DEFAULT_BUF_SIZE; }
