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

use clap::{Args, Parser, Subcommand};
use control::client::Client;
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
    Zlane(Zlane),
    /// SIBRA reservations and link splits.
    #[command(subcommand)]
    Sibra(Sibra),
    /// FlowPolice parameters and table statistics.
    #[command(subcommand)]
    Flowpolice(FlowPolice),
    /// FAIR keys, channels, policies and protests.
    #[command(subcommand)]
    Fair(Fair),
    /// DRKey epochs.
    #[command(subcommand)]
    Drkey(Drkey),
}

#[derive(Args)]
#[group(required = true, multiple = false)]
struct OriginArgs {
    /// An AS of the local ISD, e.g. 1-ff00:0:110.
    #[arg(long)]
    ia: Option<String>,
    /// A whole ISD.
    #[arg(long)]
    isd: Option<u32>,
}

impl OriginArgs {
    fn to_pb(&self) -> pb::Origin {
        pb::Origin {
            who: match (&self.ia, self.isd) {
                (Some(ia), _) => Some(pb::origin::Who::Ia(ia.clone())),
                (None, Some(i)) => Some(pb::origin::Who::Isd(i)),
                (None, None) => None,
            },
        }
    }
}

#[derive(Subcommand)]
enum Zlane {
    /// List configured per-AS/per-ISD rates.
    Rates,
    /// Set the guaranteed rate of an AS or ISD.
    SetRate {
        #[command(flatten)]
        origin: OriginArgs,
        /// Rate in bit/s.
        #[arg(long, conflicts_with = "percent_of_g", required_unless_present = "percent_of_g")]
        bps: Option<u64>,
        /// Rate in percent of μ_G × capacity.
        #[arg(long)]
        percent_of_g: Option<f64>,
    },
    /// Remove the explicit rate of an AS or ISD.
    RemoveRate {
        #[command(flatten)]
        origin: OriginArgs,
    },
    /// Show the scheduler bounds of a zlane egress port.
    Bounds {
        /// Port id.
        port: u32,
    },
    /// Set the scheduler bounds (fractions of capacity) of a zlane egress port.
    SetBounds {
        /// Port id.
        port: u32,
        #[arg(long)]
        r: f64,
        #[arg(long)]
        n: f64,
        #[arg(long)]
        g: f64,
        #[arg(long)]
        a: f64,
        #[arg(long)]
        u: f64,
        /// New egress capacity in bit/s (0 keeps it).
        #[arg(long, default_value_t = 0)]
        capacity_bps: u64,
    },
    /// Set the gateway rate of a host prefix.
    GatewayHostRate {
        /// Prefix, e.g. 10.0.0.0/24.
        prefix: String,
        /// Rate in bit/s.
        bps: u64,
    },
}

#[derive(Args)]
struct AdmitArgs {
    /// Source ISD-AS.
    #[arg(long)]
    src_ia: String,
    /// 16-bit reservation suffix.
    #[arg(long)]
    suffix: u32,
    /// Bandwidth class.
    #[arg(long)]
    bw_class: u32,
    #[arg(long)]
    ingress: u32,
    #[arg(long)]
    egress: u32,
    /// Expiry in SIBRA ticks (4 s units of Unix time).
    #[arg(long)]
    expiry_tick: u32,
}

impl AdmitArgs {
    fn to_pb(&self) -> pb::AdmitRequest {
        pb::AdmitRequest {
            src_ia: self.src_ia.clone(),
            suffix: self.suffix,
            bw_class: self.bw_class,
            ingress: self.ingress,
            egress: self.egress,
            expiry_tick: self.expiry_tick,
        }
    }
}

#[derive(Subcommand)]
enum Sibra {
    /// List reservations.
    List,
    /// Admit a steady reservation.
    AdmitSteady(AdmitArgs),
    /// Admit a core reservation.
    AdmitCore(AdmitArgs),
    /// Revoke a reservation.
    Revoke {
        #[arg(long)]
        src_ia: String,
        #[arg(long)]
        suffix: u32,
    },
    /// Show the link split.
    LinkSplit,
    /// Set the link split (percent).
    SetLinkSplit {
        #[arg(long)]
        steady: f64,
        #[arg(long)]
        ephemeral: f64,
        #[arg(long)]
        best_effort: f64,
    },
}

