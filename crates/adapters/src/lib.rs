//! One adapter per protocol: everything the router needs from a protocol
//! crate, in one folder each, so that the runtime and the control plane
//! stay generic (they know the stage contract, never a protocol's
//! parameters).
//!
//! | folder | protocol | stage / egress kinds | templates |
//! |---|---|---|---|
//! | [`scion`] | SCION forwarding | `scion-forward` | `scion` |
//! | [`zlane`] | Z-Lane on EPIC-Z/DRKey | `zlane-classify`, `zlane-gateway`, egress `zlane` | `epic-z` |
//! | [`sibra`] | SIBRA reservations | `sibra-transit`, `sibra-control` | `sibra` |
//! | [`flowpolice`] | FlowPolice | `flowpolice` | `flowpolice` |
//! | [`fair`] | FAIR | `fair-transit`, `fair-source`, `fair-destination`, `suspicious-bit` | `fair` |
//!
//! A router build names its protocols once, as [`All`]:
//!
//! ```
//! let cfg = runtime::config::load_file(
//!     &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/default.toml"),
//! )
//! .unwrap();
//! runtime::check::<adapters::All>(&cfg).unwrap();
//! ```
//!
//! Each protocol is behind a cargo feature of its name (all on by default),
//! so that a build can leave a protocol out. Feature `control` (on by
//! default) adds what the control plane needs: the gRPC services
//! (`control::Services` for [`All`]), the generated messages and clients
//! (`pb`, `ProtocolClients`) and the `ctl` subcommands (each protocol's
//! `cli`). Without it the crate is the stage kinds and templates only, and
//! builds without tonic, prost, tokio or clap (as the fuzz targets do).
//!
//! Key material in parameters is hex (32 digits = 16 bytes). A production
//! deployment would load it from a key service; the router only needs it at
//! construction.

#[cfg(feature = "control")]
use std::sync::Arc;

#[cfg(feature = "control")]
use control::config::{ControlConfig, ControlConfigError};
#[cfg(feature = "control")]
use control::{ControlService, Plane};
use pipeline::PacketBuf;
use runtime::{Registry, Templates};

mod params;

/// Messages, clients and servers generated from the adapters' `.proto` files.
#[cfg(feature = "control")]
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod pb {
    tonic::include_proto!("ddos.control.v1");

    // The router's own messages (`ApplyReply`, counters...), so that one
    // module names every message of the control API.
    pub use control::pb::*;

    /// The encoded descriptor set of the adapters' protos (for reflection).
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        include_bytes!(concat!(env!("OUT_DIR"), "/adapters_descriptor.bin"));
}

#[cfg(feature = "fair")]
pub mod fair;
#[cfg(feature = "flowpolice")]
pub mod flowpolice;
#[cfg(feature = "scion")]
pub mod scion;
#[cfg(feature = "sibra")]
pub mod sibra;
#[cfg(feature = "zlane")]
pub mod zlane;

/// Every protocol of this build (see the crate docs): what `router`,
/// `trafgen` and `ctl` run with.
pub struct All;

impl runtime::Protocols for All {
    fn register<B: PacketBuf + Send + 'static>(r: &mut Registry<B>) {
        #[cfg(feature = "scion")]
        scion::register(r);
        #[cfg(feature = "zlane")]
        zlane::register(r);
        #[cfg(feature = "sibra")]
        sibra::register(r);
        #[cfg(feature = "flowpolice")]
        flowpolice::register(r);
        #[cfg(feature = "fair")]
        fair::register(r);
        let _ = r;
    }

    fn templates(t: &mut Templates) {
        #[cfg(feature = "scion")]
        scion::templates(t);
        #[cfg(feature = "zlane")]
        zlane::templates(t);
        #[cfg(feature = "sibra")]
        sibra::templates(t);
        #[cfg(feature = "flowpolice")]
        flowpolice::templates(t);
        #[cfg(feature = "fair")]
        fair::templates(t);
        let _ = t;
    }
}

#[cfg(feature = "control")]
impl control::Services for All {
    fn check(cfg: &ControlConfig) -> Result<(), ControlConfigError> {
        for (name, table) in &cfg.protocols {
            match name.as_str() {
                #[cfg(feature = "fair")]
                "fair" => {
                    fair::protest_config(table)?;
                }
                _ => {
                    let _ = table;
                    return Err(ControlConfigError {
                        key: name.clone(),
                        reason: "no protocol of this build reads this table (known: fair)".into(),
                    });
                }
            }
        }
        Ok(())
    }

    fn services(
        plane: &Arc<Plane>,
        cfg: &ControlConfig,
    ) -> Result<Vec<Box<dyn ControlService>>, ControlConfigError> {
        let mut v: Vec<Box<dyn ControlService>> = Vec::new();
        #[cfg(feature = "zlane")]
        v.extend(zlane::services(plane));
        #[cfg(feature = "sibra")]
        v.extend(sibra::services(plane));
        #[cfg(feature = "flowpolice")]
        v.extend(flowpolice::services(plane));
        #[cfg(feature = "fair")]
        v.extend(fair::services(plane, cfg)?);
        let _ = (plane, cfg);
        Ok(v)
    }
}

/// Clients of the protocol services over one control connection, e.g.
/// `client.sibra().list_reservations(..)`.
#[cfg(feature = "control")]
pub trait ProtocolClients {
    /// `ZlaneControl`.
    #[cfg(feature = "zlane")]
    fn zlane(&self) -> pb::zlane_control_client::ZlaneControlClient<control::client::Authed>;
    /// `DrkeyControl`.
    #[cfg(feature = "zlane")]
    fn drkey(&self) -> pb::drkey_control_client::DrkeyControlClient<control::client::Authed>;
    /// `SibraControl`.
    #[cfg(feature = "sibra")]
    fn sibra(&self) -> pb::sibra_control_client::SibraControlClient<control::client::Authed>;
    /// `FlowPoliceControl`.
    #[cfg(feature = "flowpolice")]
    fn flowpolice(
        &self,
    ) -> pb::flow_police_control_client::FlowPoliceControlClient<control::client::Authed>;
    /// `FairControl`.
    #[cfg(feature = "fair")]
    fn fair(&self) -> pb::fair_control_client::FairControlClient<control::client::Authed>;
}

#[cfg(feature = "control")]
impl ProtocolClients for control::client::Client {
    #[cfg(feature = "zlane")]
    fn zlane(&self) -> pb::zlane_control_client::ZlaneControlClient<control::client::Authed> {
        pb::zlane_control_client::ZlaneControlClient::new(self.authed())
    }
    #[cfg(feature = "zlane")]
    fn drkey(&self) -> pb::drkey_control_client::DrkeyControlClient<control::client::Authed> {
        pb::drkey_control_client::DrkeyControlClient::new(self.authed())
    }
    #[cfg(feature = "sibra")]
    fn sibra(&self) -> pb::sibra_control_client::SibraControlClient<control::client::Authed> {
        pb::sibra_control_client::SibraControlClient::new(self.authed())
    }
    #[cfg(feature = "flowpolice")]
    fn flowpolice(
        &self,
    ) -> pb::flow_police_control_client::FlowPoliceControlClient<control::client::Authed> {
        pb::flow_police_control_client::FlowPoliceControlClient::new(self.authed())
    }
    #[cfg(feature = "fair")]
    fn fair(&self) -> pb::fair_control_client::FairControlClient<control::client::Authed> {
        pb::fair_control_client::FairControlClient::new(self.authed())
    }
}
