//! The routers under test: a Z-Lane border router (the real classifier,
//! forwarder and five-queue scheduler) and the SCION forwarder every
//! router kind runs.

use pipeline::{Frame, Pipeline};
use scion::{ForwardConfig, Forwarder, InterfaceTable, ScionForward};
use zlane::config::{RateConfig, RouterConfig};
use zlane::{Bounds, Classifier, Scheduler, SchedulerConfig, ZlaneClassify};

use crate::scenarios::zworld::{AsKeys, IF_OUT};
use crate::scenarios::ScenarioError;

/// The SCION forwarder of AS `k`: interface [`IF_OUT`] on port 1.
pub(super) fn forwarder(k: &AsKeys) -> ScionForward {
    ScionForward::new(Forwarder::new(
        k.fwd.clone(),
        InterfaceTable::new().with(IF_OUT, 1),
        ForwardConfig { check_ingress: false, ..ForwardConfig::default() },
    ))
}

/// Z-Lane buckets count in 100 kbit/s units: `bps` (a scaled rate) must be
/// a whole number of them.
pub(super) fn check_scale(what: &str, bps: f64) -> Result<(), ScenarioError> {
    let units = bps / 100_000.0;
    if (units - units.round()).abs() > 1e-6 {
        return Err(ScenarioError::Param(format!(
            "{what} = {bps} bit/s after scaling is not a whole number of 100 kbit/s bucket units; choose another scale"
        )));
    }
    Ok(())
}

/// The Z-Lane border router of AS `k` in front of one egress of
/// `capacity_bps`: classification with the guaranteed `rates` (buckets
/// sharing `bucket_burst_bytes`) and forwarding, then the scheduler with
/// `bounds` and `queue_packets` per queue. The G policer's burst covers a
/// simultaneous burst of every bucket and one more.
pub(super) fn zlane_router(
    k: &AsKeys,
    capacity_bps: u64,
    bounds: Bounds,
    bucket_burst_bytes: u16,
    queue_packets: usize,
    rates: Vec<RateConfig>,
) -> Result<(Pipeline<Frame>, Scheduler<Frame>), ScenarioError> {
    let buckets = rates.len() as u64;
    let rcfg = RouterConfig {
        local_ia: k.ia,
        capacity_bps,
        mu_g: bounds.g,
        burst: bucket_burst_bytes,
        rates,
        ..Default::default()
    };
    let classifier = Classifier::new(&rcfg, k.sv_keys(), 0)?;
    let pipeline = Pipeline::new().with(ZlaneClassify::new(classifier)).with(forwarder(k));
    let scheduler = Scheduler::new(SchedulerConfig {
        capacity_bps,
        bounds,
        queue_packets: [queue_packets; 5],
        burst_bytes: 16 * 1500,
        g_burst_bytes: u64::from(bucket_burst_bytes) * (buckets + 1),
        quantum_bytes: 1514,
    })?;
    Ok((pipeline, scheduler))
}
