//! `FairControl`: data keys, channel policies, protests and verdicts.
//!
//! A channel's policy (`SetPolicy`) is a parameter of the `fair-source`
//! stages: the RPC edits their stored parameters, which the router parses
//! and applies in place like any live change. Keys (`RotateKey`,
//! `ListKeys`) and protests are operations on the live stages' state.

use std::sync::Arc;

use control::error::CtlError;
use control::plane::{change_all, read_all, Plane};
use control::service::{blocking, Reply};
use control::text;
use fair::config::{FairSourceConfig, Prefix};
use tonic::service::interceptor::InterceptedService;
use tonic::service::RoutesBuilder;
use tonic::Request;

use crate::pb;

/// Stages marking with FAIR data keys.
const KINDS_TRANSIT: &[&str] = &["fair-transit"];
/// Stages stamping FAIR channels.
const KINDS_SOURCE: &[&str] = &["fair-source"];

/// The service, ready for the router's gRPC server.
pub(crate) struct Service(pub Arc<Plane>, pub Option<Arc<std::sync::Mutex<super::protest::Desk>>>);

impl control::ControlService for Service {
    fn name(&self) -> &'static str {
        <pb::fair_control_server::FairControlServer<FairSvc> as tonic::server::NamedService>::NAME
    }

    fn descriptor_set(&self) -> &'static [u8] {
        pb::FILE_DESCRIPTOR_SET
    }

    fn read_only(&self) -> &'static [&'static str] {
        &["ListKeys", "ListChannels", "ListVerdicts"]
    }

    fn add_to(self: Box<Self>, routes: &mut RoutesBuilder, auth: control::auth::Auth) {
        routes.add_service(InterceptedService::new(
            pb::fair_control_server::FairControlServer::new(FairSvc(self.0, self.1))
                .max_decoding_message_size(super::protest::MAX_PROTEST_BYTES * 2 + 1024),
            auth,
        ));
    }
}

/// `FairControl`, with the protest verifier if `[control.fair]` configures one.
pub struct FairSvc(pub Arc<Plane>, pub Option<Arc<std::sync::Mutex<super::protest::Desk>>>);

/// Most keys listed: the active epoch's predecessors and successors beyond
/// this window are summarized by the count only.
const FAIR_LIST_BEFORE: u64 = 8;
const FAIR_LIST_AFTER: u64 = 56;

/// The configuration of the first `fair-source` stage, as stored (what
/// the running stages apply).
fn source_config(plane: &Plane) -> Result<FairSourceConfig, CtlError> {
    let i = plane.stages_of(KINDS_SOURCE)?[0];
    let (cfg, _) = plane.config();
    runtime::config::typed(&cfg.pipeline[i].params)
        .map_err(|e| CtlError::Internal(format!("pipeline[{i}]: {e}")))
}

/// The table of the channel of `prefix` in a `fair-source` parameter table.
fn channel_of<'a>(params: &'a mut toml::Table, prefix: &Prefix) -> Option<&'a mut toml::Table> {
    let channels = params.get_mut("channels")?.as_array_mut()?;
    channels.iter_mut().filter_map(|c| c.as_table_mut()).find(|t| {
        t.get("prefix").and_then(|v| v.as_str()).and_then(|p| p.parse::<Prefix>().ok())
            == Some(*prefix)
    })
}

