//! A client of the control API, with the bearer token attached to each call
//! (used by `ctl`, the protocol adapters' subcommands and tests), and how
//! `ctl` prints replies.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};
use tonic::{Request, Status};

use crate::pb;

/// Adds `authorization: Bearer <token>` and the call's deadline
/// (`grpc-timeout`, so that the router gives up too) to every request.
#[derive(Clone, Debug)]
pub struct Bearer {
    token: Option<MetadataValue<Ascii>>,
    timeout: Option<Duration>,
}

impl tonic::service::Interceptor for Bearer {
    fn call(&mut self, mut req: Request<()>) -> Result<Request<()>, Status> {
        if let Some(v) = &self.token {
            req.metadata_mut().insert("authorization", v.clone());
        }
        if let Some(t) = self.timeout {
            req.set_timeout(t);
        }
        Ok(req)
    }
}

/// The transport with the token interceptor.
pub type Authed = InterceptedService<Channel, Bearer>;

/// How long [`Client::connect`] waits for the router to answer, at most.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Default deadline of each call (`ctl --timeout`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The client side of TLS: whom to trust and, for mutual TLS, who we are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsFiles {
    /// PEM CA certificate(s) that signed the router's certificate (`--ca`).
    pub ca: PathBuf,
    /// PEM client certificate chain (`--cert`), for mutual TLS.
    pub cert: Option<PathBuf>,
    /// PEM private key of the client certificate (`--key`).
    pub key: Option<PathBuf>,
    /// The name the router's certificate must carry, if not `--addr`'s host.
    pub server_name: Option<String>,
}

/// How to connect and call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The bearer token.
    pub token: Option<String>,
    /// TLS (`https`); plaintext without it.
    pub tls: Option<TlsFiles>,
    /// Deadline of each call (also bounds connecting, with [`CONNECT_TIMEOUT`]).
    pub timeout: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options { token: None, tls: None, timeout: DEFAULT_TIMEOUT }
    }
}

/// Errors while connecting. Each says what was tried and, through
/// [`ConnectError::check`], what an operator should check.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The address is not a valid URI.
    #[error("bad address `{0}`: expected host:port, http://host:port or https://host:port")]
    Address(String),
    /// The token cannot be sent as metadata.
    #[error("the token is not printable ASCII")]
    Token,
    /// Reading the token file failed.
    #[error("token file `{0}`: {1}")]
    TokenFile(String, std::io::Error),
    /// A TLS file (`--ca`, `--cert`, `--key`) cannot be used.
    #[error("{option} `{path}`: {reason}")]
    TlsFile {
        /// The option naming it.
        option: &'static str,
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// The TLS options do not fit together (or with the address).
    #[error("{0}")]
    TlsOptions(String),
    /// The router's control API could not be reached.
    #[error("cannot reach the router's control API at {addr}: {cause}")]
    Unreachable {
        /// The address as given (`--addr`).
        addr: String,
        /// What went wrong, as far as the transport tells.
        cause: Cause,
    },
}

/// Why a connection to the control API failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Cause {
    /// Nothing listens there (`ECONNREFUSED`).
    #[error("connection refused")]
    Refused,
    /// No answer in time.
    #[error("timed out")]
    TimedOut,
    /// The host name did not resolve.
    #[error("name resolution failed: {0}")]
    Dns(String),
    /// No route to the host or network.
    #[error("no route: {0}")]
    NoRoute(String),
    /// The TLS handshake failed on our side: the router's certificate is
    /// not trusted or not for this name, or the peer does not speak TLS.
    #[error("TLS failed: {0}")]
    Tls(String),
    /// The router ended the TLS connection (with an alert, or right after
    /// the handshake): it wants a client certificate, or refused ours
    /// (unknown CA, expired).
    #[error("the router closed the TLS connection: {0}")]
    TlsRefused(String),
    /// Something answered, but not as a gRPC (HTTP/2) server.
    #[error("the peer does not speak plaintext gRPC: {0}")]
    NotGrpc(String),
    /// A gRPC server answered, but without `grpc.health.v1.Health`: not
    /// the router's control API.
    #[error("a gRPC server answered, but not the router's control API (no grpc.health.v1.Health)")]
    NotRouter,
    /// Anything else (the transport's innermost message).
    #[error("{0}")]
    Other(String),
}

