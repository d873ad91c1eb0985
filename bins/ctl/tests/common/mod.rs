//! Harness shared by the `ctl` integration tests: a router on the synthetic
//! backend with the control server in-process (bearer token, loopback), and
//! the real `ctl` binary run against it.

// Each test file uses a different subset of the harness.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use adapters::pb;
use control::client::Client;

/// The bearer token every test router accepts.
pub const TOKEN: &str = "ctl-test-token-0123456789abcdef";

/// A running router with its control server; stopped when dropped.
pub struct Env {
    /// The control server (kept alive for the test's duration).
    pub server: control::ServerHandle,
    /// The router's control plane.
    pub plane: Arc<control::Plane>,
    /// gRPC address (`127.0.0.1:port`).
    pub addr: String,
    /// File holding [`TOKEN`] (with a trailing newline, which must be trimmed).
    pub token_file: PathBuf,
    /// The test's scratch directory.
    pub dir: PathBuf,
    /// The Prometheus endpoint, when the test asked for one.
    pub metrics: Option<SocketAddr>,
}

impl Env {
    /// A client of the router's control API with [`TOKEN`].
    pub async fn client(&self) -> Client {
        Client::connect(&self.addr, Some(TOKEN)).await.unwrap()
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        self.plane.stop();
    }
}

/// A fresh scratch directory for test `name`, holding the token file.
pub fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ctl-test-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("token"), format!("{TOKEN}\n")).unwrap();
    dir
}

/// Parses a router configuration given inline.
pub fn config(name: &str, toml: &str) -> runtime::RouterConfig {
    runtime::config::parse(toml, format!("{name}.toml").as_ref()).expect("test configuration")
}

/// The example configuration `file` of `config/`, unpinned, running until
/// stopped.
pub fn example(file: &str) -> runtime::RouterConfig {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config").join(file);
    let mut cfg = runtime::config::load_file(&path).expect("example config");
    cfg.workers.pin = false;
    cfg.run.duration_ms = None;
    cfg
}

/// Starts `cfg` with a control server in `dir` (from [`scratch_dir`]);
/// `customize` adjusts the control configuration (metrics, FAIR verifier).
pub fn start_in(
    dir: PathBuf,
    cfg: runtime::RouterConfig,
    customize: impl FnOnce(&mut control::ControlConfig),
) -> Env {
    let token_file = dir.join("token");
    let plane = control::Plane::new(
        runtime::start::<adapters::All>(cfg.clone()).expect("router starts"),
        cfg,
    );
    let mut ccfg = control::ControlConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        metrics_listen: None,
        token_file: Some(token_file.clone()),
        // Tests change things back to back; the rate limit has its own tests.
        mutations_per_second: 0,
        audit_log: Some(dir.join("audit.jsonl")),
        ..Default::default()
    };
    customize(&mut ccfg);
    let server =
        control::serve::<adapters::All>(plane.clone(), &ccfg).expect("control server starts");
    Env {
        addr: server.grpc_addr.to_string(),
        metrics: server.metrics_addr,
        server,
        plane,
        token_file,
        dir,
    }
}

/// Starts the inline configuration `toml` with default control settings.
pub fn start(name: &str, toml: &str) -> Env {
    start_in(scratch_dir(name), config(name, toml), |_| {})
}

/// Runs `ctl` against `env` with its token: (success, stdout, stderr).
pub fn ctl(env: &Env, args: &[&str]) -> (bool, String, String) {
    ctl_with_token(&env.addr, Some(&env.token_file), args)
}

/// Runs `ctl` against `addr`, with or without a token file.
pub fn ctl_with_token(
    addr: &str,
    token_file: Option<&Path>,
    args: &[&str],
) -> (bool, String, String) {
    let mut full = vec!["--addr", addr];
    let file = token_file.map(|f| f.to_str().expect("UTF-8 path"));
    if let Some(f) = file {
        full.extend(["--token-file", f]);
    }
    full.extend(args);
    let (code, out, err) = ctl_raw(&full, &[]);
    (code == Some(0), out, err)
}

