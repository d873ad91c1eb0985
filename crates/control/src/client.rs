//! A client of the control API, with the bearer token attached to each call
//! (used by `ctl`, the protocol adapters' subcommands and tests), and how
//! `ctl` prints replies.

use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Status};

use crate::pb;

/// Adds `authorization: Bearer <token>` to every request.
#[derive(Clone, Debug)]
pub struct Bearer(Option<MetadataValue<Ascii>>);

impl tonic::service::Interceptor for Bearer {
    fn call(&mut self, mut req: Request<()>) -> Result<Request<()>, Status> {
        if let Some(v) = &self.0 {
            req.metadata_mut().insert("authorization", v.clone());
        }
        Ok(req)
    }
}

/// The transport with the token interceptor.
pub type Authed = InterceptedService<Channel, Bearer>;

/// Errors while connecting.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The address is not a valid URI.
    #[error("bad address `{0}`")]
    Address(String),
    /// The token cannot be sent as metadata.
    #[error("the token is not printable ASCII")]
    Token,
    /// Reading the token file failed.
    #[error("token file `{0}`: {1}")]
    TokenFile(String, std::io::Error),
    /// Connecting failed.
    #[error("connecting to {0}: {1}")]
    Transport(String, tonic::transport::Error),
}

/// One channel to the router's control API, with its token.
#[derive(Clone, Debug)]
pub struct Client {
    channel: Channel,
    bearer: Bearer,
}

impl Client {
    /// Connects to `addr` (`host:port` or `http://host:port`) with an optional token.
    pub async fn connect(addr: &str, token: Option<&str>) -> Result<Client, ConnectError> {
        let uri = if addr.contains("://") { addr.to_string() } else { format!("http://{addr}") };
        let ep = Endpoint::from_shared(uri.clone())
            .map_err(|_| ConnectError::Address(addr.to_string()))?
            .connect_timeout(std::time::Duration::from_secs(5))
            .tcp_nodelay(true);
        let channel = ep.connect().await.map_err(|e| ConnectError::Transport(uri, e))?;
        let bearer = match token {
            Some(t) => Bearer(Some(
                format!("Bearer {}", t.trim()).parse().map_err(|_| ConnectError::Token)?,
            )),
            None => Bearer(None),
        };
        Ok(Client { channel, bearer })
    }

    /// Reads the token from `path` and connects.
    pub async fn connect_with_token_file(
        addr: &str,
        path: &std::path::Path,
    ) -> Result<Client, ConnectError> {
        let t = std::fs::read_to_string(path)
            .map_err(|e| ConnectError::TokenFile(path.display().to_string(), e))?;
        Client::connect(addr, Some(&t)).await
    }

    /// The channel with the token attached, for a protocol's generated
    /// client (e.g. `SibraControlClient::new(client.authed())`).
    pub fn authed(&self) -> Authed {
        InterceptedService::new(self.channel.clone(), self.bearer.clone())
    }

    /// `RouterControl`.
    pub fn router(&self) -> pb::router_control_client::RouterControlClient<Authed> {
        pb::router_control_client::RouterControlClient::new(self.authed())
    }
}

/// How `ctl` shows a reply on a terminal (the default is the debug form);
/// `--json` prints the message's serde form instead.
pub trait Show: serde::Serialize + std::fmt::Debug {
    /// The reply for a person.
    fn human(&self) -> String {
        format!("{self:#?}")
    }
}

/// One line per item, or `none` when there is none: the `human` form of a
/// list reply.
pub fn lines<T>(items: &[T], line: impl Fn(&T) -> String, none: &str) -> String {
    if items.is_empty() {
        return format!("{none}\n");
    }
    items.iter().map(|i| line(i) + "\n").collect()
}

impl Show for pb::ApplyReply {
    fn human(&self) -> String {
        format!(
            "applied on {} workers (generation {}): {}",
            self.workers, self.generation, self.detail
        )
    }
}

