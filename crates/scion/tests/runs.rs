//! A burst decides as the same packets one per burst: runs of packets that
//! repeat a hop (where the stage reuses the first one's parse, layout and
//! MAC) interleaved with packets that differ from them in one byte, in
//! length or in arrival port.

use pipeline::{Batch, Now, ScionHint, Stage, BURST};

#[path = "../benches/support/burst.rs"]
mod burst_support;

use burst_support::{burst_packets, burst_packets_distinct, transit, NOW};

#[path = "support/rng.rs"]
mod rng;
use rng::Rng;

/// A burst of runs drawn from `base` (packets of one or several paths),
/// some packets changed.
fn burst(r: &mut Rng, base: &[Vec<u8>]) -> Vec<(Vec<u8>, u16)> {
    let mut pkts = Vec::new();
    let n = 1 + r.below(BURST as u64) as usize;
    while pkts.len() < n {
        let pkt = &base[r.below(base.len() as u64) as usize];
        for _ in 0..1 + r.below(12) {
            let mut p = pkt.clone();
            match r.below(10) {
                // A byte of the headers and path (or just past them).
                0 | 1 => {
                    let at = r.below(p.len().min(160) as u64) as usize;
                    p[at] ^= 1 << r.below(8);
                }
                2 => {
                    let keep = r.below(p.len() as u64) as usize;
                    p.truncate(keep);
                }
                3 => p.extend_from_slice(&[0; 8]),
                _ => {}
            }
            let port = [0, 0, 0, 1, 5][r.below(5) as usize];
            pkts.push((p, port));
        }
    }
    pkts.truncate(n);
    pkts
}

fn check(seed: u64, base: &[Vec<u8>]) {
    check_hinted(seed, base, false);
}

/// [`check`], the burst's packets with the parse stage's header hint when
/// `hinted` (the packets one at a time without it).
fn check_hinted(seed: u64, base: &[Vec<u8>], hinted: bool) {
    let mut r = Rng(seed);
    let pkts = burst(&mut r, base);
    let now = Now::from_unix_ns(NOW);
    let mut batch = Batch::new();
    for (k, (p, port)) in pkts.iter().enumerate() {
        batch.push(p.clone(), *port).expect("at most a burst");
        if hinted {
            batch.meta_mut(k).scion = ScionHint::of_header(p);
        }
    }
    let mut stage = transit();
    stage.process(&mut batch, now);
    let mut got = Vec::new();
    batch.drain(|buf, m| got.push((buf, m.verdict)));
    let mut alone = transit();
    for (k, ((p, port), (out, verdict))) in pkts.iter().zip(got).enumerate() {
        let mut one = Batch::new();
        one.push(p.clone(), *port).expect("one packet");
        alone.process(&mut one, now);
        let mut want = Vec::new();
        one.drain(|buf, m| want.push((buf, m.verdict)));
        assert_eq!(want, [(out, verdict)], "seed {seed} packet {k}");
    }
    assert_eq!(stage.counters(), alone.counters(), "seed {seed}");
}

#[test]
fn runs_of_one_path_decide_as_single_packets() {
    let base = burst_packets(false);
    for seed in 0..3000 {
        check(seed, &base[..1]);
    }
}

#[test]
fn runs_of_several_paths_decide_as_single_packets() {
    for epic_hp in [false, true] {
        let base = burst_packets_distinct(epic_hp);
        for seed in 0..2000 {
            check(seed, &base[..3]);
        }
    }
}

/// With the parse stage's hint a run skips the version and payload checks
/// the hint stands for; packets whose header fails them carry no hint.
#[test]
fn hinted_runs_decide_as_single_packets() {
    for epic_hp in [false, true] {
        let one = burst_packets(epic_hp);
        let several = burst_packets_distinct(epic_hp);
        for seed in 0..1500 {
            check_hinted(seed, &one[..1], true);
            check_hinted(seed, &several[..3], true);
        }
    }
}

#[test]
fn epic_hp_runs_decide_as_single_packets() {
    let base = burst_packets(true);
    for seed in 0..2000 {
        check(seed, &base[..1]);
    }
}

