/* Baseline for scripts/bench-dpdk.sh: testpmd-style "io" forwarding on one
 * lcore (rx burst of 32 on port p, tx burst of the same mbufs on port p^1,
 * free what the TX ring refused), run for N seconds, then print Mpps.
 * Used because Debian 12's dpdk package ships no dpdk-testpmd binary.
 * Usage: iofwd <EAL args> -- <seconds> */
#include <stdio.h>
#include <stdlib.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_cycles.h>

#define BURST 32

int main(int argc, char **argv) {
    int n = rte_eal_init(argc, argv);
    if (n < 0) { fprintf(stderr, "EAL init failed\n"); return 1; }
    argc -= n; argv += n;
    double secs = argc > 1 ? atof(argv[1]) : 5.0;
    uint16_t nb_ports = rte_eth_dev_count_avail();
    struct rte_mempool *pool = rte_pktmbuf_pool_create("iofwd", 8191, 256, 0,
        RTE_MBUF_DEFAULT_BUF_SIZE, rte_socket_id());
    if (!pool || nb_ports < 2) { fprintf(stderr, "need a pool and 2 ports\n"); return 1; }
    struct rte_eth_conf conf = {0};
    for (uint16_t p = 0; p < 2; p++) {
        if (rte_eth_dev_configure(p, 1, 1, &conf) || rte_eth_rx_queue_setup(p, 0, 1024, rte_eth_dev_socket_id(p), NULL, pool)
            || rte_eth_tx_queue_setup(p, 0, 1024, rte_eth_dev_socket_id(p), NULL) || rte_eth_dev_start(p)) {
            fprintf(stderr, "port %u setup failed\n", p); return 1;
        }
    }
    uint64_t hz = rte_get_tsc_hz(), end = rte_get_tsc_cycles() + (uint64_t)(secs * hz);
    uint64_t rx = 0, tx = 0, start = rte_get_tsc_cycles();
    struct rte_mbuf *bufs[BURST];
    while (rte_get_tsc_cycles() < end) {
        for (uint16_t p = 0; p < 2; p++) {
            uint16_t nb = rte_eth_rx_burst(p, 0, bufs, BURST);
            if (!nb) continue;
            rx += nb;
            uint16_t sent = rte_eth_tx_burst(p ^ 1, 0, bufs, nb);
            tx += sent;
            for (uint16_t i = sent; i < nb; i++) rte_pktmbuf_free(bufs[i]);
        }
    }
    double el = (double)(rte_get_tsc_cycles() - start) / hz;
    printf("iofwd: rx %lu tx %lu in %.3f s: %.2f Mpps\n", rx, tx, el, tx / el / 1e6);
    for (uint16_t p = 0; p < 2; p++) { rte_eth_dev_stop(p); rte_eth_dev_close(p); }
    rte_eal_cleanup();
    return 0;
}