impl Show for pb::RouterStatus {
    fn human(&self) -> String {
        let mut s = format!(
            "router {} backend {} workers {} generation {}{}\npipeline:\n",
            self.router_name,
            self.backend,
            self.workers,
            self.generation,
            if self.all_done { " (stopped)" } else { "" }
        );
        for st in &self.stages {
            s.push_str(&format!(
                "  [{}] {} {}\n",
                st.index,
                st.kind,
                st.params_toml.replace('\n', " ").trim()
            ));
        }
        s.push_str("ports:\n");
        for p in &self.ports {
            s.push_str(&format!(
                "  {} {} egress {} {}\n",
                p.id,
                p.name,
                p.egress_kind,
                p.egress_params_toml.replace('\n', " ").trim()
            ));
        }
        s
    }
}

fn drops(d: &[pb::DropCount]) -> String {
    d.iter().map(|d| format!(" {}={}", d.reason, d.packets)).collect()
}

impl Show for pb::Counters {
    fn human(&self) -> String {
        let mut s = format!(
            "rx {} tx {} to-control {} bursts {} elapsed {:.3} s{}\n",
            self.rx,
            self.tx,
            self.to_control,
            self.bursts,
            self.elapsed_ns as f64 / 1e9,
            if self.all_done { " (stopped)" } else { "" }
        );
        for (i, st) in self.stages.iter().enumerate() {
            s.push_str(&format!(
                "stage [{i}] {:<16} packets {} to-control {}{}\n",
                st.name,
                st.packets,
                st.to_control,
                drops(&st.drops)
            ));
        }
        for p in &self.ports {
            s.push_str(&format!(
                "port {:<3} rx {} tx {} tx-bytes {} queued {}{}\n",
                p.id,
                p.rx,
                p.tx,
                p.tx_bytes,
                p.queued,
                drops(&p.drops)
            ));
        }
        for g in &self.groups {
            s.push_str(&format!(
                "group {:<16} offered {} delivered {}\n",
                g.name, g.offered, g.delivered
            ));
        }
        let mut scope = "";
        for n in &self.named {
            if n.scope != scope {
                scope = &n.scope;
                s.push_str(&format!("{scope}:"));
            }
            s.push_str(&format!(" {}={}", n.name, n.value));
            if self.named.iter().rfind(|m| m.scope == n.scope).is_some_and(|m| std::ptr::eq(m, n)) {
                s.push('\n');
            }
        }
        s
    }
}

/// Prints a reply (human or JSON) or the error; returns `ctl`'s exit status:
/// 0 on success, 2 if the router refused the request. A closed standard
/// output (`ctl ... | head -1`) ends the output quietly, as Unix tools do.
pub fn print<T: Show>(
    json: bool,
    r: Result<tonic::Response<T>, tonic::Status>,
) -> std::process::ExitCode {
    use std::io::Write;
    use std::process::ExitCode;
    match r {
        Ok(r) => {
            let m = r.into_inner();
            let text = if json {
                match serde_json::to_string_pretty(&m) {
                    Ok(s) => s,
                    Err(e) => {
                        eprintln!("error: encoding JSON: {e}");
                        return ExitCode::from(2);
                    }
                }
            } else {
                m.human().trim_end().to_string()
            };
            let mut out = std::io::stdout().lock();
            match writeln!(out, "{text}").and_then(|()| out.flush()) {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                    eprintln!("error: writing the reply: {e}");
                    ExitCode::from(1)
                }
                _ => ExitCode::SUCCESS,
            }
        }
        Err(s) => {
            if json {
                let v = serde_json::json!({
                    "error": { "code": format!("{:?}", s.code()), "message": s.message() }
                });
                eprintln!("{v}");
            } else {
                eprintln!("error: {:?}: {}", s.code(), s.message());
            }
            ExitCode::from(2)
        }
    }
}
