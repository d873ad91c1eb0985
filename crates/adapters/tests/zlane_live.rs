//! Z-Lane parameter changes through the control plane, on a running router
//! (synthetic backend): they apply in place on the workers, so buckets keep
//! their levels and queued packets stay queued.
#![cfg(feature = "zlane")]

use std::path::Path;
use std::sync::Arc;

use control::Plane;
use pipeline::DropReason;
use runtime::config::{self, RouterConfig};
use runtime::Snapshot;

/// A one-worker router on virtual time with synthetic `traffic` into port
/// 0, `pipeline`, and `egress` on port 1; it runs until the test stops it.
fn start(traffic: &str, egress: &str, pipeline: &str) -> Arc<Plane> {
    let text = format!(
        r#"
[io]
backend = "synthetic"
[io.synthetic]
pacing = "virtual"
refresh_ms = 500
{traffic}
[workers]
count = 1
pin = false
[[ports]]
id = 0
[[ports]]
id = 1
egress = {egress}
{pipeline}
[run]
duration_ms = 86_400_000    # a virtual day: the test stops the router
"#
    );
    let cfg: RouterConfig = config::parse(&text, Path::new("zlane-live.toml")).unwrap();
    Plane::new(runtime::start::<adapters::All>(cfg.clone()).unwrap(), cfg)
}

/// Stops the router and returns its final counters.
fn finish(plane: Arc<Plane>) -> Snapshot {
    plane.stop();
    let plane = Arc::try_unwrap(plane).ok().expect("the test holds the only handle");
    plane.into_router().wait().unwrap()
}

fn conserved(s: &Snapshot) {
    assert_eq!(s.rx(), s.tx() + s.drops().total() + s.queued() + s.to_control, "{s:?}");
}

/// 1000 rate changes that keep the guaranteed AS's rate (150 Mbit/s written
/// as bit/s, then as 75 % of μ_G × capacity) leave its bucket alone: every
/// one of its packets stays in G, and the classifier's counters only grow.
#[test]
fn a_thousand_no_op_rate_changes_cost_the_guaranteed_as_nothing() {
    let plane = start(
        r#"
[[io.synthetic.traffic]]
name = "guaranteed-as"      # 1-ff00:0:111 at ~76 Mbit/s, guaranteed 150 Mbit/s
port = 0
rate_pps = 60_000
flows = 32
template = "epic-z"
via_gateway = true
src_ia = "1-ff00:0:111"
fwd_key = "000102030405060708090a0b0c0d0e0f"
sv = "f0e0d0c0b0a090807060504030201000"
size = 200
"#,
        r#"{ kind = "zlane", capacity_bps = 1_000_000_000 }"#,
        r#"
[[pipeline]]
kind = "parse"
[[pipeline]]
kind = "zlane-classify"
local_ia = "1-ff00:0:110"
sv = "f0e0d0c0b0a090807060504030201000"
epoch = [1_700_000_000, 1_900_000_000]
capacity_bps = 1_000_000_000
mu_g = 0.2
rates = [{ as = "1-ff00:0:111", bps = 150_000_000 }]
[[pipeline]]
kind = "scion-forward"
key = "000102030405060708090a0b0c0d0e0f"
interfaces = [{ ifid = 2, port = 0 }, { ifid = 3, port = 1 }]
"#,
    );
    // The first form differs from the file's, so that every change counts.
    let forms = [
        "{ as = \"1-ff00:0:111\", percent_of_g = 75.0 }",
        "{ as = \"1-ff00:0:111\", bps = 150_000_000 }",
    ];
    let mut last = 0;
    for k in 0..1000 {
        let rate: toml::Value = toml::from_str::<toml::Table>(&format!("r = [{}]", forms[k % 2]))
            .unwrap()
            .remove("r")
            .unwrap();
        let edit = |p: &mut toml::Table| {
            p.insert("rates".into(), rate.clone());
            Ok(())
        };
        let a = plane.edit_stages(&["zlane-classify"], edit, "rate").unwrap();
        assert_eq!(a.generation, k as u64 + 1);
        if k % 100 == 0 {
            let g = plane.snapshot().stage_named(1, "class_g").unwrap_or(0);
            assert!(g >= last, "class_g went back from {last} to {g}");
            last = g;
        }
    }
    let s = finish(plane);
    conserved(&s);
    let group = &s.groups[0];
    assert!(group.offered > 1000, "{s:?}");
    assert_eq!(s.stage_named(1, "over_bucket"), Some(0), "no packet was demoted: {s:?}");
    assert_eq!(s.stage_named(1, "class_g"), Some(s.stages[1].1.packets), "{s:?}");
    assert_eq!(s.drops().total(), 0, "{s:?}");
    assert_eq!(group.delivered + s.queued(), group.offered);
}

