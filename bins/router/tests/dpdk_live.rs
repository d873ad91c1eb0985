//! Live control of the DPDK router, end to end: `router run` with the DPDK
//! backend on `net_null` virtual devices (`--no-huge --no-pci`), managed by
//! the `ctl` binary over gRPC. A port's line rate is changed live and the
//! change shows in the transmitted-packet counters; a stage parameter change
//! and a protocol-free status read work the same as on the software backends.
//!
//! Needs the `ctl` binary next to `router` (`cargo build -p ctl` first; the
//! DPDK test script does).
#![cfg(feature = "dpdk")]

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A token the control API accepts (at least 16 bytes).
const TOKEN: &str = "dpdk-live-control-test-token";

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("router-dpdk-live-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn ctl_bin() -> PathBuf {
    let router = Path::new(env!("CARGO_BIN_EXE_router"));
    let ctl = router.with_file_name("ctl");
    assert!(ctl.exists(), "{} missing: build it first (cargo build -p ctl)", ctl.display());
    ctl
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Runs `ctl` with the test's address and token; (success, stdout, stderr).
fn ctl(addr: &str, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(ctl_bin())
        .args(["--addr", addr, "--token-file"])
        .arg(tmp("token"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Packets transmitted on port `port` so far.
fn tx(addr: &str, port: u64) -> u64 {
    let (ok, out, err) = ctl(addr, &["--json", "counters"]);
    assert!(ok, "ctl counters: {err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let p = v["ports"].as_array().unwrap().iter().find(|p| p["id"] == port).unwrap();
    p["tx"].as_u64().unwrap_or(0)
}

/// Transmit rate of port 1 over `window`, packets per second.
fn rate(addr: &str, window: Duration) -> f64 {
    let (a, t0) = (tx(addr, 1), Instant::now());
    std::thread::sleep(window);
    let (b, t1) = (tx(addr, 1), Instant::now());
    (b - a) as f64 / (t1 - t0).as_secs_f64()
}

/// Kills the router if the test fails half-way.
struct Router(Child);

impl Drop for Router {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_rate_changed_live_with_ctl_shows_in_the_counters() {
    std::fs::write(tmp("token"), TOKEN).unwrap();
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let cfg = format!(
        r#"[io]
backend = "dpdk"
[io.dpdk]
eal_args = ["--no-huge", "-m", "256", "--no-pci", "--vdev", "net_null0", "--vdev", "net_null1"]
[workers]
pin = false
[[ports]]
id = 0
[[ports]]
id = 1
egress = {{ kind = "fifo", capacity = 256, rate_pps = 2000, burst = 64 }}
[[pipeline]]
kind = "port-forward"
map = [[0, 1], [1, 0]]
[control]
listen = "{addr}"
metrics_listen = ""
token_file = "{}"
"#,
        tmp("token").display()
    );
    std::fs::write(tmp("router.toml"), cfg).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_router"))
        .args(["run", "--quiet", "--duration", "20s"])
        .arg(tmp("router.toml"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut router = Router(child);

    // Wait for the control API.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (ok, out, _) = ctl(&addr, &["status"]);
        if ok {
            assert!(out.contains("backend dpdk"), "{out}");
            break;
        }
        if Instant::now() > deadline || router.0.try_wait().unwrap().is_some() {
            let mut err = String::new();
            let _ = router.0.stderr.take().unwrap().read_to_string(&mut err);
            panic!("the DPDK router did not come up: {err}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }

    // 2000 packets/s on port 1, then 20000 after a live change.
    let before = rate(&addr, Duration::from_secs(1));
    assert!((1500.0..=2600.0).contains(&before), "port 1 sends {before:.0} pps, shaped to 2000");
    let (ok, out, err) = ctl(&addr, &["egress-params", "1", "rate_pps = 20000"]);
    assert!(ok, "{err}");
    assert!(out.contains("generation 1"), "{out}");
    std::thread::sleep(Duration::from_millis(200));
    let after = rate(&addr, Duration::from_secs(1));
    assert!(
        (15000.0..=26000.0).contains(&after),
        "port 1 sends {after:.0} pps after the change to 20000"
    );

    // The same change again is a no-op; a bad value is refused with its key.
    let (ok, out, err) = ctl(&addr, &["egress-params", "1", "rate_pps = 20000"]);
    assert!(ok && out.contains("unchanged"), "{out}{err}");
    let (ok, _, err) = ctl(&addr, &["egress-params", "1", "rate_pps = -5"]);
    assert!(!ok && err.contains("InvalidArgument") && err.contains("rate_pps"), "{err}");

    // A stage parameter changes live too, and status shows it.
    let (ok, _, err) = ctl(&addr, &["stage-params", "0", "map = [[0, 0], [1, 0]]"]);
    assert!(ok, "{err}");
    let (ok, out, _) = ctl(&addr, &["status"]);
    assert!(ok && out.contains("generation 2"), "{out}");
    std::thread::sleep(Duration::from_millis(300));
    let stalled = rate(&addr, Duration::from_secs(1));
    assert!(stalled < 500.0, "port 1 still sends {stalled:.0} pps after the map change");

    // SIGTERM (what a service manager sends) drains and prints the summary.
    let _ = Command::new("kill").arg("-TERM").arg(router.0.id().to_string()).status();
    let out = router.0.wait_with_output_ref();
    assert!(out.contains("tx"), "no summary: {out}");
}

trait WaitOutput {
    fn wait_with_output_ref(&mut self) -> String;
}

impl WaitOutput for Child {
    /// Waits for the process and returns what it printed on stdout.
    fn wait_with_output_ref(&mut self) -> String {
        let mut s = String::new();
        if let Some(mut o) = self.stdout.take() {
            let _ = o.read_to_string(&mut s);
        }
        let _ = self.wait();
        s
    }
}