/// One stage over many bursts (a flow continues from one burst into the
/// next) decides as a fresh stage per packet, across changes of the clock
/// (past the hop fields' expiry), of the key and of the interfaces.
#[test]
fn consecutive_bursts_decide_as_single_packets() {
    use mac::Key;
    use scion::{ForwardingKey, ScionForward};

    let base = burst_packets(false);
    let mut stage = transit();
    let mut fwd = stage.forwarder().clone();
    let mut r = Rng(7);
    for round in 0..3000 {
        match r.below(20) {
            0 => {
                let k = ForwardingKey::new(&Key::from([[2, 9][r.below(2) as usize]; 16]));
                fwd.set_key(k.clone());
                stage.forwarder_mut().set_key(k);
            }
            1 => {
                fwd.interfaces_mut().unbind(23);
                stage.forwarder_mut().interfaces_mut().unbind(23);
            }
            2 => {
                let port = r.below(3) as u16;
                fwd.interfaces_mut().bind(23, port);
                stage.forwarder_mut().interfaces_mut().bind(23, port);
            }
            _ => {}
        }
        // Now, or two days later (every hop field expired).
        let now = Now::from_unix_ns(NOW + r.below(2) * 2 * 86_400 * 1_000_000_000);
        let paths = 1 + r.below(2) as usize;
        let pkts = burst(&mut r, &base[..paths]);
        let mut batch = Batch::new();
        for (p, port) in &pkts {
            batch.push(p.clone(), *port).expect("at most a burst");
        }
        stage.process(&mut batch, now);
        let mut got = Vec::new();
        batch.drain(|buf, m| got.push((buf, m.verdict)));
        for (k, ((p, port), (out, verdict))) in pkts.iter().zip(got).enumerate() {
            let mut alone = ScionForward::new(fwd.clone());
            let mut one = Batch::new();
            one.push(p.clone(), *port).expect("one packet");
            alone.process(&mut one, now);
            let mut want = Vec::new();
            one.drain(|buf, m| want.push((buf, m.verdict)));
            assert_eq!(want, [(out, verdict)], "round {round} packet {k}");
        }
    }
}

/// As the parser leaves them: SCION after some outer headers (at one of
/// a few offsets, changing within runs), or an IP packet that is not
/// SCION (passed through).
#[test]
fn runs_behind_outer_headers_decide_as_single_packets() {
    use pipeline::{Proto, L3};

    let base = burst_packets(false);
    let now = Now::from_unix_ns(NOW);
    for seed in 0..2000 {
        let mut r = Rng(seed);
        let pkts = burst(&mut r, &base[..2]);
        let outer: Vec<(usize, Proto, L3)> = pkts
            .iter()
            .map(|_| match r.below(12) {
                0 => (0, Proto::None, L3::None),
                1 => (62, Proto::None, L3::Ipv6),
                2 => (48, Proto::Scion, L3::Ipv4),
                3 => (54, Proto::Scion, L3::Ipv6),
                _ => (62, Proto::Scion, L3::Ipv6),
            })
            .collect();
        let frame = |p: &[u8], off: usize| {
            let mut f = vec![0xee; off];
            f.extend_from_slice(p);
            f
        };
        let fill = |b: &mut Batch<Vec<u8>>, k: usize, (off, proto, l3): (usize, Proto, L3)| {
            let m = b.meta_mut(k);
            (m.proto, m.l3, m.proto_off) = (proto, l3, off as u16);
        };
        let mut batch = Batch::new();
        for (k, (p, port)) in pkts.iter().enumerate() {
            batch.push(frame(p, outer[k].0), *port).expect("at most a burst");
            fill(&mut batch, k, outer[k]);
        }
        let mut stage = transit();
        stage.process(&mut batch, now);
        let mut got = Vec::new();
        batch.drain(|buf, m| got.push((buf, m.verdict)));
        let mut alone = transit();
        for (k, ((p, port), (out, verdict))) in pkts.iter().zip(got).enumerate() {
            let mut one = Batch::new();
            one.push(frame(p, outer[k].0), *port).expect("one packet");
            fill(&mut one, 0, outer[k]);
            alone.process(&mut one, now);
            let mut want = Vec::new();
            one.drain(|buf, m| want.push((buf, m.verdict)));
            assert_eq!(want, [(out, verdict)], "seed {seed} packet {k}");
        }
        assert_eq!(stage.counters(), alone.counters(), "seed {seed}");
    }
}
