//! SIBRA reservation requests through the slow path: `sibra-transit` hands
//! them to control (`requests = "to-control"`), one `sibra-control` on the
//! slow-path thread admits them for the whole router (its capacity is not
//! split across workers), and the workers transmit the forwarded requests.

use std::path::Path;

use runtime::Snapshot;

const SLOW_SIBRA: &str = r#"
[io]
backend = "synthetic"
[io.synthetic]
pacing = "virtual"
[[io.synthetic.traffic]]
name = "setup"
port = 0
rate_pps = 1000
flows = 8
template = "sibra"
kind = "steady-setup"
src_ia = "1-ff00:0:111"
sof_key = "2b7e151628aed2a6abf7158809cf4f3c"
fwd_key = "00000000000000000000000000000000"
bw_class = 10
size = 200
[[io.synthetic.traffic]]
name = "reserved"
port = 0
rate_pps = 100000
flows = 64
template = "sibra"
src_ia = "1-ff00:0:111"
sof_key = "2b7e151628aed2a6abf7158809cf4f3c"
fwd_key = "00000000000000000000000000000000"
size = 200
[workers]
count = WORKERS
pin = false
[[ports]]
id = 0
[[ports]]
id = 1
[[pipeline]]
kind = "parse"
[[pipeline]]
kind = "sibra-transit"
key = "2b7e151628aed2a6abf7158809cf4f3c"
interfaces = [{ ifid = 2, port = 0 }, { ifid = 3, port = 1 }]
requests = "to-control"
[slow_path]
[[slow_path.pipeline]]
kind = "sibra-control"
key = "2b7e151628aed2a6abf7158809cf4f3c"
interfaces = [{ ifid = 2, port = 0, capacity_bps = 1000000000 }, { ifid = 3, port = 1, capacity_bps = 1000000000 }]
[run]
duration_ms = 300
"#;

fn run(workers: usize) -> Snapshot {
    let text = SLOW_SIBRA.replace("WORKERS", &workers.to_string());
    let cfg = runtime::config::parse(&text, Path::new("slow-sibra.toml")).unwrap();
    runtime::check::<adapters::All>(&cfg).unwrap();
    runtime::start::<adapters::All>(cfg).unwrap().wait().unwrap()
}

fn slow_named(s: &Snapshot, name: &str) -> u64 {
    let sp = s.slow_path.as_ref().unwrap();
    sp.named.iter().filter(|n| n.name == name).map(|n| n.value).sum()
}

#[test]
fn reservation_requests_are_admitted_once_for_the_router_on_the_slow_path() {
    for workers in [1, 2] {
        let s = run(workers);
        let sp = s.slow_path.clone().unwrap();
        let setup = s.groups.iter().find(|g| g.name == "setup").unwrap();
        assert_eq!(sp.received, setup.offered, "{workers} workers: every request punted");
        assert_eq!(sp.forwarded, sp.received, "granted requests travel on");
        assert_eq!(slow_named(&s, "granted"), sp.received);
        assert_eq!(slow_named(&s, "denied"), 0);
        // One admission state for the router: 8 steady reservations whatever
        // the worker count (per-worker admission would hold them once per
        // worker the requests hash to).
        assert_eq!(slow_named(&s, "steady_reservations"), 8, "{workers} workers");
        assert_eq!(setup.delivered, sp.forwarded, "workers transmitted them");
        let data = s.groups.iter().find(|g| g.name == "reserved").unwrap();
        assert_eq!(data.delivered, data.offered, "data stays on the fast path");
        assert_eq!(s.stages[1].1.to_control, setup.offered);
    }
}

/// The slow path's stages count in the memory check before anything is
/// allocated: a table the machine cannot hold is refused by name.
#[test]
fn slow_path_stages_are_in_the_memory_check() {
    let huge = SLOW_SIBRA.replace("WORKERS", "1").replace(
        "[[slow_path.pipeline]]\nkind = \"sibra-control\"",
        "[[slow_path.pipeline]]\nkind = \"flowpolice\"\ncapability_key = \"c0ffee00c0ffee00c0ffee00c0ffee00\"\n\
         table_key = \"0123456789abcdef0123456789abcdef\"\nslots = 2000000000\n\
         seeds = { root = \"5eed000000000000000000000000000000000000000000000000000000000001\", first_epoch = 1, epochs = 1 }\n\
         [[slow_path.pipeline]]\nkind = \"sibra-control\"",
    );
    let cfg = runtime::config::parse(&huge, Path::new("huge.toml")).unwrap();
    let e = runtime::check::<adapters::All>(&cfg).unwrap_err();
    let text = e.to_string();
    assert!(text.contains("slow_path.pipeline[0]") && text.contains("memory"), "{text}");
}
