//! `ctl sibra`: reservations and the link split.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use control::client::{lines, print, Client, Show};

use crate::pb;

/// What to admit.
#[derive(Args)]
pub struct AdmitArgs {
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

/// `ctl sibra` subcommands.
#[derive(Subcommand)]
pub enum Cmd {
    /// List reservations.
    List,
    /// Admit a steady reservation.
    AdmitSteady(AdmitArgs),
    /// Admit a core reservation.
    AdmitCore(AdmitArgs),
    /// Revoke a reservation.
    Revoke {
        /// ISD-AS that owns the reservation.
        #[arg(long)]
        src_ia: String,
        /// Suffix of its steady ID.
        #[arg(long)]
        suffix: u32,
    },
    /// Show the link split.
    LinkSplit,
    /// Set the link split (percent).
    SetLinkSplit {
        /// Steady reservations, percent.
        #[arg(long)]
        steady: f64,
        /// Ephemeral reservations, percent.
        #[arg(long)]
        ephemeral: f64,
        /// Best effort, percent.
        #[arg(long)]
        best_effort: f64,
    },
}

impl Show for pb::ReservationList {
    fn human(&self) -> String {
        let line = |r: &pb::Reservation| {
            format!(
                "{} {:<18} index {:<2} classes {}/{} interfaces {}->{} expires tick {}{}{}",
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
            )
        };
        lines(&self.reservations, line, "no reservations")
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

/// Runs `cmd` against the router behind `client`.
pub async fn run(cmd: Cmd, client: &Client, j: bool) -> ExitCode {
    let mut s_c = pb::sibra_control_client::SibraControlClient::new(client.authed());
    match cmd {
        Cmd::List => print(j, s_c.list_reservations(pb::ListReservationsRequest {}).await),
        Cmd::AdmitSteady(a) => print(j, s_c.admit_steady(a.to_pb()).await),
        Cmd::AdmitCore(a) => print(j, s_c.admit_core(a.to_pb()).await),
        Cmd::Revoke { src_ia, suffix } => {
            print(j, s_c.revoke(pb::RevokeRequest { src_ia, suffix }).await)
        }
        Cmd::LinkSplit => print(j, s_c.get_link_split(pb::GetLinkSplitRequest {}).await),
        Cmd::SetLinkSplit { steady, ephemeral, best_effort } => print(
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