/// Runs `ctl` with exactly `args` and the environment variables `env`
/// (none of the caller's `CTL_*`): (exit code, stdout, stderr).
pub fn ctl_raw(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ctl"));
    for v in ["CTL_ADDR", "CTL_TOKEN_FILE", "CTL_CA", "CTL_CERT", "CTL_KEY"] {
        cmd.env_remove(v);
    }
    cmd.envs(env.iter().copied());
    let out = cmd.args(args).output().expect("ctl runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

/// Every drop the router counted, in stages and at ports.
pub fn total_drops(c: &pb::Counters) -> u64 {
    c.stages.iter().flat_map(|s| s.drops.iter()).map(|d| d.packets).sum::<u64>()
        + c.ports.iter().flat_map(|p| p.drops.iter()).map(|d| d.packets).sum::<u64>()
}

/// Wall-clock Unix seconds.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
}

/// A router on the synthetic backend, paced by the wall clock: `traffic`
/// (TOML under `[io.synthetic]`: a `traffic = [...]` line or
/// `[[io.synthetic.traffic]]` tables), `workers` unpinned workers, and
/// ports 0 and 1 (`port1` adds keys to port 1, such as its `egress`). The
/// pipeline (`[[pipeline]]` tables) goes after it.
pub fn wall_clock(traffic: &str, workers: usize, port1: &str) -> String {
    format!(
        r#"
        [io]
        backend = "synthetic"
        [io.synthetic]
        pacing = "wall"
        {traffic}
        [workers]
        count = {workers}
        pin = false
        [[ports]]
        id = 0
        [[ports]]
        id = 1
        {port1}
        "#
    )
}

/// [`wall_clock`] with the pipeline `parse`, then `stages`, then
/// `port-forward` to port 1.
pub fn forwarding(traffic: &str, workers: usize, port1: &str, stages: &str) -> String {
    let head = wall_clock(traffic, workers, port1);
    format!(
        r#"{head}
        [[pipeline]]
        kind = "parse"
        {stages}
        [[pipeline]]
        kind = "port-forward"
        port = 1
        "#
    )
}

/// The DRKey secret value the EPIC-Z traffic of [`epic_z_traffic`] is
/// authenticated with (hex).
pub const EPIC_SV: &str = "f0e0d0c0b0a090807060504030201000";

/// A traffic group of 5000 packets/s of 200-byte EPIC-Z frames from AS
/// 1-ff00:0:111 into port 0, authenticated under [`EPIC_SV`]; `extra` adds
/// keys (its name, flows, …).
pub fn epic_z_traffic(extra: &str) -> String {
    format!(
        r#"
        [[io.synthetic.traffic]]
        port = 0
        rate_pps = 5000
        template = "epic-z"
        src_ia = "1-ff00:0:111"
        fwd_key = "000102030405060708090a0b0c0d0e0f"
        sv = "{EPIC_SV}"
        size = 200
        {extra}
        "#
    )
}

/// A `zlane-classify` stage of AS 1-ff00:0:110 with secret value `sv`
/// (hex), valid for all of the tests' time; `extra` adds keys.
pub fn zlane_classify(sv: &str, extra: &str) -> String {
    format!(
        r#"
        [[pipeline]]
        kind = "zlane-classify"
        local_ia = "1-ff00:0:110"
        sv = "{sv}"
        epoch = [0, 4000000000]
        {extra}
        "#
    )
}

/// The router's counters.
pub async fn counters(c: &Client) -> pb::Counters {
    c.router().get_counters(pb::GetCountersRequest {}).await.unwrap().into_inner()
}

/// The counters before and after `window`, and the seconds between the
/// two reads.
pub async fn counters_over(c: &Client, window: Duration) -> (pb::Counters, pb::Counters, f64) {
    let a = counters(c).await;
    let t = Instant::now();
    tokio::time::sleep(window).await;
    let b = counters(c).await;
    (a, b, t.elapsed().as_secs_f64())
}

/// The router's status.
pub async fn status(c: &Client) -> pb::RouterStatus {
    c.router().get_status(pb::GetStatusRequest {}).await.unwrap().into_inner()
}

/// The sum of the named counters `name` of the scopes starting with
/// `scope_prefix` (`"stage 1"`, `"egress port 1"`).
pub fn named(c: &pb::Counters, scope_prefix: &str, name: &str) -> u64 {
    c.named
        .iter()
        .filter(|n| n.scope.starts_with(scope_prefix) && n.name == name)
        .map(|n| n.value)
        .sum()
}
