//! Scheduler properties in virtual time: R/N/G never exceed their bounds and
//! get min(arrival, bound); A and U get at least min(arrival, bound); the
//! link never idles while packets wait.

#![allow(clippy::needless_range_loop)] // queue indices tie several arrays together

use pipeline::{Class, Egress, Now};
use proptest::prelude::*;
use zlane::class::{A, G, N, R, U};
use zlane::{Bounds, Scheduler, SchedulerConfig};

const C: u64 = 1_000_000_000; // 1 Gbit/s
const STEP_NS: u64 = 5_000;
const T_NS: u64 = 20_000_000; // 20 ms

fn cfg() -> SchedulerConfig {
    SchedulerConfig { capacity_bps: C, queue_packets: [4096; 5], ..Default::default() }
}

/// Runs periodic arrivals (rate as a fraction of C, packet size) per class.
fn run(load: [(f64, usize); 5]) -> (Scheduler<Vec<u8>>, [u64; 5]) {
    let classes: [Class; 5] = [R, N, G, A, U];
    let mut s: Scheduler<Vec<u8>> = Scheduler::new(cfg()).unwrap();
    let mut credit = [0f64; 5];
    let mut offered = [0u64; 5];
    let mut out = Vec::new();
    let mut t = 0;
    while t < T_NS {
        let now = Now::from_unix_ns(t);
        for q in 0..5 {
            let (frac, size) = load[q];
            credit[q] += frac * C as f64 / 8.0 * STEP_NS as f64 / 1e9;
            while credit[q] >= size as f64 {
                credit[q] -= size as f64;
                offered[q] += size as u64;
                let _ = s.enqueue(vec![q as u8; size], classes[q], now);
            }
        }
        s.dequeue(now, usize::MAX, &mut out);
        out.clear();
        // Work conservation: packets left waiting means the link is busy.
        if s.queued() > 0 {
            assert!(s.link_free_ns() > t, "idle link with {} queued at {t}", s.queued());
        }
        t += STEP_NS;
    }
    (s, offered)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn bounds_hold(
        fr in prop::array::uniform5(0.0f64..1.2),
        sz in prop::array::uniform5(64usize..1500),
    ) {
        let load = core::array::from_fn(|q| (fr[q], sz[q]));
        let (s, offered) = run(load);
        let b = Bounds::default();
        let mu = [b.r, b.n, b.g, b.a, b.u];
        let cap_bytes = |q: usize| mu[q] * C as f64 / 8.0 * T_NS as f64 / 1e9;
        let c = s.counters();
        let slack = 3.0 * 1500.0 + cfg().burst_bytes as f64;
        for q in 0..3 {
            let burst = if q == 2 { cfg().g_burst_bytes } else { cfg().burst_bytes } as f64;
            // Never above the bound (plus the policer burst).
            prop_assert!((c[q].sent_bytes as f64) <= cap_bytes(q) + burst + 1500.0, "queue {q} over bound");
            // Exactly min(arrival, bound), up to what is still in flight at the end.
            let want = (offered[q] as f64).min(cap_bytes(q));
            let left = s.queue_len(q) as f64 * 1500.0;
            prop_assert!(c[q].sent_bytes as f64 + left + slack >= want, "queue {q} under bound");
        }
        // R/N/G bursts above their bounds are taken from A and U.
        let bursts = (2 * cfg().burst_bytes + cfg().g_burst_bytes) as f64;
        for q in 3..5 {
            let slack = slack + bursts;
            let want = (c[q].enqueued_bytes as f64).min(cap_bytes(q));
            prop_assert!(c[q].sent_bytes as f64 + slack >= want, "queue {q}: {} < {want}", c[q].sent_bytes);
        }
    }
}

#[test]
fn leftover_goes_to_a_and_u_and_config_is_validated() {
    // Only A and U offered, 60/60 % of C: they share the whole link ~3:1.
    let (s, _) = run([(0.0, 1500), (0.0, 1500), (0.0, 1500), (0.6, 1500), (0.6, 1500)]);
    let c = s.counters();
    let total = (c[3].sent_bytes + c[4].sent_bytes) as f64;
    let link = C as f64 / 8.0 * T_NS as f64 / 1e9;
    assert!(total > 0.99 * link, "{total} of {link}");
    // A (60 %) is below its DRR share (75 %): it gets all of it, U the rest.
    assert!(c[3].sent_bytes + 1500 >= c[3].enqueued_bytes, "{c:?}");
    assert!(c[4].sent_bytes as f64 > 0.39 * link, "{c:?}");
    let bad = SchedulerConfig { bounds: Bounds { r: 0.6, ..Default::default() }, ..cfg() };
    assert_eq!(Scheduler::<Vec<u8>>::new(bad).err().unwrap().key, "bounds");
    let bad = SchedulerConfig { capacity_bps: 0, ..cfg() };
    assert_eq!(Scheduler::<Vec<u8>>::new(bad).err().unwrap().key, "capacity_bps");
}
