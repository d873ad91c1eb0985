//! `ctl`: command-line client of the router's control API.
//!
//! ```text
//! ctl --addr 127.0.0.1:50051 --token-file /etc/router/control.token status
//! ctl counters --json
//! ctl zlane set-rate --ia 1-ff00:0:110 --bps 100000000
//! ctl zlane set-bounds 1 --r 0.5 --n 0.1 --g 0.2 --a 0.15 --u 0.05 --capacity-bps 10000000000
//! ctl --addr router.example:50051 --ca ca.crt --cert ops.crt --key ops.key status
//! CTL_ADDR=router.example:50051 CTL_CA=ca.crt CTL_TOKEN_FILE=read.token ctl counters
//! ```
//! With `--ca` (or an `https://` address) `ctl` speaks TLS and verifies the
//! router's certificate against that CA; `--cert` and `--key` present a
//! client certificate (mutual TLS). Every option that names a file or the
//! address can come from the environment: `CTL_ADDR`, `CTL_TOKEN_FILE`,
//! `CTL_CA`, `CTL_CERT`, `CTL_KEY`. Each call has a deadline (`--timeout`,
//! 10 s by default) that the router honours too.
//! Exit status: 0 on success, 1 if the router cannot be reached (the
//! address, the cause — connection refused, timed out, name resolution,
//! TLS — and what to check are printed), 2 if it refused the request (the
//! gRPC code and message are printed, and for a refused token what to check).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use control::client::{print, print_connect_error, read_token_file, Client, Options, TlsFiles};
use control::pb;

#[derive(Parser)]
#[command(name = "ctl", version, about = "Control a running router over its gRPC API")]
struct Cli {
    /// Control API address (the router's `control.listen`): host:port,
    /// http://host:port, or https://host:port (with --ca).
    #[arg(long, global = true, env = "CTL_ADDR", default_value = "127.0.0.1:50051")]
    addr: String,
    /// File holding the bearer token (the router's `control.token_file`,
    /// or its `control.read_token_file` for read-only use).
    #[arg(long, global = true, env = "CTL_TOKEN_FILE")]
    token_file: Option<PathBuf>,
    /// PEM CA certificate that signed the router's certificate: speak TLS
    /// and verify the router against it.
    #[arg(long, global = true, env = "CTL_CA")]
    ca: Option<PathBuf>,
    /// PEM client certificate (mutual TLS; needs --ca and --key).
    #[arg(long, global = true, env = "CTL_CERT", requires_all = ["ca", "key"])]
    cert: Option<PathBuf>,
    /// PEM private key of --cert.
    #[arg(long, global = true, env = "CTL_KEY", requires_all = ["ca", "cert"])]
    key: Option<PathBuf>,
    /// The name the router's certificate must carry, when --addr's host is
    /// not one of its names (e.g. an IP address).
    #[arg(long, global = true, requires = "ca")]
    server_name: Option<String>,
    /// Deadline of each call, in seconds (e.g. 10, 2.5) or with a unit
    /// (500ms, 30s).
    #[arg(long, global = true, default_value = "10", value_parser = parse_timeout)]
    timeout: Duration,
    /// Print replies as JSON.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Backend, workers, pipeline, ports and configuration generation.
    Status,
    /// Counters of stages, ports and traffic groups.
    Counters,
    /// Replace keys of a stage's parameters (TOML), on every worker.
    StageParams {
        /// Pipeline index.
        index: u32,
        /// TOML, e.g. 'port = 2'.
        toml: String,
        /// The index is in the slow path's pipeline (`[[slow_path.pipeline]]`).
        #[arg(long)]
        slow_path: bool,
    },
    /// Replace keys of a port's egress parameters (TOML), on every worker.
    EgressParams {
        /// Port id.
        port: u32,
        /// TOML, e.g. 'rate_pps = 1000'.
        toml: String,
    },
    /// Z-Lane rates, bounds and gateway host rates.
    #[command(subcommand)]
    Zlane(adapters::zlane::cli::Cmd),
    /// SIBRA reservations and link splits.
    #[command(subcommand)]
    Sibra(adapters::sibra::cli::Cmd),
    /// FlowPolice parameters and table statistics.
    #[command(subcommand)]
    Flowpolice(adapters::flowpolice::cli::Cmd),
    /// FAIR keys, channels, policies and protests.
    #[command(subcommand)]
    Fair(adapters::fair::cli::Cmd),
    /// DRKey epochs.
    #[command(subcommand)]
    Drkey(adapters::zlane::drkey_cli::Cmd),
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let client = async {
        let token = cli.token_file.as_deref().map(read_token_file).transpose()?;
        let tls = cli.ca.clone().map(|ca| TlsFiles {
            ca,
            cert: cli.cert.clone(),
            key: cli.key.clone(),
            server_name: cli.server_name.clone(),
        });
        Client::connect_with(&cli.addr, &Options { token, tls, timeout: cli.timeout }).await
    };
    let c = match client.await {
        Ok(c) => c,
        Err(e) => {
            print_connect_error(cli.json, &e);
            return ExitCode::from(1);
        }
    };
    let j = cli.json;
    match cli.cmd {
        Cmd::Status => print(j, c.router().get_status(pb::GetStatusRequest {}).await),
        Cmd::Counters => print(j, c.router().get_counters(pb::GetCountersRequest {}).await),
        Cmd::StageParams { index, toml, slow_path } => print(
            j,
            c.router()
                .set_stage_params(pb::SetStageParamsRequest { index, params_toml: toml, slow_path })
                .await,
        ),
        Cmd::EgressParams { port, toml } => print(
            j,
            c.router()
                .set_egress_params(pb::SetEgressParamsRequest { port, params_toml: toml })
                .await,
        ),
        Cmd::Zlane(z) => adapters::zlane::cli::run(z, &c, j).await,
        Cmd::Sibra(s) => adapters::sibra::cli::run(s, &c, j).await,
        Cmd::Flowpolice(f) => adapters::flowpolice::cli::run(f, &c, j).await,
        Cmd::Fair(f) => adapters::fair::cli::run(f, &c, j).await,
        Cmd::Drkey(d) => adapters::zlane::drkey_cli::run(d, &c, j).await,
    }
}

