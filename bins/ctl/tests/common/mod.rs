//! Harness shared by the `ctl` integration tests: a router on the synthetic
//! backend with the control server in-process (bearer token, loopback), and
//! the real `ctl` binary run against it.

// Each test file uses a different subset of the harness.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use adapters::pb;

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
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ctl"));
    cmd.arg("--addr").arg(addr);
    if let Some(f) = token_file {
        cmd.arg("--token-file").arg(f);
    }
    let out = cmd.args(args).output().expect("ctl runs");
    (
        out.status.success(),
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
