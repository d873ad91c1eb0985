//! Callgrind driver for the `SibraTransit` data path (load-independent
//! instruction counts).
//!
//! ```text
//! cargo build --release -p sibra --example sibra_profile
//! valgrind --tool=callgrind --toggle-collect='*run_bursts*' \
//!     target/release/examples/sibra_profile ephemeral 2000
//! ```
//! Per packet = (Ir(N₂ bursts) − Ir(N₁ bursts)) / ((N₂ − N₁) · 32), so setup
//! cancels. Modes (pre-built bursts of valid transit packets at the middle AS
//! of `A (1) — (2) B (3) — (4) C`, bare SCION, 200 bytes, all forwarded):
//! * `ephemeral`: 2048 ephemeral reservations (64 distinct bursts), like the
//!   `sibra` scenario of `scripts/bench-dpdk.sh`;
//! * `steady`: the same over 2048 steady reservations;
//! * `junction`: ephemeral packets at an AS holding two hops (two SOFs);
//! * `mixed`: steady and ephemeral packets alternating inside every burst
//!   (a layout change at every packet).
//!
//! The second argument is the number of bursts run (default 100 000); each
//! burst's CurrHop bytes are put back afterwards (included, 32 byte writes).
//! valgrind hides AVX-512/VAES, so the AES runs on the `xmm` AES-NI path.

use std::hint::black_box;

use packet::Ia;
use pipeline::{Batch, Now, Stage, BURST};
use sibra::host::{self, ActiveBlock};
use sibra::monitor::{CoreConfig, CoreMonitor};
use sibra::stage::{InterfaceTable, RouterConfig, SibraTransit};
use sibra::token::{issue_chain, Key, SofKeys};
use sibra::{BwClass, EphemeralId, ResvIdx, ResvInfo, SteadyId, Tick};

const NOW_NS: u64 = 1_700_000_000_000_000_000;
const FLOWS: usize = 2048;
/// CurrHop: common header 12 + address header 24 + 1.
const CURR: usize = 12 + 24 + 1;

fn now() -> Now {
    Now::from_unix_ns(NOW_NS)
}

fn info() -> ResvInfo {
    ResvInfo {
        exp_tick: Tick::of(now()).plus(3),
        // Far above the offered load: the monitor stays on its normal path.
        bw_fwd: BwClass::new(60).unwrap(),
        bw_rev: BwClass::new(60).unwrap(),
        index: ResvIdx::new(1).unwrap(),
        fwd: true,
        fail_hop: 0,
    }
}

fn frame(p: &packet::scion::SibraPathRepr) -> Vec<u8> {
    let (src, dst) = (Ia::new(1, 0xa), Ia::new(1, 0xc));
    let probe = host::packet(src, [0; 4], dst, [0; 4], p, &[]).unwrap();
    let payload = vec![0u8; 200usize.saturating_sub(probe.len())];
    host::packet(src, [10, 0, 0, 1], dst, [10, 0, 0, 2], p, &payload).unwrap()
}

/// One valid packet of flow `n` for `mode`, and its CurrHop at this AS.
fn packet(mode: &str, n: usize, ks: &[SofKeys]) -> (Vec<u8>, u8) {
    let i = info();
    let tag = (n as u16).to_be_bytes();
    let steady = mode == "steady" || (mode == "mixed" && n % 2 == 1);
    if steady {
        let refs = [&ks[0], &ks[1], &ks[2]];
        let id = SteadyId::new(0xa, n as u16);
        let blk =
            ActiveBlock { info: i, sofs: issue_chain(&refs, &[(0, 1), (2, 3), (4, 0)], &i, &id.0) };
        let mut p = host::steady_data(id, &blk).unwrap();
        p.curr_hop = 1;
        return (frame(&p), 1);
    }
    let id = EphemeralId::new(0xa, [tag[0], tag[1], 0, 0, 0, 0, 0, 0, 0, 7]);
    let (hops, refs): (&[(u16, u16)], Vec<&SofKeys>) = if mode == "junction" {
        (&[(0, 1), (2, 0), (0, 3), (4, 0)], vec![&ks[0], &ks[1], &ks[1], &ks[2]])
    } else {
        (&[(0, 1), (2, 3), (4, 0)], vec![&ks[0], &ks[1], &ks[2]])
    };
    let blk = ActiveBlock { info: i, sofs: issue_chain(&refs, hops, &i, &id.0) };
    let mut p = host::ephemeral_data(id, &blk).unwrap();
    p.curr_hop = 1;
    (frame(&p), 1)
}

#[inline(never)]
fn run_bursts(t: &mut SibraTransit, bursts: &mut [Batch<Vec<u8>>], curr: u8, n: u64) {
    let now = now();
    for r in 0..n {
        let b = &mut bursts[r as usize % bursts.len()];
        Stage::<Vec<u8>>::process(t, b, now);
        for i in 0..BURST {
            b.buf_mut(i)[CURR] = curr;
        }
        black_box(&*b);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map(String::as_str).unwrap_or("ephemeral");
    let n: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(100_000);
    assert!(
        matches!(mode, "ephemeral" | "steady" | "junction" | "mixed"),
        "mode: ephemeral | steady | junction | mixed"
    );
    let ks: Vec<SofKeys> = (1..=3).map(|k| SofKeys::new(&Key::from([k; 16]))).collect();
    let mut curr = 0;
    let mut bursts: Vec<Batch<Vec<u8>>> = (0..FLOWS / BURST)
        .map(|b| {
            let mut batch = Batch::new();
            for i in 0..BURST {
                let (p, c) = packet(mode, b * BURST + i, &ks);
                curr = c;
                batch.push(p, 2).unwrap();
            }
            batch
        })
        .collect();
    let cfg =
        RouterConfig { ifaces: InterfaceTable::new().with(2, 2).with(3, 3), ..Default::default() };
    let mut t =
        SibraTransit::new(cfg, ks[1].clone(), CoreMonitor::new(CoreConfig::default()).unwrap());
    run_bursts(&mut t, &mut bursts, curr, n);
    let c = t.counters();
    // Every packet verified and forwarded: a regression would show here first.
    assert_eq!(c.forwarded, n * BURST as u64, "{c:?}");
    assert!(bursts.iter().all(|b| b.live_mask() == u32::MAX));
    println!("{mode}: {n} bursts, {c:?}");
}
