//! The slow path: packets to the router's own address are handed to control
//! through the workers' bounded rings, answered on the slow-path thread
//! (`icmp-echo`) and transmitted by the worker they came from; a full ring
//! drops and counts instead of blocking; without `[slow_path]` such packets
//! are counted and freed.

use pipeline::DropReason;
use runtime::Snapshot;

/// A router at 10.0.0.254 that is pinged, with transit traffic beside the pings.
fn config(workers: usize, ping_pps: u64, slow_path: &str) -> String {
    format!(
        r#"
[io]
backend = "synthetic"
[io.synthetic]
pacing = "virtual"
[[io.synthetic.traffic]]
name = "ping"
port = 0
rate_pps = {ping_pps}
flows = 16
template = "icmp-echo"
dst = "10.0.0.254"
size = 98
[[io.synthetic.traffic]]
name = "to-local-udp"
port = 0
rate_pps = 1000
flows = 4
template = "ipv4-udp"
dst = "10.0.0.254"
[[io.synthetic.traffic]]
name = "transit"
port = 0
rate_pps = 100000
flows = 64
template = "ipv4-udp"
dst = "10.2.0.1"
[workers]
count = {workers}
pin = false
[[ports]]
id = 0
[[ports]]
id = 1
[[pipeline]]
kind = "ipv4-forward"
routes = [{{ prefix = "10.2.0.0/16", port = 1 }}]
local = ["10.0.0.254"]
{slow_path}
[run]
duration_ms = 200
"#
    )
}

fn run(text: &str) -> Snapshot {
    let cfg = runtime::config::parse(text, "slow.toml".as_ref()).unwrap();
    runtime::check::<()>(&cfg).unwrap();
    runtime::start::<()>(cfg).unwrap().wait().unwrap()
}

fn group(s: &Snapshot, name: &str) -> (u64, u64) {
    let g = s.groups.iter().find(|g| g.name == name).unwrap();
    (g.offered, g.delivered)
}

const ECHO: &str = "[slow_path]\n[[slow_path.pipeline]]\nkind = \"icmp-echo\"";

#[test]
fn pings_to_the_router_are_answered_through_the_slow_path() {
    for workers in [1, 2] {
        let s = run(&config(workers, 1000, ECHO));
        let sp = s.slow_path.clone().expect("slow path running");
        let (ping, _) = group(&s, "ping");
        let (udp, _) = group(&s, "to-local-udp");
        assert!(ping >= 190 && udp >= 190, "{ping} {udp}");
        // Every packet to 10.0.0.254 went to the slow path; pings came back
        // as replies, the rest was delivered to the router.
        assert_eq!(sp.received, ping + udp, "{workers} workers: {sp:?}");
        assert_eq!(sp.forwarded, ping);
        assert_eq!(sp.consumed, udp);
        assert_eq!(sp.dropped, 0);
        assert_eq!(s.to_control, ping + udp);
        assert!(sp.latency_max_ns > 0 && sp.latency_mean_ns <= sp.latency_max_ns);
        assert!(sp.latency_p99_ns <= sp.latency_max_ns);
        // Replies leave through the ingress port (what was still in flight
        // when the run ended is freed by the slow path).
        let replies = s.ports[0].counters.tx;
        assert!(replies > 0 && replies <= ping, "{replies} of {ping}");
        assert_eq!(group(&s, "ping").1, replies, "replies keep the group tag");
        // Transit traffic is routed on the workers as before.
        let (offered, delivered) = group(&s, "transit");
        assert_eq!(delivered, offered);
        assert_eq!(s.slow_path.unwrap().stages[0].0, "icmp-echo");
    }
}

#[test]
fn a_full_ring_drops_and_counts_without_blocking() {
    let tiny = format!("{ECHO}\n").replace("[slow_path]\n", "[slow_path]\nqueue = 1\n");
    let s = run(&config(1, 2_000_000, &tiny));
    let sp = s.slow_path.clone().unwrap();
    let full = s.ports[0].counters.drops.get(DropReason::SlowPathFull);
    let (ping, _) = group(&s, "ping");
    let (udp, _) = group(&s, "to-local-udp");
    assert!(full > 0, "a 2 Mpps ping flood overruns a ring of 1");
    assert_eq!(sp.received + full, ping + udp, "every packet is either taken or counted");
    let (offered, delivered) = group(&s, "transit");
    assert_eq!(delivered, offered, "the worker kept forwarding");
}

#[test]
fn without_a_slow_path_packets_to_control_are_counted_and_freed() {
    let s = run(&config(1, 1000, ""));
    assert!(s.slow_path.is_none());
    let (ping, delivered) = group(&s, "ping");
    assert_eq!(delivered, 0);
    assert_eq!(s.to_control, ping + group(&s, "to-local-udp").0);
}

#[test]
fn slow_path_configuration_is_checked() {
    for (bad, key) in [
        ("[slow_path]\nqueue = 0\n[[slow_path.pipeline]]\nkind = \"icmp-echo\"", "slow_path.queue"),
        ("[slow_path]\npipeline = []", "slow_path.pipeline"),
        ("[slow_path]\nidle_us = 1000000\npipeline = [{ kind = \"nop\" }]", "slow_path.idle_us"),
        (
            "[slow_path]\n[[slow_path.pipeline]]\nkind = \"icmp-echo\"\nttl = 0",
            "slow_path.pipeline[0].ttl",
        ),
        ("[slow_path]\n[[slow_path.pipeline]]\nkind = \"no-such\"", "slow_path.pipeline[0].kind"),
    ] {
        let text = config(1, 1000, bad);
        let e = runtime::config::parse(&text, "slow.toml".as_ref())
            .and_then(|cfg| runtime::check::<()>(&cfg).map(drop))
            .unwrap_err();
        assert_eq!(e.key, key, "{e}");
    }
}