#[tonic::async_trait]
impl pb::fair_control_server::FairControl for FairSvc {
    async fn list_keys(&self, _: Request<pb::ListKeysRequest>) -> Reply<pb::KeyList> {
        let plane = self.0.clone();
        blocking(move || {
            let v = read_all(&plane, KINDS_TRANSIT, |s: &mut fair::transit::FairTransit, now| {
                let ring = s.keys();
                let period = ring.period();
                let active = ring.epoch_of(now.unix_ns / 1_000_000_000);
                let (Some(old), Some(new)) = (ring.oldest(), ring.newest()) else {
                    return Ok(Vec::new());
                };
                let from = old.max(active.saturating_sub(FAIR_LIST_BEFORE));
                let to = new.min(active.saturating_add(FAIR_LIST_AFTER));
                Ok((from..=to)
                    .filter_map(|e| ring.get(e))
                    .map(|k| pb::KeyInfo {
                        epoch: k.epoch,
                        not_before_unix: k.epoch.saturating_mul(period),
                        not_after_unix: (k.epoch + 1).saturating_mul(period),
                        active: k.epoch == active,
                    })
                    .collect())
            })?;
            Ok(pb::KeyList {
                keys: v.into_iter().next().and_then(|w| w.into_iter().next()).unwrap_or_default(),
            })
        })
        .await
    }
    async fn rotate_key(&self, req: Request<pb::RotateKeyRequest>) -> Reply<pb::ApplyReply> {
        let r = req.into_inner();
        let k: [u8; 16] = text::hex_bytes("key_hex", &r.key_hex, 16)?
            .try_into()
            .map_err(|_| CtlError::invalid("key_hex: not 16 bytes"))?;
        let plane = self.0.clone();
        blocking(move || {
            let epoch = r.epoch;
            // Every worker holds the same ring: install the key in a copy of
            // each and swap it in (the stage reads the ring once per burst).
            change_all(
                &plane,
                KINDS_TRANSIT,
                format!("FAIR data key of epoch {epoch} installed"),
                move |s: &mut fair::transit::FairTransit, _| {
                    let mut ring = (**s.keys()).clone();
                    let binding = ring
                        .newest()
                        .and_then(|n| ring.get(n))
                        .map_or(fair::crypto::MarkBinding::Paper, |d| d.binding);
                    ring.install(epoch, &mac::Key::from(k), binding)
                        .map_err(|e| CtlError::invalid(format!("epoch: {e}")))?;
                    s.set_keys(Arc::new(ring));
                    Ok(())
                },
            )
        })
        .await
    }
    async fn list_channels(&self, _: Request<pb::ListChannelsRequest>) -> Reply<pb::ChannelList> {
        let plane = self.0.clone();
        blocking(move || {
            let c = source_config(&plane)?;
            let channels = c.channels.iter().enumerate().map(|(i, ch)| pb::Channel {
                index: i as u32,
                prefix: ch.prefix.to_string(),
                dst_asn: ch.dst_asn,
                m: u32::from(ch.m),
                cir_bps: ch.cir_bps,
                cbs_bytes: ch.cbs_bytes,
            });
            Ok(pb::ChannelList { channels: channels.collect() })
        })
        .await
    }
    /// A parameter edit of every `fair-source` stage holding the channel:
    /// validated like the configuration file, applied in place (the
    /// channel's bucket keeps its level), recorded; a no-op if it is in
    /// effect already.
    async fn set_policy(&self, req: Request<pb::SetPolicyRequest>) -> Reply<pb::ApplyReply> {
        let r = req.into_inner();
        let prefix: Prefix =
            r.prefix.parse().map_err(|why| CtlError::invalid(format!("prefix: {why}")))?;
        let int = |k: &str, v: u64| {
            i64::try_from(v).map_err(|_| CtlError::invalid(format!("{k}: {v} is too large")))
        };
        let (cir, cbs) = (int("cir_bps", r.cir_bps)?, int("cbs_bytes", r.cbs_bytes)?);
        let plane = self.0.clone();
        blocking(move || {
            let found = std::cell::Cell::new(false);
            let detail = format!(
                "FAIR channel {prefix}: CIR {} bit/s, CBS {} bytes",
                r.cir_bps, r.cbs_bytes
            );
            let edit = |params: &mut toml::Table| {
                if let Some(t) = channel_of(params, &prefix) {
                    t.insert("cir_bps".into(), toml::Value::Integer(cir));
                    t.insert("cbs_bytes".into(), toml::Value::Integer(cbs));
                    found.set(true);
                }
                Ok(())
            };
            let applied = plane.edit_stages(KINDS_SOURCE, edit, &detail)?;
            if !found.get() {
                return Err(CtlError::NotFound(format!("no FAIR channel with prefix {prefix}")));
            }
            Ok(applied.into())
        })
        .await
    }
    async fn submit_protest(
        &self,
        req: Request<pb::SubmitProtestRequest>,
    ) -> Reply<pb::ProtestReceipt> {
        use super::protest::MAX_PROTEST_BYTES;
        let r = req.into_inner();
        let b = match (r.protest_hex.is_empty(), r.protest.is_empty()) {
            (false, false) => {
                return Err(CtlError::invalid(
                    "protest_hex, protest: set exactly one (hex or raw bytes), not both",
                )
                .into())
            }
            (true, true) => {
                return Err(CtlError::invalid("protest: empty (set protest or protest_hex)").into())
            }
            (false, true) => {
                if r.protest_hex.len() > 2 * MAX_PROTEST_BYTES {
                    return Err(CtlError::invalid(format!(
                        "protest_hex: {} digits exceed {} (a 4 MiB protest)",
                        r.protest_hex.len(),
                        2 * MAX_PROTEST_BYTES
                    ))
                    .into());
                }
                text::hex_any("protest_hex", r.protest_hex.trim())?
            }
            (true, false) => r.protest,
        };
        control::audit::note_target(&format!("fair protest ({} bytes)", b.len()));
        if b.len() > MAX_PROTEST_BYTES {
            return Err(CtlError::invalid(format!(
                "protest: {} bytes exceed {MAX_PROTEST_BYTES}",
                b.len()
            ))
            .into());
        }
        let desk = self.1.clone();
        let plane = self.0.clone();
        blocking(move || {
            let desk = desk_of(&plane, desk)?;
            // The workers only hand out their live key ring and clock; the
            // verification runs here, on the control plane's blocking pool.
            let v = read_all(&plane, KINDS_TRANSIT, |s: &mut fair::transit::FairTransit, now| {
                Ok((s.keys().clone(), now.unix_ns / 1_000_000_000))
            })?;
            let (keys, now) = v.into_iter().flatten().next().ok_or_else(|| {
                CtlError::FailedPrecondition("no worker answered with a fair-transit stage".into())
            })?;
            let mut d = desk.lock().unwrap_or_else(|p| p.into_inner());
            let v = d.submit(&b, keys, now)?;
            let verdict = if v.verdict == "ACK" {
                "ACK".to_string()
            } else {
                format!("{} {}", v.verdict, v.reason)
            };
            Ok(pb::ProtestReceipt { id: v.id, verdict, detail: Some(v) })
        })
        .await
    }
    async fn list_verdicts(&self, req: Request<pb::ListVerdictsRequest>) -> Reply<pb::VerdictList> {
        let limit = req.into_inner().limit;
        let desk = self.1.clone();
        let plane = self.0.clone();
        blocking(move || {
            let desk = desk_of(&plane, desk)?;
            let d = desk.lock().unwrap_or_else(|p| p.into_inner());
            Ok(d.list(limit))
        })
        .await
    }
}

/// The protest desk, if this router verifies protests: a `fair-transit`
/// stage and `[control.fair]` are both needed.
fn desk_of(
    plane: &Plane,
    desk: Option<Arc<std::sync::Mutex<super::protest::Desk>>>,
) -> Result<Arc<std::sync::Mutex<super::protest::Desk>>, CtlError> {
    plane.stages_of(KINDS_TRANSIT)?;
    desk.ok_or_else(|| {
        CtlError::FailedPrecondition(
            "no FAIR protest verifier configured: add [control.fair] (asn, signing key, trust)"
                .into(),
        )
    })
}
