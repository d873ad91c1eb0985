//! `ctl`: command-line client of the router's control API.
//!
//! ```text
//! ctl --addr 127.0.0.1:50051 --token-file /etc/router/control.token status
//! ctl counters --json
//! ctl zlane set-rate --ia 1-ff00:0:110 --bps 100000000
//! ctl zlane set-bounds 1 --r 0.5 --n 0.1 --g 0.2 --a 0.15 --u 0.05 --capacity-bps 10000000000
//! ```
//! Exit status: 0 on success, 1 if the router cannot be reached, 2 if it
//! refused the request (the gRPC code and message are printed).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use control::client::{print, Client};
use control::pb;

#[derive(Parser)]
#[command(name = "ctl", version, about = "Control a running router over its gRPC API")]
struct Cli {
    /// Control API address.
    #[arg(long, global = true, default_value = "127.0.0.1:50051")]
    addr: String,
    /// File holding the bearer token.
    #[arg(long, global = true)]
    token_file: Option<PathBuf>,
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
    let client = match &cli.token_file {
        Some(f) => Client::connect_with_token_file(&cli.addr, f).await,
        None => Client::connect(&cli.addr, None).await,
    };
    let c = match client {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    let j = cli.json;
    match cli.cmd {
        Cmd::Status => print(j, c.router().get_status(pb::GetStatusRequest {}).await),
        Cmd::Counters => print(j, c.router().get_counters(pb::GetCountersRequest {}).await),
        Cmd::StageParams { index, toml } => print(
            j,
            c.router()
                .set_stage_params(pb::SetStageParamsRequest { index, params_toml: toml })
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
    fn submit_protest_takes_a_file_or_hex() {
        let p = |a: &[&str]| Cli::try_parse_from(a).map(|_| ());
        assert!(p(&["ctl", "fair", "submit-protest", "--file", "x"]).is_ok());
        assert!(p(&["ctl", "fair", "protest", "--hex", "00"]).is_ok());
        assert!(p(&["ctl", "fair", "submit-protest"]).is_err());
        assert!(p(&["ctl", "fair", "submit-protest", "--file", "x", "--hex", "00"]).is_err());
        assert!(p(&["ctl", "fair", "verdicts", "--limit", "3"]).is_ok());
    }
}