#[derive(Subcommand)]
enum FlowPolice {
    /// Show the parameters.
    Params,
    /// Set the parameters.
    SetParams {
        #[arg(long)]
        interval_ms: u64,
        #[arg(long)]
        overuse_factor: f64,
        #[arg(long)]
        table_entries: u64,
        #[arg(long)]
        capability_lifetime_s: u64,
    },
    /// Flow-table statistics.
    Table,
}

#[derive(Subcommand)]
enum Fair {
    /// List keys.
    Keys,
    /// Install a new key epoch.
    RotateKey {
        #[arg(long)]
        epoch: u32,
        /// 16-byte key, hex.
        #[arg(long)]
        key_hex: String,
        #[arg(long, default_value_t = 5)]
        grace_s: u32,
    },
    /// List channels.
    Channels,
    /// Set a policy for a source prefix.
    SetPolicy {
        #[arg(long)]
        prefix: String,
        /// mark, police or drop.
        #[arg(long)]
        action: String,
        #[arg(long, default_value_t = 0)]
        rate_bps: u64,
    },
    /// Submit a protest (hex).
    Protest { protest_hex: String },
    /// List protest verdicts.
    Verdicts,
}

#[derive(Subcommand)]
enum Drkey {
    /// List key epochs.
    Epochs,
    /// Install a secret value for an epoch.
    InstallSecret {
        #[arg(long)]
        not_before: u64,
        #[arg(long)]
        not_after: u64,
        /// 16-byte secret, hex.
        #[arg(long)]
        secret_hex: String,
    },
}

/// How a reply is shown.
trait Show: serde::Serialize + std::fmt::Debug {
    fn human(&self) -> String {
        format!("{self:#?}")
    }
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
        s
    }
}

fn origin_text(o: &Option<pb::Origin>) -> String {
    match o.as_ref().and_then(|o| o.who.as_ref()) {
        Some(pb::origin::Who::Ia(ia)) => format!("AS {ia}"),
        Some(pb::origin::Who::Isd(i)) => format!("ISD {i}"),
        None => "?".into(),
    }
}

impl Show for pb::RateList {
    fn human(&self) -> String {
        let mut s = String::new();
        for r in &self.rates {
            let rate = if r.bps > 0 {
                format!("{} bit/s", r.bps)
            } else if r.percent_of_g > 0.0 {
                format!("{}% of G", r.percent_of_g)
            } else {
                "equal share".into()
            };
            s.push_str(&format!("stage [{}] {:<20} {rate}\n", r.stage, origin_text(&r.origin)));
        }
        if s.is_empty() {
            s.push_str("no explicit rates\n");
        }
        s
    }
}

impl Show for pb::Bounds {
    fn human(&self) -> String {
        format!(
            "R {} N {} G {} A {} U {} capacity {} bit/s",
            self.r, self.n, self.g, self.a, self.u, self.capacity_bps
        )
    }
}

impl Show for pb::ReservationList {}
impl Show for pb::AdmitReply {}
impl Show for pb::LinkSplit {}
impl Show for pb::FlowPoliceParams {}
impl Show for pb::TableStats {}
impl Show for pb::KeyList {}
impl Show for pb::ChannelList {}
impl Show for pb::ProtestReceipt {}
impl Show for pb::VerdictList {}
impl Show for pb::EpochList {}

