//! Z-Lane: the `zlane-classify` stage (EPIC-Z HVF check, R/N/G/A/U
//! classes, per-AS buckets), the `zlane-gateway` stage (a source AS's
//! gateway), the five-queue `zlane` egress, the `epic-z` template
//! ([`templates`]) and the `ZlaneControl` and `DrkeyControl` services.
//!
//! Each kind's configuration is the protocol crate's own type
//! ([`zlane::RouterConfig`], [`zlane::GatewayConfig`],
//! [`zlane::SchedulerConfig`]), parsed and validated once; a live change
//! applies in place ([`pipeline::Element::reconfigure`]): bucket levels,
//! key caches, host tables, queued packets and counters survive it.

use pipeline::{Egress, PacketBuf, Stage};
use runtime::{BuildContext, ConfigError, Registry};
use zlane::{
    Classifier, Gateway, GatewayConfig, RouterConfig, Scheduler, SchedulerConfig, ZlaneClassify,
    ZlaneGateway,
};

#[cfg(feature = "control")]
pub mod cli;
#[cfg(feature = "control")]
mod drkey;
#[cfg(feature = "control")]
pub mod drkey_cli;
#[cfg(feature = "control")]
mod rates;
#[cfg(feature = "control")]
mod service;
pub mod templates;

pub use templates::templates;

/// Registers `zlane-classify`, `zlane-gateway` and the `zlane` egress.
pub fn register<B: PacketBuf + Send + 'static>(r: &mut Registry<B>) {
    r.stage::<RouterConfig>("zlane-classify", build_classify);
    r.stage::<GatewayConfig>("zlane-gateway", build_gateway);
    r.egress::<SchedulerConfig>("zlane", build_scheduler);
}

/// A `zlane-classify` stage with the keys its configuration names.
fn build_classify<B: PacketBuf>(
    c: &RouterConfig,
    _ctx: &BuildContext,
) -> Result<Box<dyn Stage<B>>, ConfigError> {
    Ok(Box::new(ZlaneClassify::new(Classifier::new(c, c.keys(), 0)?)))
}

fn build_gateway<B: PacketBuf>(
    c: &GatewayConfig,
    _ctx: &BuildContext,
) -> Result<Box<dyn Stage<B>>, ConfigError> {
    Ok(Box::new(ZlaneGateway::new(Gateway::new(c.clone())?)))
}

fn build_scheduler<B: PacketBuf + Send + 'static>(
    c: &SchedulerConfig,
    _ctx: &BuildContext,
) -> Result<Box<dyn Egress<B>>, ConfigError> {
    Ok(Box::new(Scheduler::<B>::new(c.clone())?))
}

/// `ZlaneControl` and `DrkeyControl` for `plane`.
#[cfg(feature = "control")]
pub(crate) fn services(
    plane: &std::sync::Arc<control::Plane>,
) -> Vec<Box<dyn control::ControlService>> {
    vec![Box::new(service::Service(plane.clone())), Box::new(drkey::Service(plane.clone()))]
}

#[cfg(test)]
mod tests {
    use pipeline::{Batch, Now, Reconfigured};
    use runtime::Catalog;

    use super::*;

    const SV: &str = "00112233445566778899aabbccddeeff";

    fn ctx() -> BuildContext {
        BuildContext { worker: 0, workers: 1, ports: vec![0, 1] }
    }

    fn table(text: &str) -> toml::Table {
        toml::from_str(text).unwrap()
    }

    /// A `zlane-classify` table with the keys of `extra` set.
    fn classify(extra: &str) -> toml::Table {
        let mut t =
            table(&format!("local_ia = \"1-ff00:0:110\"\nsv = \"{SV}\"\nepoch = [0, 4000000000]"));
        t.extend(table(extra));
        t
    }

    #[test]
    fn kinds_build_and_errors_name_their_key() {
        let r = Registry::<Vec<u8>>::with::<crate::All>();
        let ok = classify("rates = [{ as = \"1-ff00:0:111\", bps = 1000000 }]");
        assert_eq!(r.build_stage("zlane-classify", &ctx(), &ok).unwrap().name(), "zlane-classify");
        let all = classify("host_key_cache = 64\nstrict_flags = false\nreplay_pps = 1000");
        assert!(r.build_stage("zlane-classify", &ctx(), &all).is_ok());
        assert!(r.build_stage("zlane-gateway", &ctx(), &toml::Table::new()).is_ok());
        let t = table("capacity_bps = 1000000000");
        assert_eq!(r.build_egress("zlane", &ctx(), &t).unwrap().name(), "zlane-sched");
        for (kind, t, key) in [
            ("zlane-classify", classify("mu_g = 2.0"), "mu_g"),
            ("zlane-classify", classify("rates = [{ isd = 2, bps = 0 }]"), "rates[0].bps"),
            ("zlane-classify", classify("epoch = [9, 1]"), "epoch"),
            ("zlane-classify", classify("rates = [{ isd = 2, bpz = 1 }]"), "rates[0].bpz"),
            (
                "zlane-gateway",
                table("hops = [{ mac = \"0102030405ff\", ia = \"1-1\" }]"),
                "hops[0].ia",
            ),
            (
                "zlane-gateway",
                table("prefixes = [{ prefix = \"10.0.0.0\", bps = 1 }]"),
                "prefixes[0].prefix",
            ),
        ] {
            let e = r.build_stage(kind, &ctx(), &t).err().expect("refused");
            assert_eq!(e.key, key, "{e}");
        }
        let e = r.build_egress("zlane", &ctx(), &table("capacity_bps = 0")).err().unwrap();
        assert_eq!(e.key, "capacity_bps");
    }

    /// A parameter change parsed by the registry reaches the running stage
    /// in place (what the control plane does on every worker).
    #[test]
    fn live_changes_reach_the_running_elements() {
        let r = Registry::<Vec<u8>>::with::<crate::All>();
        let rates = |bps| classify(&format!("rates = [{{ as = \"1-ff00:0:111\", bps = {bps} }}]"));
        let mut stage = r.build_stage("zlane-classify", &ctx(), &rates(1_000_000)).unwrap();
        let now = Now::from_unix_ns(0);
        let same = r.parse_stage("zlane-classify", &ctx(), &rates(1_000_000)).unwrap();
        assert_eq!(stage.reconfigure(&*same, now), Ok(Reconfigured::Unchanged));
        let faster = r.parse_stage("zlane-classify", &ctx(), &rates(5_000_000)).unwrap();
        assert_eq!(stage.reconfigure(&*faster, now), Ok(Reconfigured::APPLIED));
        stage.process(&mut Batch::new(), now);
        let z = stage.as_any_mut().unwrap().downcast_mut::<ZlaneClassify>().unwrap();
        let o = zlane::Origin::As("1-ff00:0:111".parse().unwrap());
        assert_eq!(z.classifier().bucket(o).unwrap().rate_units(), 50);
        let mut e = r.build_egress("zlane", &ctx(), &table("capacity_bps = 1000000")).unwrap();
        e.enqueue(vec![0; 100], zlane::class::A, now).unwrap();
        let shrunk = table("capacity_bps = 2000000\nqueue_packets = [1, 1, 1, 1, 1]");
        let shrunk = r.parse_egress("zlane", &ctx(), &shrunk).unwrap();
        assert_eq!(e.reconfigure(&*shrunk, now), Ok(Reconfigured::APPLIED));
        assert_eq!(e.queued(), 1, "the queued packet stays");
    }
}
