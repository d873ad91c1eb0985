//! The FlowPolice egress: strict priority with capped request and legacy channels.
//!
//! Queue order (highest first): request sub-queues by puzzle level (highest levels
//! first; all share one cap, default 5 % of the link), privileged, best-effort
//! FlowPolice, legacy (cap, default 10 %). Putting the request channel on top is
//! safe because its cap bounds it, and it keeps connection setup working under
//! a flood of regular traffic.

use pipeline::{Class, PacketBuf, StrictPriority};

use crate::class;

/// Egress configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EgressConfig {
    /// Link rate in bytes per second.
    pub link_bytes_per_sec: u64,
    /// Request channel share of the link (default 0.05).
    pub request_share: f64,
    /// Legacy channel share of the link (default 0.10).
    pub legacy_share: f64,
    /// Token-bucket depth of each cap, as time at the capped rate (default 10 ms),
    /// at least 2 × 1518 bytes.
    pub burst_ns: u64,
    /// Packets per queue (tail drop beyond).
    pub queue_packets: usize,
    /// Puzzle levels per request sub-queue (default 4: levels 28+ first, then 24–27, …).
    pub levels_per_queue: u8,
}

impl Default for EgressConfig {
    fn default() -> Self {
        EgressConfig {
            link_bytes_per_sec: 10_000_000_000 / 8,
            request_share: 0.05,
            legacy_share: 0.10,
            burst_ns: 10_000_000,
            queue_packets: 1024,
            levels_per_queue: 4,
        }
    }
}

/// Index of the privileged queue in [`build`]'s scheduler, given the config.
pub fn privileged_queue(cfg: &EgressConfig) -> usize {
    request_queues(cfg)
}

fn request_queues(cfg: &EgressConfig) -> usize {
    let per = usize::from(cfg.levels_per_queue.max(1));
    (usize::from(class::MAX_REQUEST_LEVEL) + 1).div_ceil(per)
}

/// Builds the scheduler at time `now_ns` (caps start full).
pub fn build<B: PacketBuf + Send>(cfg: &EgressConfig, now_ns: u64) -> StrictPriority<B> {
    let mut s = StrictPriority::new("flowpolice-egress");
    let burst = |share: f64| {
        let rate = (cfg.link_bytes_per_sec as f64 * share) as u64;
        let b = (rate as u128 * u128::from(cfg.burst_ns) / 1_000_000_000) as u64;
        (rate, b.max(2 * 1518))
    };
    let (rr, rb) = burst(cfg.request_share);
    let req_cap = s.add_cap(rr, rb, now_ns);
    let per = cfg.levels_per_queue.max(1);
    let n = request_queues(cfg);
    for q in (0..n).rev() {
        let lo = q as u8 * per;
        let hi = (lo + per - 1).min(class::MAX_REQUEST_LEVEL);
        s.add_queue(cfg.queue_packets, Some(req_cap), (lo..=hi).map(class::request));
    }
    s.add_queue(cfg.queue_packets, None, [class::PRIVILEGED]);
    s.add_queue(cfg.queue_packets, None, [class::BEST_EFFORT]);
    let (lr, lb) = burst(cfg.legacy_share);
    let legacy_cap = s.add_cap(lr, lb, now_ns);
    // Unmapped classes land in the last queue: legacy.
    s.add_queue(cfg.queue_packets, Some(legacy_cap), [class::LEGACY]);
    s
}

/// Whether `c` is served by the capped request channel.
pub fn is_request(c: Class) -> bool {
    class::is_request(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipeline::{Egress, Now};

    #[test]
    fn order_and_caps() {
        let cfg = EgressConfig { link_bytes_per_sec: 1_000_000, ..EgressConfig::default() };
        let mut e: StrictPriority<Vec<u8>> = build(&cfg, 0);
        assert_eq!(e.queues(), 8 + 3);
        assert_eq!(e.queue_of(class::request(31)), Some(0));
        assert_eq!(e.queue_of(class::request(0)), Some(7));
        assert_eq!(e.queue_of(class::PRIVILEGED), Some(privileged_queue(&cfg)));
        assert_eq!(e.queue_of(Class(200)), Some(10));
        let now = Now::default();
        for c in [
            class::LEGACY,
            class::BEST_EFFORT,
            class::PRIVILEGED,
            class::request(3),
            class::request(20),
        ] {
            e.enqueue(vec![c.0; 100], c, now).unwrap();
        }
        let mut out = Vec::new();
        e.dequeue(now, 10, &mut out);
        let order: Vec<u8> = out.iter().map(|b| b[0]).collect();
        assert_eq!(order, [class::request(20).0, class::request(3).0, 2, 1, 0]);
        // Request cap: 5 % of 1 MB/s = 50 kB/s, burst max(500 B, 3036 B).
        assert_eq!(e.cap(0).unwrap().rate(), 50_000);
        assert_eq!(e.cap(0).unwrap().burst(), 3036);
    }
}
