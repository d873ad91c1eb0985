//! `DrkeyControl`: the DRKey secret values the Z-Lane classifier derives
//! its HVF keys from.

use std::sync::Arc;

use control::error::CtlError;
use control::plane::{change_all, read_all, Plane};
use control::service::{blocking, Reply};
use control::text;
use tonic::Request;

use crate::pb;

/// Stages holding DRKey secret values (the Z-Lane classifier's `RouterKeys`).
const KINDS: &[&str] = &["zlane-classify"];

/// The service, ready for the router's gRPC server.
pub(crate) struct Service(pub Arc<Plane>);

control::control_service!(
    Service,
    pb::drkey_control_server::DrkeyControlServer<DrkeySvc>,
    DrkeySvc,
    pb::FILE_DESCRIPTOR_SET,
    read_only = ["ListEpochs"]
);

/// `DrkeyControl`.
pub struct DrkeySvc(pub Arc<Plane>);

/// Epoch length bounds of the DRKey sheet: 6 minutes to 3 days.
const EPOCH_MIN_S: u64 = 360;
const EPOCH_MAX_S: u64 = 3 * 86_400;

#[tonic::async_trait]
impl pb::drkey_control_server::DrkeyControl for DrkeySvc {
    async fn list_epochs(&self, _: Request<pb::ListEpochsRequest>) -> Reply<pb::EpochList> {
        let plane = self.0.clone();
        blocking(move || {
            let v = read_all(&plane, KINDS, |s: &mut zlane::ZlaneClassify, now| {
                let mut e: Vec<pb::Epoch> = s
                    .classifier()
                    .keys()
                    .cache()
                    .epochs()
                    .map(|e| pb::Epoch {
                        not_before_unix: u64::from(e.begin()),
                        not_after_unix: u64::from(e.end()),
                        current: e.contains(now.unix_ns),
                    })
                    .collect();
                e.sort_by_key(|x| x.not_before_unix);
                Ok(e)
            })?;
            // A worker installs a fixed secret value's epoch on its first
            // burst: list the union over workers.
            let mut epochs: Vec<pb::Epoch> = Vec::new();
            for e in v.into_iter().flatten().flatten() {
                if !epochs.iter().any(|x| x.not_before_unix == e.not_before_unix) {
                    epochs.push(e);
                }
            }
            epochs.sort_by_key(|x| x.not_before_unix);
            Ok(pb::EpochList { epochs })
        })
        .await
    }
    async fn install_secret(
        &self,
        req: Request<pb::InstallSecretRequest>,
    ) -> Reply<pb::ApplyReply> {
        let r = req.into_inner();
        let k: [u8; 16] = text::hex_bytes("secret_hex", &r.secret_hex, 16)?
            .try_into()
            .map_err(|_| CtlError::invalid("secret_hex: not 16 bytes"))?;
        let len = r.not_after_unix.saturating_sub(r.not_before_unix);
        if !(EPOCH_MIN_S..=EPOCH_MAX_S).contains(&len) {
            return Err(CtlError::invalid(format!(
                "not_after_unix - not_before_unix: {len} s is not in {EPOCH_MIN_S}..={EPOCH_MAX_S}"
            ))
            .into());
        }
        if r.not_after_unix > u64::from(u32::MAX) {
            return Err(CtlError::invalid("not_after_unix: beyond the 4-byte epoch field").into());
        }
        let epoch = drkey::Epoch::new(r.not_before_unix as u32, r.not_after_unix as u32)
            .map_err(|e| CtlError::invalid(format!("epoch: {e}")))?;
        let plane = self.0.clone();
        blocking(move || {
            change_all(
                &plane,
                KINDS,
                format!(
                    "DRKey secret value for [{}, {}) installed",
                    r.not_before_unix, r.not_after_unix
                ),
                move |s: &mut zlane::ZlaneClassify, _| {
                    let sv = drkey::SecretValue::from_key(
                        mac::Key::from(k),
                        drkey::Protocol::GENERIC,
                        epoch,
                    );
                    s.classifier_mut()
                        .keys_mut()
                        .install(sv)
                        .map_err(|e| CtlError::invalid(format!("epoch: {e}")))
                },
            )
        })
        .await
    }
}
