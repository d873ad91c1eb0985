//! `ctl zlane`: rates, bounds and gateway host rates.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use control::client::{lines, print, Client, Show};

use crate::pb;

/// Whose rate: one AS or a whole ISD.
#[derive(Args)]
#[group(required = true, multiple = false)]
pub struct OriginArgs {
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

/// `ctl zlane` subcommands.
#[derive(Subcommand)]
pub enum Cmd {
    /// List configured per-AS/per-ISD rates.
    Rates,
    /// Set the guaranteed rate of an AS or ISD.
    SetRate {
        /// The AS or ISD.
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
        /// The AS or ISD.
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
        /// μ_R, reservations.
        #[arg(long)]
        r: f64,
        /// μ_N, non-EPIC SCION.
        #[arg(long)]
        n: f64,
        /// μ_G, guaranteed ASes.
        #[arg(long)]
        g: f64,
        /// μ_A, authenticated.
        #[arg(long)]
        a: f64,
        /// μ_U, unauthenticated.
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

fn origin_text(o: &Option<pb::Origin>) -> String {
    match o.as_ref().and_then(|o| o.who.as_ref()) {
        Some(pb::origin::Who::Ia(ia)) => format!("AS {ia}"),
        Some(pb::origin::Who::Isd(i)) => format!("ISD {i}"),
        None => "?".into(),
    }
}

impl Show for pb::RateList {
    fn human(&self) -> String {
        let line = |r: &pb::RateEntry| {
            let rate = if r.bps > 0 {
                format!("{} bit/s", r.bps)
            } else if r.percent_of_g > 0.0 {
                format!("{}% of G", r.percent_of_g)
            } else {
                "equal share".into()
            };
            format!("stage [{}] {:<20} {rate}", r.stage, origin_text(&r.origin))
        };
        lines(&self.rates, line, "no explicit rates")
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

/// Runs `cmd` against the router behind `client`.
pub async fn run(cmd: Cmd, client: &Client, j: bool) -> ExitCode {
    let mut z_c = pb::zlane_control_client::ZlaneControlClient::new(client.authed());
    match cmd {
        Cmd::Rates => print(j, z_c.list_rates(pb::ListRatesRequest {}).await),
        Cmd::SetRate { origin, bps, percent_of_g } => {
            let rate = match (bps, percent_of_g) {
                (Some(b), _) => Some(pb::set_rate_request::Rate::Bps(b)),
                (None, Some(p)) => Some(pb::set_rate_request::Rate::PercentOfG(p)),
                (None, None) => None,
            };
            print(j, z_c.set_rate(pb::SetRateRequest { origin: Some(origin.to_pb()), rate }).await)
        }
        Cmd::RemoveRate { origin } => {
            print(j, z_c.remove_rate(pb::RemoveRateRequest { origin: Some(origin.to_pb()) }).await)
        }
        Cmd::Bounds { port } => print(j, z_c.get_bounds(pb::GetBoundsRequest { port }).await),
        Cmd::SetBounds { port, r, n, g, a, u, capacity_bps } => print(
            j,
            z_c.set_bounds(pb::SetBoundsRequest {
                port,
                bounds: Some(pb::Bounds { r, n, g, a, u, capacity_bps }),
            })
            .await,
        ),
        Cmd::GatewayHostRate { prefix, bps } => {
            print(j, z_c.set_gateway_host_rate(pb::SetGatewayHostRateRequest { prefix, bps }).await)
        }
    }
}
