//! P-8 (spec §9.2): sequence numbers stay unique under concurrent
//! `next_seqno` / `reserve_seqnos` from W = 2..3 workers, checked over every
//! interleaving by `loom` (the counter's atomics come from `fair::sync`).
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test -p fair --release --test loom_seqno`.
//! Without `--cfg loom` this file is empty; the W = 16 stress test is
//! `tests/spec_unit.rs::p_8_sequence_numbers_unique_under_concurrency`.
#![cfg(loom)]

use fair::source::SourceChannel;
use fair::sync::{Arc, AtomicU32};
use loom::thread;
use mac::Key;

/// Each of `w` workers takes `per` single numbers and then one run of `run`
/// numbers; every number handed out (24-bit masked) must be distinct and the
/// union must be exactly `0..w·(per + run)`.
fn model(w: usize, per: usize, run: u32) {
    loom::model(move || {
        let ch = Arc::new(SourceChannel::new(
            0,
            2,
            &Key::from([7; 16]),
            1,
            1_000,
            1_000,
            0,
            Arc::new(AtomicU32::new(0)),
        ));
        let handles: Vec<_> = (0..w)
            .map(|_| {
                let ch = ch.clone();
                thread::spawn(move || {
                    let mut got: Vec<u32> = (0..per).map(|_| ch.next_seqno()).collect();
                    if run > 0 {
                        let first = ch.reserve_seqnos(run);
                        got.extend((0..run).map(|i| first.wrapping_add(i) & 0x00FF_FFFF));
                    }
                    got
                })
            })
            .collect();
        let mut all: Vec<u32> = handles.into_iter().flat_map(|h| h.join().unwrap()).collect();
        all.sort_unstable();
        let n = (w * (per + run as usize)) as u32;
        assert_eq!(all, (0..n).collect::<Vec<_>>());
    });
}

#[test]
fn p_8_loom_two_workers_single() {
    model(2, 2, 0);
}

#[test]
fn p_8_loom_two_workers_single_and_run() {
    model(2, 1, 3);
}

#[test]
fn p_8_loom_three_workers_single() {
    model(3, 1, 0);
}

#[test]
fn p_8_loom_three_workers_single_and_run() {
    model(3, 1, 2);
}

/// Negative control: the same check finds the lost update of a counter built
/// from a separate load and store, so the model does explore the races.
#[test]
#[should_panic]
fn p_8_loom_negative_control_load_store_counter_races() {
    use fair::sync::Ordering;
    loom::model(|| {
        let c = Arc::new(AtomicU32::new(0));
        let hs: Vec<_> = (0..2)
            .map(|_| {
                let c = c.clone();
                thread::spawn(move || {
                    let v = c.load(Ordering::Relaxed);
                    c.store(v + 1, Ordering::Relaxed);
                    v
                })
            })
            .collect();
        let mut got: Vec<u32> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        got.sort_unstable();
        assert_eq!(got, vec![0, 1]);
    });
}