fn print<T: Show>(json: bool, r: Result<tonic::Response<T>, tonic::Status>) -> ExitCode {
    match r {
        Ok(r) => {
            let m = r.into_inner();
            if json {
                match serde_json::to_string_pretty(&m) {
                    Ok(s) => println!("{s}"),
                    Err(e) => {
                        eprintln!("error: encoding JSON: {e}");
                        return ExitCode::from(2);
                    }
                }
            } else {
                println!("{}", m.human().trim_end());
            }
            ExitCode::SUCCESS
        }
        Err(s) => {
            if json {
                let v = serde_json::json!({ "error": { "code": format!("{:?}", s.code()), "message": s.message() } });
                eprintln!("{v}");
            } else {
                eprintln!("error: {:?}: {}", s.code(), s.message());
            }
            ExitCode::from(2)
        }
    }
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
        Cmd::Zlane(z) => {
            let mut z_c = c.zlane();
            match z {
                Zlane::Rates => print(j, z_c.list_rates(pb::ListRatesRequest {}).await),
                Zlane::SetRate { origin, bps, percent_of_g } => {
                    let rate = match (bps, percent_of_g) {
                        (Some(b), _) => Some(pb::set_rate_request::Rate::Bps(b)),
                        (None, Some(p)) => Some(pb::set_rate_request::Rate::PercentOfG(p)),
                        (None, None) => None,
                    };
                    print(
                        j,
                        z_c.set_rate(pb::SetRateRequest { origin: Some(origin.to_pb()), rate })
                            .await,
                    )
                }
                Zlane::RemoveRate { origin } => print(
                    j,
                    z_c.remove_rate(pb::RemoveRateRequest { origin: Some(origin.to_pb()) }).await,
                ),
                Zlane::Bounds { port } => {
                    print(j, z_c.get_bounds(pb::GetBoundsRequest { port }).await)
                }
                Zlane::SetBounds { port, r, n, g, a, u, capacity_bps } => print(
                    j,
                    z_c.set_bounds(pb::SetBoundsRequest {
                        port,
                        bounds: Some(pb::Bounds { r, n, g, a, u, capacity_bps }),
                    })
                    .await,
                ),
                Zlane::GatewayHostRate { prefix, bps } => print(
                    j,
                    z_c.set_gateway_host_rate(pb::SetGatewayHostRateRequest { prefix, bps }).await,
                ),
            }
        }
        Cmd::Sibra(s) => {
            let mut s_c = c.sibra();
            match s {
                Sibra::List => {
                    print(j, s_c.list_reservations(pb::ListReservationsRequest {}).await)
                }
                Sibra::AdmitSteady(a) => print(j, s_c.admit_steady(a.to_pb()).await),
                Sibra::AdmitCore(a) => print(j, s_c.admit_core(a.to_pb()).await),
                Sibra::Revoke { src_ia, suffix } => {
                    print(j, s_c.revoke(pb::RevokeRequest { src_ia, suffix }).await)
                }
                Sibra::LinkSplit => print(j, s_c.get_link_split(pb::GetLinkSplitRequest {}).await),
                Sibra::SetLinkSplit { steady, ephemeral, best_effort } => print(
                    j,
                    s_c.set_link_split(pb::LinkSplit {
                        steady_percent: steady,
                        ephemeral_percent: ephemeral,
                        best_effort_percent: best_effort,
                    })
                    .await,
                ),
            }
        }
        Cmd::Flowpolice(f) => {
            let mut f_c = c.flowpolice();
            match f {
                FlowPolice::Params => {
                    print(j, f_c.get_params(pb::GetFlowPoliceParamsRequest {}).await)
                }
                FlowPolice::SetParams {
                    interval_ms,
                    overuse_factor,
                    table_entries,
                    capability_lifetime_s,
                } => print(
                    j,
                    f_c.set_params(pb::FlowPoliceParams {
                        interval_ms,
                        overuse_factor,
                        table_entries,
                        capability_lifetime_s,
                    })
                    .await,
                ),
                FlowPolice::Table => {
                    print(j, f_c.get_table_stats(pb::GetTableStatsRequest {}).await)
                }
            }
        }
        Cmd::Fair(f) => {
            let mut f_c = c.fair();
            match f {
                Fair::Keys => print(j, f_c.list_keys(pb::ListKeysRequest {}).await),
                Fair::RotateKey { epoch, key_hex, grace_s } => {
                    print(j, f_c.rotate_key(pb::RotateKeyRequest { epoch, key_hex, grace_s }).await)
                }
                Fair::Channels => print(j, f_c.list_channels(pb::ListChannelsRequest {}).await),
                Fair::SetPolicy { prefix, action, rate_bps } => print(
                    j,
                    f_c.set_policy(pb::SetPolicyRequest { prefix, action, rate_bps }).await,
                ),
                Fair::Protest { protest_hex } => {
                    print(j, f_c.submit_protest(pb::SubmitProtestRequest { protest_hex }).await)
                }
                Fair::Verdicts => print(j, f_c.list_verdicts(pb::ListVerdictsRequest {}).await),
            }
        }
        Cmd::Drkey(d) => {
            let mut d_c = c.drkey();
            match d {
                Drkey::Epochs => print(j, d_c.list_epochs(pb::ListEpochsRequest {}).await),
                Drkey::InstallSecret { not_before, not_after, secret_hex } => print(
                    j,
                    d_c.install_secret(pb::InstallSecretRequest {
                        not_before_unix: not_before,
                        not_after_unix: not_after,
                        secret_hex,
                    })
                    .await,
                ),
            }
        }
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
}