impl Cause {
    /// Classifies a transport error by walking its chain of sources.
    pub fn of(e: &(dyn std::error::Error + 'static)) -> Cause {
        let mut chain = Vec::new();
        let mut cur = Some(e);
        while let Some(err) = cur {
            chain.push(err);
            cur = err.source();
        }
        let innermost = chain.last().map_or_else(String::new, |e| e.to_string());
        for err in chain.iter().rev() {
            if let Some(io) = err.downcast_ref::<std::io::Error>() {
                use std::io::ErrorKind as K;
                match io.kind() {
                    K::ConnectionRefused => return Cause::Refused,
                    K::TimedOut => return Cause::TimedOut,
                    K::HostUnreachable | K::NetworkUnreachable | K::AddrNotAvailable => {
                        return Cause::NoRoute(io.to_string())
                    }
                    K::ConnectionReset
                    | K::ConnectionAborted
                    | K::UnexpectedEof
                    | K::BrokenPipe => return Cause::NotGrpc(io.to_string()),
                    _ => {}
                }
            }
            if err.downcast_ref::<tonic::TimeoutExpired>().is_some() {
                return Cause::TimedOut;
            }
        }
        let all = chain.iter().map(|e| e.to_string().to_ascii_lowercase()).collect::<Vec<_>>();
        let any = |words: &[&str]| all.iter().any(|m| words.iter().any(|w| m.contains(w)));
        if any(&["dns error", "lookup address", "name or service not known", "nodename nor"]) {
            Cause::Dns(innermost)
        } else if any(&["timed out", "deadline has elapsed", "timeout"]) {
            Cause::TimedOut
        } else if any(&["fatal alert"]) {
            Cause::TlsRefused(innermost)
        } else if any(&["tls", "certificate", "https", "corrupt message", "handshake"]) {
            Cause::Tls(innermost)
        } else if any(&[
            "http2",
            "h2 protocol",
            "connection closed",
            "frame",
            "preface",
            // hyper's word for a connection that closed before its first
            // request could go out (e.g. a TLS 1.3 server that refused the
            // client's certificate after the handshake).
            "connection was not ready",
        ]) {
            Cause::NotGrpc(innermost)
        } else {
            Cause::Other(innermost)
        }
    }

    /// What an operator should check.
    pub fn check(&self) -> &'static str {
        match self {
            Cause::Refused => {
                "is the router running, with a [control] section? is --addr its \
                 control.listen address (default 127.0.0.1:50051)?"
            }
            Cause::TimedOut => {
                "is --addr right, and is the host reachable from here (firewall, routing)? \
                 is the router running, with a [control] section?"
            }
            Cause::Dns(_) => "is the host name in --addr right? (an IP address avoids DNS)",
            Cause::NoRoute(_) => "is --addr right, and is its host reachable from here?",
            Cause::Tls(_) => {
                "is --ca the CA that signed the router's certificate (control.tls.cert_chain), \
                 and is --addr's host (or --server-name) a name in that certificate? does the \
                 router serve TLS (control.tls)? without it, drop --ca"
            }
            Cause::TlsRefused(_) => {
                "if the router asks for client certificates (control.tls.client_ca), pass --cert \
                 and --key with a certificate that CA signed and that is valid now; is --addr \
                 the router's control.listen (not its metrics_listen)?"
            }
            Cause::NotGrpc(_) => {
                "is --addr the router's control.listen address (not its metrics_listen, not \
                 another service)? if the router serves TLS (control.tls), pass --ca with the \
                 CA that signed its certificate"
            }
            Cause::NotRouter => {
                "is --addr the router's control.listen address (not its metrics_listen, \
                 not another service)?"
            }
            Cause::Other(_) => {
                "is the router running, with a [control] section? is --addr right \
                 (default 127.0.0.1:50051)?"
            }
        }
    }
}

impl ConnectError {
    /// What an operator should check.
    pub fn check(&self) -> &'static str {
        match self {
            ConnectError::Address(_) => "e.g. --addr 127.0.0.1:50051 (the router's control.listen)",
            ConnectError::TlsFile { .. } => {
                "--ca names the PEM CA certificate that signed the router's certificate; \
                 --cert and --key the PEM client certificate and its key"
            }
            ConnectError::TlsOptions(_) => {
                "TLS needs --ca (https); --cert and --key go together and need --ca"
            }
            ConnectError::Token => "the token file must hold the router's token, printable ASCII",
            ConnectError::TokenFile(..) => {
                "--token-file names the file holding the router's token \
                 (the one its control.token_file names)"
            }
            ConnectError::Unreachable { cause, .. } => cause.check(),
        }
    }
}

/// Prints a connection error for `ctl`: the error and what to check on
/// standard error (a JSON object with `--json`).
pub fn print_connect_error(json: bool, e: &ConnectError) {
    if json {
        let mut v = serde_json::json!({
            "error": { "code": "Unreachable", "message": e.to_string(), "check": e.check() }
        });
        if let ConnectError::Unreachable { addr, cause } = e {
            v["error"]["addr"] = addr.clone().into();
            v["error"]["cause"] = cause.to_string().into();
        }
        eprintln!("{v}");
    } else {
        eprintln!("error: {e}\ncheck: {}", e.check());
    }
}

