//! SIBRA (feature `sibra`): the `sibra-transit` and `sibra-control` stage
//! kinds, the `sibra` template ([`templates`](mod@templates)), the `SibraControl` service
//! and `ctl sibra` ([`cli`]).
//!
//! Both kinds are configured by the protocol crate's own types
//! ([`sibra::config::TransitConfig`], [`sibra::config::ControlConfig`]),
//! parsed and validated once, with the ports they name checked against the
//! router's; a live change (`ctl stage-params`, `ctl sibra set-link-split`)
//! is applied in place by the running stages, which keep their
//! reservations, revocations, blacklist and counters (see
//! [`sibra::stage::transit`] and [`sibra::stage::control`] for what needs a
//! restart).

use pipeline::{PacketBuf, Stage};
use runtime::registry::parse_validated;
use runtime::{BuildContext, ConfigError, Registry};
use sibra::config::{ControlConfig, TransitConfig};
use sibra::stage::{SibraControl, SibraTransit};
use sibra::Tick;

use crate::params::config_err;

#[cfg(feature = "control")]
pub mod cli;
#[cfg(feature = "control")]
mod service;
pub mod templates;

pub use templates::{sibra_template, SibraTemplateParams};

/// Registers the `sibra` template.
pub fn templates(t: &mut runtime::Templates) {
    t.add("sibra", sibra_template);
}

/// Registers `sibra-transit` and `sibra-control`.
pub fn register<B: PacketBuf + Send + 'static>(r: &mut Registry<B>) {
    r.stage_with("sibra-transit", parse_transit, build_transit);
    r.stage_with("sibra-control", parse_control, build_control);
}

/// Checks that every port a configuration names is one of the router's.
fn check_ports(ctx: &BuildContext, ports: Vec<(String, u16)>) -> Result<(), ConfigError> {
    ports.iter().try_for_each(|(key, port)| ctx.check_port(key, *port))
}

fn parse_transit(ctx: &BuildContext, p: &toml::Table) -> Result<TransitConfig, ConfigError> {
    let c: TransitConfig = parse_validated(ctx, p)?;
    check_ports(ctx, c.ports())?;
    Ok(c)
}

fn parse_control(ctx: &BuildContext, p: &toml::Table) -> Result<ControlConfig, ConfigError> {
    let c: ControlConfig = parse_validated(ctx, p)?;
    check_ports(ctx, c.ports())?;
    Ok(c)
}

fn build_transit<B: PacketBuf>(
    c: &TransitConfig,
    _ctx: &BuildContext,
) -> Result<Box<dyn Stage<B>>, ConfigError> {
    Ok(Box::new(SibraTransit::from_config(c).map_err(|e| config_err("monitor", e))?))
}

fn build_control<B: PacketBuf>(
    c: &ControlConfig,
    _ctx: &BuildContext,
) -> Result<Box<dyn Stage<B>>, ConfigError> {
    // Admission state starts at the epoch and moves to the router's time
    // with the first packet or command: that clock may be virtual (the
    // synthetic backend's) or pinned, so the wall clock is not it.
    let s = SibraControl::from_config(c, Tick::from_unix_secs(0))
        .map_err(|e| config_err("interfaces", e))?;
    Ok(Box::new(s))
}

/// `SibraControl` for `plane`.
#[cfg(feature = "control")]
pub(crate) fn services(
    plane: &std::sync::Arc<control::Plane>,
) -> Vec<Box<dyn control::ControlService>> {
    vec![Box::new(service::Service(plane.clone()))]
}

#[cfg(test)]
mod tests;
