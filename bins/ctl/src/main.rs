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
    /// Expiry in SIBRA ticks (4 s units of Unix time); default: 10 ticks from now.
    #[arg(long)]
    expiry_tick: Option<u32>,
    /// Reservation index (0..=15).
    #[arg(long, default_value_t = 0)]
    index: u32,
    /// Reverse bandwidth class (default: as --bw-class).
    #[arg(long)]
    bw_class_rev: Option<u32>,
}

impl AdmitArgs {
    fn to_pb(&self) -> pb::AdmitRequest {
        pb::AdmitRequest {
            src_ia: self.src_ia.clone(),
            suffix: self.suffix,
            bw_class: self.bw_class,
            ingress: self.ingress,
            egress: self.egress,
            expiry_tick: self.expiry_tick.unwrap_or_else(|| {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                (now / 4 + 10) as u32
            }),
            index: self.index,
            bw_class_rev: self.bw_class_rev.unwrap_or(0),
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
    /// Set Algorithm-1 parameters in place (flow tables are kept); options
    /// left out keep their current value.
    SetParams {
        /// Detection period D_p, ms.
        #[arg(long)]
        period_ms: Option<u32>,
        /// Capabilities per period per flow (K_th).
        #[arg(long)]
        k_th: Option<u32>,
        /// Multiplicative decrease.
        #[arg(long)]
        beta: Option<f64>,
        /// Additive increase per period, packets.
        #[arg(long)]
        delta: Option<u32>,
        /// Loss above which the window is cut.
        #[arg(long)]
        l_down: Option<f64>,
        /// Loss below which the window grows.
        #[arg(long)]
        l_up: Option<f64>,
        /// Weight of the loss history.
        #[arg(long)]
        lambda: Option<f64>,
        /// Low-loss periods after which policing stops (S_Th).
        #[arg(long)]
        s_th: Option<u32>,
        /// Smallest window, packets.
        #[arg(long)]
        w_min: Option<u32>,
        /// Accept previous-period capabilities as tickets.
        #[arg(long)]
        accept_previous_period: Option<bool>,
        /// Idle periods before an entry may be reclaimed.
        #[arg(long)]
        idle_periods: Option<u32>,
    },
    /// Flow-table statistics.
    Table,
}

#[derive(Subcommand)]
enum Fair {
    /// List keys.
    Keys,
    /// Install the data key of the epoch after the newest one.
    RotateKey {
        /// Epoch number (newest installed + 1).
        #[arg(long)]
        epoch: u64,
        /// 16-byte key, hex.
        #[arg(long)]
        key_hex: String,
    },
    /// List channels.
    Channels,
    /// Apply a sending policy (CIR, CBS) to the channel of a prefix.
    SetPolicy {
        /// The channel's destination prefix, as configured.
        #[arg(long)]
        prefix: String,
        /// Committed rate, bit/s.
        #[arg(long)]
        cir_bps: u64,
        /// Committed burst, bytes.
        #[arg(long)]
        cbs_bytes: u64,
    },
    /// Submit a protest for verification by this router's AS.
    ///
    /// The file holds the protest in the binary encoding of
    /// `fair::protest::ProtestRequest::encode` (u32 policy length, the signed
    /// SETUP_RESPONSE policy, u32 record count, 64-byte evidence records,
    /// window start/end and protest time as u64, the 32-byte protest id,
    /// u16 signature length and the destination's Ed25519 signature; all
    /// big-endian), either raw or as hex text (whitespace ignored).
    #[command(alias = "protest")]
    SubmitProtest {
        /// Protest file (raw binary or hex text); `-` reads standard input.
        #[arg(long, conflicts_with = "hex", required_unless_present = "hex")]
        file: Option<PathBuf>,
        /// The protest as hex on the command line (small protests).
        #[arg(long)]
        hex: Option<String>,
    },
    /// List the signed verdicts on protests, newest first.
    Verdicts {
        /// Show at most this many (0: all kept).
        #[arg(long, default_value_t = 0)]
        limit: u32,
    },
}

/// The protest bytes of a file: hex text if it is all hex digits and
/// whitespace (an even number of digits), raw bytes otherwise.
fn protest_bytes(file: &std::path::Path) -> Result<Vec<u8>, String> {
    let b = if file.as_os_str() == "-" {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut v)
            .map_err(|e| format!("stdin: {e}"))?;
        v
    } else {
        std::fs::read(file).map_err(|e| format!("{}: {e}", file.display()))?
    };
    let digits: Vec<u8> = b.iter().copied().filter(|c| !c.is_ascii_whitespace()).collect();
    if !digits.is_empty()
        && digits.len().is_multiple_of(2)
        && digits.iter().all(u8::is_ascii_hexdigit)
    {
        let nib = |c: u8| (c as char).to_digit(16).unwrap_or(0) as u8;
        return Ok(digits.chunks(2).map(|p| nib(p[0]) << 4 | nib(p[1])).collect());
    }
    Ok(b)
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

impl Show for pb::ReservationList {
    fn human(&self) -> String {
        let mut s = String::new();
        for r in &self.reservations {
            s.push_str(&format!(
                "{} {:<18} index {:<2} classes {}/{} interfaces {}->{} expires tick {}{}{}\n",
                r.kind,
                r.id,
                r.index,
                r.bw_class,
                r.bw_class_rev,
                r.ingress,
                r.egress,
                r.expiry_tick,
                if r.pending { " (pending)" } else { "" },
                if r.contract_bps > 0 {
                    format!(" contract {} bit/s", r.contract_bps)
                } else {
                    String::new()
                }
            ));
        }
        if s.is_empty() {
            s.push_str("no reservations\n");
        }
        s
    }
}
impl Show for pb::AdmitReply {
    fn human(&self) -> String {
        format!(
            "{} on {} workers (generation {}): {}",
            if self.admitted { "admitted" } else { "denied" },
            self.workers,
            self.generation,
            self.detail
        )
    }
}
impl Show for pb::LinkSplit {
    fn human(&self) -> String {
        format!(
            "steady {}% ephemeral {}% best effort {}%",
            self.steady_percent, self.ephemeral_percent, self.best_effort_percent
        )
    }
}
impl Show for pb::FlowPoliceParams {
    fn human(&self) -> String {
        let o = |v: Option<String>| v.unwrap_or_else(|| "-".into());
        format!(
            "period {} ms, K_th {}, beta {}, delta {}, L_down {}, L_up {}, lambda {}, S_Th {}, \
             w_min {}, accept previous period {}, idle periods {}",
            o(self.period_ms.map(|v| v.to_string())),
            o(self.k_th.map(|v| v.to_string())),
            o(self.beta.map(|v| v.to_string())),
            o(self.delta.map(|v| v.to_string())),
            o(self.l_down.map(|v| v.to_string())),
            o(self.l_up.map(|v| v.to_string())),
            o(self.lambda.map(|v| v.to_string())),
            o(self.s_th.map(|v| v.to_string())),
            o(self.w_min.map(|v| v.to_string())),
            o(self.accept_previous_period.map(|v| v.to_string())),
            o(self.idle_periods.map(|v| v.to_string())),
        )
    }
}
impl Show for pb::TableStats {
    fn human(&self) -> String {
        format!(
            "flows {} of {} lines (per worker {:?}), created {}, reclaimed {}, table full {}, \
             probe window {}, memory {} bytes",
            self.entries,
            self.capacity,
            self.entries_per_worker,
            self.inserts,
            self.evictions,
            self.table_full,
            self.probe_window,
            self.memory_bytes
        )
    }
}
impl Show for pb::KeyList {
    fn human(&self) -> String {
        let mut s = String::new();
        for k in &self.keys {
            s.push_str(&format!(
                "epoch {} [{}, {}){}\n",
                k.epoch,
                k.not_before_unix,
                k.not_after_unix,
                if k.active { " active" } else { "" }
            ));
        }
        if s.is_empty() {
            s.push_str("no keys\n");
        }
        s
    }
}
impl Show for pb::ChannelList {
    fn human(&self) -> String {
        let mut s = String::new();
        for c in &self.channels {
            s.push_str(&format!(
                "channel {} {:<20} to AS {} m {} CIR {} bit/s CBS {} bytes\n",
                c.index, c.prefix, c.dst_asn, c.m, c.cir_bps, c.cbs_bytes
            ));
        }
        if s.is_empty() {
            s.push_str("no channels\n");
        }
        s
    }
}
fn verdict_line(v: &pb::Verdict) -> String {
    let what = if v.verdict == "ACK" {
        format!(
            "ACK: violation from {} (max excess {} bytes)",
            v.first_violation_unix, v.max_excess_bytes
        )
    } else {
        format!("{} {}", v.verdict, v.reason)
    };
    format!(
        "#{} {what}\n  protest {} AS {} -> AS {} verified by AS {} at {}\n  records {} \
         considered {} failed {} old {} out-of-validity {} duplicate-groups {} replay-prefix {}\n",
        v.id,
        v.protest_id_hex,
        v.source_asn,
        v.complainant_asn,
        v.verifier_asn,
        v.verdict_time_unix,
        v.records,
        v.considered,
        v.failed,
        v.excluded_old,
        v.out_of_validity,
        v.duplicate_groups,
        v.replay_prefix
    ) + &misplaced_line(v)
}

/// The signed SEC-21 misplaced-mark histogram, if the verdict carries one.
fn misplaced_line(v: &pb::Verdict) -> String {
    let Some(m) = &v.misplaced else { return String::new() };
    let hits: Vec<String> = m.hits.iter().map(u32::to_string).collect();
    format!(
        "  misplaced marks: own slot {} probed {} hits [{}] significant slot {}\n",
        m.own_slot,
        m.probed,
        hits.join(" "),
        m.significant_slot
    )
}

impl Show for pb::ProtestReceipt {
    fn human(&self) -> String {
        match &self.detail {
            Some(v) => verdict_line(v),
            None => format!("#{} {}", self.id, self.verdict),
        }
    }
}

impl Show for pb::VerdictList {
    fn human(&self) -> String {
        let mut s = format!(
            "verifier key {} (protests admitted {}, rate-limited {})\n",
            self.verifier_public_key_hex, self.admitted, self.refused
        );
        if self.verdicts.is_empty() {
            s.push_str("no verdicts\n");
        }
        for v in &self.verdicts {
            s.push_str(&verdict_line(v));
        }
        s
    }
}
impl Show for pb::EpochList {
    fn human(&self) -> String {
        let mut s = String::new();
        for e in &self.epochs {
            s.push_str(&format!(
                "[{}, {}){}\n",
                e.not_before_unix,
                e.not_after_unix,
                if e.current { " current" } else { "" }
            ));
        }
        if s.is_empty() {
            s.push_str("no epochs installed\n");
        }
        s
    }
}

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
                    period_ms,
                    k_th,
                    beta,
                    delta,
                    l_down,
                    l_up,
                    lambda,
                    s_th,
                    w_min,
                    accept_previous_period,
                    idle_periods,
                } => print(
                    j,
                    f_c.set_params(pb::FlowPoliceParams {
                        period_ms,
                        k_th,
                        beta,
                        delta,
                        l_down,
                        l_up,
                        lambda,
                        s_th,
                        w_min,
                        accept_previous_period,
                        idle_periods,
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
                Fair::RotateKey { epoch, key_hex } => {
                    print(j, f_c.rotate_key(pb::RotateKeyRequest { epoch, key_hex }).await)
                }
                Fair::Channels => print(j, f_c.list_channels(pb::ListChannelsRequest {}).await),
                Fair::SetPolicy { prefix, cir_bps, cbs_bytes } => print(
                    j,
                    f_c.set_policy(pb::SetPolicyRequest { prefix, cir_bps, cbs_bytes }).await,
                ),
                Fair::SubmitProtest { file, hex } => {
                    let req = match (file, hex) {
                        (Some(f), _) => match protest_bytes(&f) {
                            Ok(protest) => {
                                pb::SubmitProtestRequest { protest, ..Default::default() }
                            }
                            Err(e) => {
                                eprintln!("error: {e}");
                                return ExitCode::from(1);
                            }
                        },
                        (None, Some(protest_hex)) => {
                            pb::SubmitProtestRequest { protest_hex, ..Default::default() }
                        }
                        (None, None) => pb::SubmitProtestRequest::default(),
                    };
                    print(j, f_c.submit_protest(req).await)
                }
                Fair::Verdicts { limit } => {
                    print(j, f_c.list_verdicts(pb::ListVerdictsRequest { limit }).await)
                }
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

    #[test]
    fn submit_protest_takes_a_file_or_hex_and_reads_both_encodings() {
        let p = |a: &[&str]| Cli::try_parse_from(a).map(|_| ());
        assert!(p(&["ctl", "fair", "submit-protest", "--file", "x"]).is_ok());
        assert!(p(&["ctl", "fair", "protest", "--hex", "00"]).is_ok());
        assert!(p(&["ctl", "fair", "submit-protest"]).is_err());
        assert!(p(&["ctl", "fair", "submit-protest", "--file", "x", "--hex", "00"]).is_err());
        assert!(p(&["ctl", "fair", "verdicts", "--limit", "3"]).is_ok());
        let dir = std::env::temp_dir().join(format!("ctl-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (h, r) = (dir.join("h"), dir.join("r"));
        std::fs::write(&h, "00ff 10\n20\n").unwrap();
        std::fs::write(&r, [0u8, 0xff, 0x10]).unwrap();
        assert_eq!(protest_bytes(&h).unwrap(), vec![0, 0xff, 0x10, 0x20]);
        assert_eq!(protest_bytes(&r).unwrap(), vec![0, 0xff, 0x10]);
        assert!(protest_bytes(&dir.join("missing")).unwrap_err().contains("missing"));
    }
}
