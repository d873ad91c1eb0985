//! FAIR (feature `fair`): the `fair-source`, `fair-transit`,
//! `fair-destination` and `suspicious-bit` stage kinds, the `fair` template
//! ([`templates`](mod@templates)), the `FairControl` service with the protest verifier
//! ([`protest`], `[control.fair]`) and `ctl fair` ([`cli`]).
//!
//! The kinds are configured by the protocol crate's own types
//! ([`fair::config`]), parsed and validated once, with the ports they name
//! checked against the router's; a live change (`ctl stage-params`,
//! `ctl fair set-policy`) is applied in place by the running stages, which
//! keep their channels' sequence counters, bucket levels, monitors, key
//! rings and counters (see [`fair::stage`] for what needs a restart). What
//! the sans-IO crate leaves to its embedder is here: the header store of
//! `fair-destination` ([`DestSink`], files under `store_dir`) and the wall
//! clock the suspicious sources are flagged with.
//!
//! **Decision (data keys from configuration):** a FAIR transit AS rotates its
//! data key every Δ_K seconds. The configuration holds one 16-byte master
//! key; the key of each epoch of `[keys_from, keys_until)` is derived from
//! it ([`fair::keys::data_epoch_key`]). A deployment would push fresh
//! random keys from its control plane (`FairControl.RotateKey`); the
//! derivation only makes the configuration reproducible, and verifiers can
//! re-derive the keys from the master. The router's own protest verifier
//! does not re-derive: it reads the ring the live stage holds
//! (`FairTransit::keys`), so keys rotated in through the control API verify
//! too.
//!
//! **Decision (one worker):** `fair-source` and `fair-destination` run on
//! one worker: `(ts, seqno)` must be unique per channel (the sequence
//! counter belongs to the stage), and the destination's streaming monitor
//! must see a channel's whole traffic to compute what verifiers will (RSS
//! may spread one channel over workers). The suspicious-port bitmap of
//! `suspicious-bit` is per worker (each worker flags the ports it sees
//! suspicious traffic on); its suspicious sources are configuration,
//! identical on every worker.

use std::sync::Arc;

use fair::config::{
    FairDestinationConfig, FairSourceConfig, FairTransitConfig, SuspiciousBitConfig,
};
use fair::dest::FairDestination;
use fair::sb::{SusPorts, SuspiciousBit};
use fair::source::FairSource;
use fair::transit::FairTransit;
use pipeline::{PacketBuf, Stage};
use runtime::registry::parse_validated;
use runtime::{BuildContext, ConfigError, Registry};

use crate::params::config_err;

#[cfg(feature = "control")]
pub mod cli;
#[cfg(feature = "control")]
pub mod protest;
#[cfg(feature = "control")]
mod service;
mod sink;
pub mod templates;

pub use sink::DestSink;
pub use templates::{fair_template, FairTemplateParams};

/// Registers the `fair` template.
pub fn templates(t: &mut runtime::Templates) {
    t.add("fair", fair_template);
}

/// Registers the adapter's stage kinds.
pub fn register<B: PacketBuf + Send + 'static>(r: &mut Registry<B>) {
    r.stage::<FairTransitConfig>("fair-transit", build_transit);
    r.stage::<FairSourceConfig>("fair-source", build_source);
    r.stage_with("fair-destination", parse_destination, build_destination);
    r.stage_with("suspicious-bit", parse_sb, build_sb);
}

fn parse_destination(
    ctx: &BuildContext,
    p: &toml::Table,
) -> Result<FairDestinationConfig, ConfigError> {
    let c: FairDestinationConfig = parse_validated(ctx, p)?;
    for (i, pn) in c.port_neighbors.iter().enumerate() {
        ctx.check_port(&format!("port_neighbors[{i}].port"), pn.port)?;
    }
    Ok(c)
}

fn parse_sb(ctx: &BuildContext, p: &toml::Table) -> Result<SuspiciousBitConfig, ConfigError> {
    let c: SuspiciousBitConfig = parse_validated(ctx, p)?;
    for (i, port) in c.external_ports.iter().flatten().enumerate() {
        ctx.check_port(&format!("external_ports[{i}]"), *port)?;
    }
    Ok(c)
}

/// Refuses a build for more than one worker (see the module docs).
fn one_worker(ctx: &BuildContext, kind: &str) -> Result<(), ConfigError> {
    if ctx.workers > 1 {
        return Err(ConfigError::at("", format!("{kind} supports one worker")));
    }
    Ok(())
}

fn build_transit<B: PacketBuf>(
    c: &FairTransitConfig,
    ctx: &BuildContext,
) -> Result<Box<dyn Stage<B>>, ConfigError> {
    let st = FairTransit::from_config(c, ctx.worker).map_err(|e| config_err("keys_until", e))?;
    Ok(Box::new(st))
}

fn build_source<B: PacketBuf>(
    c: &FairSourceConfig,
    ctx: &BuildContext,
) -> Result<Box<dyn Stage<B>>, ConfigError> {
    one_worker(ctx, "fair-source")?;
    Ok(Box::new(FairSource::from_config(c)))
}

fn build_destination<B: PacketBuf>(
    c: &FairDestinationConfig,
    ctx: &BuildContext,
) -> Result<Box<dyn Stage<B>>, ConfigError> {
    one_worker(ctx, "fair-destination")?;
    let sink = DestSink::open(c, ctx.worker, unix_now())?;
    Ok(Box::new(FairDestination::from_config(c, sink)))
}

fn build_sb<B: PacketBuf>(
    c: &SuspiciousBitConfig,
    _ctx: &BuildContext,
) -> Result<Box<dyn Stage<B>>, ConfigError> {
    Ok(Box::new(SuspiciousBit::from_config(c, Arc::new(SusPorts::default()), unix_now())))
}

/// The wall clock in Unix seconds (a runtime may read clocks).
fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The protest verifier's configuration from `[control.fair]`.
#[cfg(feature = "control")]
pub(crate) fn protest_config(
    table: &toml::Table,
) -> Result<protest::FairProtestConfig, control::config::ControlConfigError> {
    let c: protest::FairProtestConfig =
        table.clone().try_into().map_err(|e: toml::de::Error| {
            control::config::ControlConfigError {
                key: "fair".into(),
                reason: e.message().to_string(),
            }
        })?;
    c.load()?;
    Ok(c)
}

/// `FairControl` for `plane`, with the protest verifier if `[control.fair]`
/// configures one.
#[cfg(feature = "control")]
pub(crate) fn services(
    plane: &Arc<control::Plane>,
    cfg: &control::ControlConfig,
) -> Result<Vec<Box<dyn control::ControlService>>, control::config::ControlConfigError> {
    let desk = match cfg.protocols.get("fair") {
        Some(t) => {
            Some(Arc::new(std::sync::Mutex::new(protest::Desk::new(protest_config(t)?.load()?))))
        }
        None => None,
    };
    Ok(vec![Box::new(service::Service(plane.clone(), desk))])
}

#[cfg(test)]
mod tests;
