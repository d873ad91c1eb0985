//! `ctl fair`: keys, channels, policies, protests and verdicts.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
use control::client::{lines, print, Client, Show};

use crate::pb;

/// `ctl fair` subcommands.
#[derive(Subcommand)]
pub enum Cmd {
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
        /// The channel's destination prefix (e.g. 10.2.0.0/16).
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

impl Show for pb::KeyList {
    fn human(&self) -> String {
        let line = |k: &pb::KeyInfo| {
            let active = if k.active { " active" } else { "" };
            format!("epoch {} [{}, {}){active}", k.epoch, k.not_before_unix, k.not_after_unix)
        };
        lines(&self.keys, line, "no keys")
    }
}
impl Show for pb::ChannelList {
    fn human(&self) -> String {
        let line = |c: &pb::Channel| {
            format!(
                "channel {} {:<20} to AS {} m {} CIR {} bit/s CBS {} bytes",
                c.index, c.prefix, c.dst_asn, c.m, c.cir_bps, c.cbs_bytes
            )
        };
        lines(&self.channels, line, "no channels")
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
        let head = format!(
            "verifier key {} (protests admitted {}, rate-limited {})\n",
            self.verifier_public_key_hex, self.admitted, self.refused
        );
        head + &lines(&self.verdicts, |v| verdict_line(v).trim_end().to_string(), "no verdicts")
    }
}

/// Runs `cmd` against the router behind `client`.
pub async fn run(cmd: Cmd, client: &Client, j: bool) -> ExitCode {
    let mut f_c = pb::fair_control_client::FairControlClient::new(client.authed());
    match cmd {
        Cmd::Keys => print(j, f_c.list_keys(pb::ListKeysRequest {}).await),
        Cmd::RotateKey { epoch, key_hex } => {
            print(j, f_c.rotate_key(pb::RotateKeyRequest { epoch, key_hex }).await)
        }
        Cmd::Channels => print(j, f_c.list_channels(pb::ListChannelsRequest {}).await),
        Cmd::SetPolicy { prefix, cir_bps, cbs_bytes } => {
            print(j, f_c.set_policy(pb::SetPolicyRequest { prefix, cir_bps, cbs_bytes }).await)
        }
        Cmd::SubmitProtest { file, hex } => {
            let req = match (file, hex) {
                (Some(f), _) => match protest_bytes(&f) {
                    Ok(protest) => pb::SubmitProtestRequest { protest, ..Default::default() },
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
        Cmd::Verdicts { limit } => {
            print(j, f_c.list_verdicts(pb::ListVerdictsRequest { limit }).await)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protest_files_are_read_as_hex_or_raw() {
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
