//! `ctl flowpolice`: Algorithm-1 parameters and table statistics.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use control::client::{print, Client, Show};
use serde::Serialize;

use crate::pb;

/// `ctl flowpolice` subcommands.
#[derive(Subcommand)]
pub enum Cmd {
    /// Show the parameters.
    Params,
    /// Set Algorithm-1 parameters in place (flow tables are kept); options
    /// left out keep their current value.
    SetParams(SetParams),
    /// Flow-table statistics.
    Table,
}

/// `ctl flowpolice set-params` options: the fields of `FlowPoliceParams`
/// (same names, so the request is built by serde).
#[derive(Args, Serialize)]
pub struct SetParams {
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
    /// Packets per period up to which a flow is only demoted, never dropped
    /// for misbehaving.
    #[arg(long)]
    responsive_volume: Option<u32>,
}

impl Show for pb::FlowPoliceParams {
    fn human(&self) -> String {
        let v = serde_json::to_value(self).unwrap_or_default();
        let fields = v.as_object().into_iter().flatten().filter(|(_, v)| !v.is_null());
        fields.map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")
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

/// Runs `cmd` against the router behind `client`.
pub async fn run(cmd: Cmd, client: &Client, j: bool) -> ExitCode {
    let mut f_c = pb::flow_police_control_client::FlowPoliceControlClient::new(client.authed());
    match cmd {
        Cmd::Params => print(j, f_c.get_params(pb::GetFlowPoliceParamsRequest {}).await),
        Cmd::SetParams(args) => {
            let req: Result<pb::FlowPoliceParams, _> =
                serde_json::to_value(&args).and_then(serde_json::from_value);
            match req {
                Ok(req) => print(j, f_c.set_params(req).await),
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Cmd::Table => print(j, f_c.get_table_stats(pb::GetTableStatsRequest {}).await),
    }
}
