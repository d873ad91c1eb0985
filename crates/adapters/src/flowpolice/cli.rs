//! `ctl flowpolice`: Algorithm-1 parameters and table statistics.

use std::process::ExitCode;

use clap::Subcommand;
use control::client::{print, Client, Show};

use crate::pb;

/// `ctl flowpolice` subcommands.
#[derive(Subcommand)]
pub enum Cmd {
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

/// Runs `cmd` against the router behind `client`.
pub async fn run(cmd: Cmd, client: &Client, j: bool) -> ExitCode {
    let mut f_c = pb::flow_police_control_client::FlowPoliceControlClient::new(client.authed());
    match cmd {
        Cmd::Params => print(j, f_c.get_params(pb::GetFlowPoliceParamsRequest {}).await),
        Cmd::SetParams {
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
        Cmd::Table => print(j, f_c.get_table_stats(pb::GetTableStatsRequest {}).await),
    }
}