/// Reads a PEM file for a TLS option, checking that it holds what the
/// option needs (so that a wrong file is named, not a handshake failure).
fn tls_file(option: &'static str, path: &Path) -> Result<Vec<u8>, ConnectError> {
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let err =
        |reason: String| ConnectError::TlsFile { option, path: path.display().to_string(), reason };
    let pem = std::fs::read(path).map_err(|e| err(e.to_string()))?;
    let ok = if option == "--key" {
        PrivateKeyDer::from_pem_slice(&pem).is_ok()
    } else {
        CertificateDer::pem_slice_iter(&pem).next().is_some_and(|c| c.is_ok())
    };
    if !ok {
        let what = if option == "--key" { "a PEM private key" } else { "a PEM certificate" };
        return Err(err(format!("holds no {what}")));
    }
    Ok(pem)
}

/// The client TLS configuration of `t`.
fn client_tls(t: &TlsFiles) -> Result<ClientTlsConfig, ConnectError> {
    let mut c =
        ClientTlsConfig::new().ca_certificate(Certificate::from_pem(tls_file("--ca", &t.ca)?));
    match (&t.cert, &t.key) {
        (Some(cert), Some(key)) => {
            c = c.identity(Identity::from_pem(tls_file("--cert", cert)?, tls_file("--key", key)?));
        }
        (None, None) => {}
        _ => return Err(ConnectError::TlsOptions("--cert and --key go together".into())),
    }
    if let Some(n) = &t.server_name {
        c = c.domain_name(n.clone());
    }
    Ok(c)
}

/// One channel to the router's control API, with its token.
#[derive(Clone, Debug)]
pub struct Client {
    channel: Channel,
    bearer: Bearer,
}

impl Client {
    /// Connects to `addr` (`host:port` or `http://host:port`) with an
    /// optional token, plaintext, with the default call deadline.
    pub async fn connect(addr: &str, token: Option<&str>) -> Result<Client, ConnectError> {
        let opts = Options { token: token.map(str::to_string), ..Options::default() };
        Client::connect_with(addr, &opts).await
    }

    /// Connects to `addr` as `opts` say: `https` (verifying the router's
    /// certificate against `opts.tls.ca`) when TLS is given.
    pub async fn connect_with(addr: &str, opts: &Options) -> Result<Client, ConnectError> {
        let unreachable = |cause| ConnectError::Unreachable { addr: addr.to_string(), cause };
        let scheme = if opts.tls.is_some() { "https" } else { "http" };
        let uri =
            if addr.contains("://") { addr.to_string() } else { format!("{scheme}://{addr}") };
        match (uri.starts_with("https://"), opts.tls.is_some()) {
            (true, false) => {
                return Err(ConnectError::TlsOptions(format!(
                "`{addr}` asks for TLS: pass --ca with the CA that signed the router's certificate"
            )))
            }
            (false, true) => {
                return Err(ConnectError::TlsOptions(format!(
                    "`{addr}` asks for plaintext, but --ca asks for TLS: use host:port or https://"
                )))
            }
            _ => {}
        }
        let token = match &opts.token {
            Some(t) => {
                Some(format!("Bearer {}", t.trim()).parse().map_err(|_| ConnectError::Token)?)
            }
            None => None,
        };
        let bearer = Bearer { token, timeout: Some(opts.timeout) };
        let connect_timeout = opts.timeout.min(CONNECT_TIMEOUT);
        let mut ep = Endpoint::from_shared(uri)
            .map_err(|_| ConnectError::Address(addr.to_string()))?
            .connect_timeout(connect_timeout)
            .timeout(opts.timeout)
            .tcp_nodelay(true);
        if let Some(t) = &opts.tls {
            ep = ep.tls_config(client_tls(t)?).map_err(|e| {
                ConnectError::TlsOptions(format!("TLS settings refused: {}", Cause::of(&e)))
            })?;
        }
        // Connect, then ask health (no token needed) whether this is a gRPC
        // server at all: HTTP/2's handshake does not wait for the peer, so
        // a silent or non-gRPC peer would otherwise show only at the first
        // call (or hang it). Both steps together are bounded.
        let probe = async {
            let channel = ep.connect().await.map_err(|e| Cause::of(&e))?;
            let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
            let req = tonic_health::pb::HealthCheckRequest { service: String::new() };
            match health.check(req).await {
                Ok(_) => Ok(channel),
                Err(s) if s.code() == tonic::Code::Unimplemented => Err(Cause::NotRouter),
                Err(s) if transport_failure(&s) => Err(Cause::of(&s)),
                // Some other gRPC answer: a server is there; let the real
                // call say what it thinks.
                Err(_) => Ok(channel),
            }
        };
        match tokio::time::timeout(connect_timeout, probe).await {
            Ok(Ok(channel)) => Ok(Client { channel, bearer }),
            // Under TLS 1.3 a server that refuses our certificate (or wants
            // one) says so after the handshake looks complete to us: the
            // connection just closes.
            Ok(Err(Cause::NotGrpc(m))) if opts.tls.is_some() => {
                Err(unreachable(Cause::TlsRefused(format!("{m}, right after the TLS handshake"))))
            }
            Ok(Err(cause)) => Err(unreachable(cause)),
            Err(_) => Err(unreachable(Cause::TimedOut)),
        }
    }

