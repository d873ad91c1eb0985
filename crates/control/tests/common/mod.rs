//! Harness of the control crate's integration tests: a router with the
//! runtime's generic stages (no protocol services) and its control server.

// Each test file uses a different subset of the harness.
#![allow(dead_code)]

pub mod pki;

use std::path::PathBuf;
use std::sync::Arc;

use control::client::{Client, Options, TlsFiles};

/// The admin token.
pub const ADMIN: &str = "admin-test-token-0123456789abcdef";
/// The read-only token.
pub const READ: &str = "read-test-token-0123456789abcdef";

/// A fresh scratch directory for test `name` with `admin.token` and `read.token`.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("control-it-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("admin.token"), format!("{ADMIN}\n")).unwrap();
    std::fs::write(dir.join("read.token"), format!("{READ}\n")).unwrap();
    dir
}

/// A running router and its control server.
pub struct Env {
    /// The router's control plane.
    pub plane: Arc<control::Plane>,
    /// The control server (`None` once shut down).
    pub server: Option<control::ServerHandle>,
    /// `127.0.0.1:port` of gRPC.
    pub addr: String,
    /// The scratch directory.
    pub dir: PathBuf,
}

impl Drop for Env {
    fn drop(&mut self) {
        self.plane.stop();
    }
}

/// A router forwarding synthetic traffic from port 0 to port 1, with its
/// control server: admin and read tokens, metrics off; `customize` adjusts
/// the control configuration.
pub fn start(dir: PathBuf, customize: impl FnOnce(&mut control::ControlConfig)) -> Env {
    let text = r#"
        [io]
        backend = "synthetic"
        [io.synthetic]
        pacing = "wall"
        traffic = [{ name = "web", port = 0, rate_pps = 1000, template = "ipv4-udp" }]
        [workers]
        pin = false
        [[ports]]
        id = 0
        [[ports]]
        id = 1
        egress = { kind = "fifo", capacity = 256 }
        [[pipeline]]
        kind = "port-forward"
        port = 1
    "#;
    let cfg = runtime::config::parse(text, "control-it.toml".as_ref()).unwrap();
    let plane = control::Plane::new(runtime::start::<()>(cfg.clone()).unwrap(), cfg);
    let mut ccfg = control::ControlConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        metrics_listen: None,
        token_file: Some(dir.join("admin.token")),
        read_token_file: Some(dir.join("read.token")),
        audit_log: Some(dir.join("audit.jsonl")),
        ..Default::default()
    };
    customize(&mut ccfg);
    let server = control::serve::<()>(plane.clone(), &ccfg).expect("control server starts");
    Env { addr: server.grpc_addr.to_string(), plane, server: Some(server), dir }
}

/// A plaintext client with `token`.
pub async fn client(env: &Env, token: Option<&str>) -> Client {
    Client::connect(&env.addr, token).await.expect("connects")
}

/// A TLS client trusting `ca`, with an optional client certificate and token.
pub async fn tls_client(
    env: &Env,
    ca: &std::path::Path,
    cert: Option<(PathBuf, PathBuf)>,
    token: Option<&str>,
) -> Result<Client, control::client::ConnectError> {
    let (cert, key) = match cert {
        Some((c, k)) => (Some(c), Some(k)),
        None => (None, None),
    };
    let opts = Options {
        token: token.map(str::to_string),
        tls: Some(TlsFiles { ca: ca.to_path_buf(), cert, key, server_name: None }),
        ..Options::default()
    };
    Client::connect_with(&env.addr, &opts).await
}

/// The audit lines written so far.
pub fn audit_lines(env: &Env) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(env.dir.join("audit.jsonl")).unwrap_or_default();
    text.lines().map(|l| serde_json::from_str(l).expect("audit line is JSON")).collect()
}

/// Sets `capacity` of port 1's egress queue (a mutating call).
pub async fn set_capacity(
    c: &Client,
    capacity: u32,
) -> Result<control::pb::ApplyReply, tonic::Status> {
    c.router()
        .set_egress_params(control::pb::SetEgressParamsRequest {
            port: 1,
            params_toml: format!("capacity = {capacity}"),
        })
        .await
        .map(|r| r.into_inner())
}

/// The router's configuration generation, as a caller sees it.
pub async fn generation(c: &Client) -> u64 {
    c.router().get_status(control::pb::GetStatusRequest {}).await.unwrap().into_inner().generation
}
