//! `ctl drkey`: epochs and secret values.

use std::process::ExitCode;

use clap::Subcommand;
use control::client::{lines, print, Client, Show};

use crate::pb;

/// `ctl drkey` subcommands.
#[derive(Subcommand)]
pub enum Cmd {
    /// List key epochs.
    Epochs,
    /// Install a secret value for an epoch.
    InstallSecret {
        /// Start of the epoch, Unix seconds.
        #[arg(long)]
        not_before: u64,
        /// End of the epoch (exclusive), Unix seconds.
        #[arg(long)]
        not_after: u64,
        /// 16-byte secret, hex.
        #[arg(long)]
        secret_hex: String,
    },
}

impl Show for pb::EpochList {
    fn human(&self) -> String {
        let line = |e: &pb::Epoch| {
            let current = if e.current { " current" } else { "" };
            format!("[{}, {}){current}", e.not_before_unix, e.not_after_unix)
        };
        lines(&self.epochs, line, "no epochs installed")
    }
}

/// Runs `cmd` against the router behind `client`.
pub async fn run(cmd: Cmd, client: &Client, j: bool) -> ExitCode {
    let mut d_c = pb::drkey_control_client::DrkeyControlClient::new(client.authed());
    match cmd {
        Cmd::Epochs => print(j, d_c.list_epochs(pb::ListEpochsRequest {}).await),
        Cmd::InstallSecret { not_before, not_after, secret_hex } => print(
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