    /// Reads the token from `path` and connects.
    pub async fn connect_with_token_file(
        addr: &str,
        path: &std::path::Path,
    ) -> Result<Client, ConnectError> {
        let opts = Options { token: Some(read_token_file(path)?), ..Options::default() };
        Client::connect_with(addr, &opts).await
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

/// The content of a token file (for [`Options::token`]).
pub fn read_token_file(path: &Path) -> Result<String, ConnectError> {
    std::fs::read_to_string(path)
        .map_err(|e| ConnectError::TokenFile(path.display().to_string(), e))
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
        // One line per scope (they arrive grouped): its counters, then its
        // levels after `levels:`.
        let mut rest = &self.named[..];
        while let Some(first) = rest.first() {
            let n = rest.iter().take_while(|m| m.scope == first.scope).count();
            let (group, tail) = rest.split_at(n);
            rest = tail;
            let gauge = |m: &&pb::NamedCounter| m.kind == pb::NamedKind::Gauge as i32;
            s.push_str(&format!("{}:", first.scope));
            for m in group.iter().filter(|m| !gauge(m)) {
                s.push_str(&format!(" {}={}", m.name, m.value));
            }
            if group.iter().any(|m| gauge(&m)) {
                s.push_str(" levels:");
                for m in group.iter().filter(gauge) {
                    s.push_str(&format!(" {}={}", m.name, m.value));
                }
            }
            s.push('\n');
        }
        s
    }
}

/// Whether `s` reports a failure of the transport (connection refused,
/// reset, not HTTP/2...) rather than an answer of a gRPC server.
fn transport_failure(s: &Status) -> bool {
    use tonic::Code;
    std::error::Error::source(s).is_some()
        || matches!(s.code(), Code::Unavailable | Code::Internal | Code::Unknown | Code::Cancelled)
}

/// What to check after an error status the router (or the transport)
/// answered, when there is more to say than its message.
pub fn status_check(s: &Status) -> Option<&'static str> {
    match s.code() {
        tonic::Code::Unauthenticated if s.message().starts_with("missing") => Some(
            "the router requires a token: pass --token-file with the file its \
             control.token_file names",
        ),
        tonic::Code::Unauthenticated => Some(
            "the token was refused: check --token-file (it must hold the token of the \
             router's control.token_file)",
        ),
        tonic::Code::PermissionDenied if s.message().contains("may only read") => Some(
            "this credential is read-only: changes need the admin token (the router's \
             control.token_file) or an admin client certificate",
        ),
        tonic::Code::Cancelled if s.message().to_ascii_lowercase().contains("timeout") => Some(
            "no answer within --timeout: is the router overloaded, or the change waiting for \
             its workers? a longer --timeout may help",
        ),
        // The transport failed mid-call (the router went away).
        tonic::Code::Unavailable | tonic::Code::Unknown
            if std::error::Error::source(s).is_some() =>
        {
            Some("the connection to the router broke: is it still running?")
        }
        _ => None,
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
            let check = status_check(&s);
            if json {
                let mut v = serde_json::json!({
                    "error": { "code": format!("{:?}", s.code()), "message": s.message() }
                });
                if let Some(c) = check {
                    v["error"]["check"] = c.into();
                }
                eprintln!("{v}");
            } else {
                eprintln!("error: {:?}: {}", s.code(), s.message());
                if let Some(c) = check {
                    eprintln!("check: {c}");
                }
            }
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("{0}")]
    struct Msg(&'static str);

    #[test]
    fn a_connection_closed_before_its_first_request_is_not_grpc() {
        // Under TLS `connect_with` reports this as the peer refusing the
        // client's certificate.
        let c = Cause::of(&Msg("connection was not ready"));
        assert!(matches!(c, Cause::NotGrpc(_)), "{c:?}");
        assert!(matches!(Cause::of(&Msg("something else")), Cause::Other(_)));
    }
}
