//! Rates are properties of links, ASes and hosts, not of cores: every
//! example configuration delivers the same rates per traffic group and per
//! port at one and at two workers (each worker applies its share of every
//! configured rate; `docs/multicore.md`).

use std::path::{Path, PathBuf};

use runtime::config::{self, BackendKind};
use runtime::rss::RssKey;
use runtime::synthetic::Pacing;
use runtime::Snapshot;

fn config(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config").join(name)
}

/// Runs `name` for `ms` of virtual time on `workers` workers.
fn run(name: &str, workers: usize, ms: u64) -> Snapshot {
    run_with(name, workers, RssKey::Flow, ms)
}

/// Runs `name` on `workers` workers, spreading packets by `rss`.
fn run_with(name: &str, workers: usize, rss: RssKey, ms: u64) -> Snapshot {
    let mut cfg = config::load_file(&config(name)).unwrap();
    cfg.workers.rss = rss;
    assert_eq!(cfg.io.backend, BackendKind::Synthetic, "{name}");
    assert_eq!(cfg.io.synthetic.as_ref().unwrap().pacing, Pacing::Virtual, "{name}");
    cfg.workers.count = workers;
    cfg.workers.pin = false;
    cfg.run.duration_ms = Some(ms);
    runtime::check::<adapters::All>(&cfg).unwrap();
    runtime::start::<adapters::All>(cfg).unwrap().wait().unwrap()
}

/// Packets per second of `count` over the run.
fn rate(s: &Snapshot, count: u64) -> f64 {
    count as f64 * 1e9 / s.elapsed_ns as f64
}

/// Compares delivered rates per group and transmitted rates per port.
///
/// Tolerance: a port's rate within 1 %; a group's delivered rate within 3 %
/// of what it was offered (RSS splits a group's flows unevenly over the
/// workers, so groups competing for a shared rate divide it a little
/// differently; the link's total does not move).
fn same_rates(name: &str, ms: u64) {
    let one = run(name, 1, ms);
    let two = run(name, 2, ms);
    for (a, b) in one.ports.iter().zip(&two.ports) {
        let (ra, rb) = (rate(&one, a.counters.tx), rate(&two, b.counters.tx));
        assert!((ra - rb).abs() <= 0.01 * ra.max(1000.0), "{name}: port {} tx {ra} vs {rb}", a.id);
    }
    for (a, b) in one.groups.iter().zip(&two.groups) {
        let offered = rate(&one, a.offered);
        let (da, db) = (rate(&one, a.delivered), rate(&two, b.delivered));
        assert!(
            (da - db).abs() <= 0.03 * offered.max(1000.0),
            "{name}: group {} delivered {da} vs {db} of {offered}",
            a.name
        );
    }
}

#[test]
fn default_link_rate_is_the_links_at_any_worker_count() {
    same_rates("default.toml", 200);
}

#[test]
fn zlane_scheduler_and_as_rates_hold_at_two_workers() {
    same_rates("zlane-border.toml", 200);
}

#[test]
fn scion_border_rates_hold_at_two_workers() {
    same_rates("scion-border.toml", 200);
}

#[test]
fn flowpolice_channel_caps_hold_at_two_workers() {
    same_rates("flowpolice-edge.toml", 200);
}

#[test]
fn sibra_transit_link_rate_holds_at_two_workers() {
    same_rates("sibra-transit.toml", 200);
}

/// The level `name` of the pipeline's elements, summed over workers.
fn level(s: &Snapshot, name: &str) -> u64 {
    s.named.iter().filter(|n| n.name == name).map(|n| n.value).sum()
}

/// FlowPolice aggregates flows per destination: spread by destination, each
/// flow's entry lives on exactly one worker (as many entries in all as with
/// one worker), and every capability-carrying packet finds it.
#[test]
fn flowpolice_flow_state_lives_on_one_worker_when_spread_by_destination() {
    let one = run_with("flowpolice-edge.toml", 1, RssKey::Flow, 100);
    let two = run_with("flowpolice-edge.toml", 2, RssKey::Dst, 100);
    assert!(level(&one, "table_entries") > 0);
    assert_eq!(level(&two, "table_entries"), level(&one, "table_entries"));
    let regular = |s: &Snapshot| s.groups.iter().find(|g| g.name == "regular").unwrap().clone();
    let (a, b) = (regular(&one), regular(&two));
    // The first packets of a flow may precede its request's entry.
    assert!(a.delivered * 100 >= a.offered * 99, "{a:?}");
    assert!(b.delivered * 100 >= b.offered * 99, "every flow's packets meet its entry: {b:?}");
}