/// 1000 bounds changes on an overloaded `zlane` egress discard nothing: its
/// A and U queues stay full across every change, and rx = tx + drops +
/// queued holds with no `reconfigured` drop.
#[test]
fn a_thousand_bounds_changes_discard_nothing() {
    let plane = start(
        r#"
# 20 Mbit/s into a 10 Mbit/s link: G (class 3), A (class 4) and U.
traffic = [
  { name = "guaranteed", port = 0, rate_pps = 5_000, flows = 8, template = "ipv4-udp", src = "10.1.0.1", dst = "10.2.0.1", size = 128 },
  { name = "authenticated", port = 0, rate_pps = 7_500, flows = 64, template = "ipv4-udp", src = "10.3.0.1", dst = "10.2.0.1", size = 128 },
  { name = "unauthenticated", port = 0, rate_pps = 7_500, flows = 64, template = "ipv4-udp", src = "10.4.0.1", dst = "10.2.0.1", size = 128 },
]
"#,
        r#"{ kind = "zlane", capacity_bps = 10_000_000, queue_packets = [64, 64, 64, 256, 256] }"#,
        r#"
[[pipeline]]
kind = "ipv4-forward"
routes = [{ prefix = "10.2.0.0/16", port = 1 }]
[[pipeline]]
kind = "classify"
rules = [{ src = "10.1.0.0/16", class = 3 }, { src = "10.3.0.0/16", class = 4 }]
default = 5
"#,
    );
    let bounds = [
        "{ r = 0.5, n = 0.1, g = 0.2, a = 0.15, u = 0.05 }",
        "{ r = 0.3, n = 0.1, g = 0.3, a = 0.1, u = 0.2 }",
    ];
    for k in 0..1000 {
        let b: toml::Value = toml::from_str::<toml::Table>(&format!("b = {}", bounds[k % 2]))
            .unwrap()
            .remove("b")
            .unwrap();
        let capacity = if k % 2 == 0 { 12_000_000 } else { 10_000_000 };
        let edit = |p: &mut toml::Table| {
            p.insert("bounds".into(), b.clone());
            p.insert("capacity_bps".into(), toml::Value::Integer(capacity));
            Ok(())
        };
        let a = plane.edit_egress(1, Some(&["zlane"]), edit, "bounds").unwrap();
        assert!(!a.detail.contains("dropped"), "{}", a.detail);
    }
    let queued_before_stop = plane.snapshot().queued();
    let s = finish(plane);
    conserved(&s);
    assert_eq!(s.drops().get(DropReason::Reconfigured), 0, "{s:?}");
    assert!(s.drops().get(DropReason::QueueFull) > 0, "the egress was overloaded: {s:?}");
    assert!(queued_before_stop > 0 && s.queued() > 0, "{s:?}");
    let named = |n: &str| s.named.iter().filter(|c| c.name == n).map(|c| c.value).sum::<u64>();
    assert_eq!(named("queue_a_reconfigured") + named("queue_u_reconfigured"), 0);
    let sent = ["queue_g_sent", "queue_a_sent", "queue_u_sent"].map(named);
    assert!(sent.iter().all(|&n| n > 0), "{sent:?} {:?}", s.named);
}