/// `--timeout`: seconds (`10`, `2.5`) or a number with `ms` or `s`;
/// more than zero, at most a day.
fn parse_timeout(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else {
        (t, 1.0)
    };
    let v: f64 =
        num.trim().parse().map_err(|_| format!("`{s}` is not a duration (e.g. 10, 2.5, 500ms)"))?;
    let secs = v * scale;
    if !(secs.is_finite() && secs > 0.0 && secs <= 86_400.0) {
        return Err(format!("`{s}`: must be more than 0 and at most 86400 s"));
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn set_rate_needs_exactly_one_origin_and_rate() {
        let p = |a: &[&str]| Cli::try_parse_from(a).map(|_| ());
        assert!(p(&["ctl", "zlane", "set-rate", "--ia", "1-10", "--bps", "5"]).is_ok());
        assert!(p(&["ctl", "zlane", "set-rate", "--isd", "2", "--percent-of-g", "5"]).is_ok());
        assert!(p(&["ctl", "zlane", "set-rate", "--bps", "5"]).is_err());
        assert!(
            p(&["ctl", "zlane", "set-rate", "--ia", "1-10", "--isd", "2", "--bps", "5"]).is_err()
        );
        assert!(p(&["ctl", "zlane", "set-rate", "--ia", "1-10"]).is_err());
        assert!(p(&[
            "ctl",
            "zlane",
            "set-rate",
            "--ia",
            "1-10",
            "--bps",
            "5",
            "--percent-of-g",
            "1"
        ])
        .is_err());
    }

    #[test]
    fn timeouts_and_tls_options() {
        assert_eq!(parse_timeout("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_timeout("2.5s"), Ok(Duration::from_millis(2500)));
        assert_eq!(parse_timeout("500ms"), Ok(Duration::from_millis(500)));
        assert!(parse_timeout("0").is_err());
        assert!(parse_timeout("nan").is_err());
        assert!(parse_timeout("-1").is_err());
        assert!(parse_timeout("1e300").is_err());
        assert!(parse_timeout("soon").is_err());
        let p = |a: &[&str]| Cli::try_parse_from(a).map(|_| ());
        assert!(p(&["ctl", "--ca", "ca.pem", "status"]).is_ok());
        assert!(p(&["ctl", "--ca", "c", "--cert", "a", "--key", "b", "status"]).is_ok());
        assert!(p(&["ctl", "--cert", "a", "--key", "b", "status"]).is_err());
        assert!(p(&["ctl", "--ca", "c", "--cert", "a", "status"]).is_err());
        assert!(p(&["ctl", "--server-name", "x", "status"]).is_err());
        assert!(p(&["ctl", "--timeout", "0", "status"]).is_err());
    }

    #[test]
    fn submit_protest_takes_a_file_or_hex() {
        let p = |a: &[&str]| Cli::try_parse_from(a).map(|_| ());
        assert!(p(&["ctl", "fair", "submit-protest", "--file", "x"]).is_ok());
        assert!(p(&["ctl", "fair", "protest", "--hex", "00"]).is_ok());
        assert!(p(&["ctl", "fair", "submit-protest"]).is_err());
        assert!(p(&["ctl", "fair", "submit-protest", "--file", "x", "--hex", "00"]).is_err());
        assert!(p(&["ctl", "fair", "verdicts", "--limit", "3"]).is_ok());
    }
}
