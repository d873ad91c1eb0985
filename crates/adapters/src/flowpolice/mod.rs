//! `flowpolice` stage and template (feature `flowpolice`).
//!
//! The stage's configuration is the protocol crate's own
//! [`flowpolice::Config`] (parsed and validated by the registry); a live
//! change is applied in place by [`flowpolice::FlowPolice::apply_config`],
//! keeping the flow table, the flows' windows and the counters.
//!
//! Pair the stage with a `priority-caps` egress: FlowPolice only assigns
//! classes (requests `16 + level`, privileged 2, best effort 1, legacy 0) and
//! relies on strict priority with capped request and legacy channels
//! downstream (see `flowpolice::egress` for the reference layout).

use flowpolice::{Config, FlowPolice};
use pipeline::{PacketBuf, Stage};
use runtime::{BuildContext, ConfigError, Registry};

#[cfg(feature = "control")]
pub mod cli;
#[cfg(feature = "control")]
mod service;
mod templates;

pub use templates::{flowpolice_template, FpKind, FpTemplateParams};

/// Registers the `flowpolice` template.
pub fn templates(t: &mut runtime::Templates) {
    t.add("flowpolice", flowpolice_template);
}

/// Registers the adapter's stage kinds.
pub fn register<B: PacketBuf + Send + 'static>(r: &mut Registry<B>) {
    r.stage::<Config>("flowpolice", build);
}

/// Builds a `flowpolice` stage (allocates its flow table).
fn build<B: PacketBuf + Send + 'static>(
    c: &Config,
    _ctx: &BuildContext,
) -> Result<Box<dyn Stage<B>>, ConfigError> {
    let stage = FlowPolice::new(c.clone()).map_err(|e| ConfigError::at(e.key(), e.to_string()))?;
    Ok(Box::new(stage))
}

/// `FlowPoliceControl` for `plane`.
#[cfg(feature = "control")]
pub(crate) fn services(
    plane: &std::sync::Arc<control::Plane>,
) -> Vec<Box<dyn control::ControlService>> {
    vec![Box::new(service::Service(plane.clone()))]
}

#[cfg(test)]
mod tests {
    use pipeline::{Batch, Element, Now, Reconfigured, Refused, Stage};
    use runtime::registry::{BuildContext, Catalog, Registry};
    use runtime::synthetic::VIRTUAL_UNIX_START_NS;
    use runtime::templates::TemplateCtx;

    const SEEDS: &str = "seeds = { root = \
        \"5eed000000000000000000000000000000000000000000000000000000000001\", \
        first_epoch = 29_453_760, epochs = 1440 }";
    const STAGE: &str = "capability_key = \"c0ffee00c0ffee00c0ffee00c0ffee00\"\n\
        table_key = \"0123456789abcdef0123456789abcdef\"\nslots = 1024\n\
        puzzle = { min_level = 4 }";

    fn ctx() -> BuildContext {
        BuildContext { worker: 0, workers: 1, ports: vec![0, 1] }
    }

    /// The stage's table with the keys of `extra` added or replaced.
    fn table(extra: &str) -> toml::Table {
        let mut t: toml::Table = toml::from_str(&format!("{STAGE}\n{SEEDS}")).unwrap();
        t.extend(toml::from_str::<toml::Table>(extra).unwrap());
        t
    }

    #[test]
    fn params_are_validated_with_key_paths() {
        let r = Registry::<Vec<u8>>::with::<crate::All>();
        let build = |extra: &str| {
            r.build_stage("flowpolice", &ctx(), &table(extra)).map(|s| s.name().to_string())
        };
        assert_eq!(build("").unwrap(), "flowpolice");
        let key = |extra: &str| build(extra).err().unwrap().key;
        assert_eq!(key("params = { beta = 1.5 }"), "params.beta");
        assert_eq!(key("params = { k_th = 70000 }"), "params.k_th");
        assert_eq!(key("params = { over_window = \"sometimes\" }"), "params.over_window");
        assert_eq!(key("puzzle = { min_level = 65 }"), "puzzle.min_level");
        assert_eq!(key("request_cap = { rate_mbps = 0 }"), "request_cap.rate_mbps");
        assert_eq!(
            key("legacy_cap = { rate_mbps = 1, burst_bytes = 10 }"),
            "legacy_cap.burst_bytes"
        );
        assert_eq!(key("link = \"atm\""), "link");
        assert_eq!(key("hint_lag = 0"), "hint_lag");
        assert_eq!(key("hint_lag = 33"), "hint_lag");
        assert_eq!(key("probe_window = 0"), "probe_window");
        assert_eq!(key("protected_v4 = [\"10.0.0.1\", \"10.0.0.1\"]"), "protected_v4[1]");
        assert_eq!(key("capability_key = \"c0ffee\""), "capability_key");
        assert_eq!(key("seeds = { root = \"00\", first_epoch = 1, epochs = 1 }"), "seeds.root");
        let no_epochs = SEEDS.replace("epochs = 1440", "epochs = 0");
        assert_eq!(key(&no_epochs), "seeds.epochs");
        assert_eq!(build("hint_lag = 32\nslot_hints = false").unwrap(), "flowpolice");
        // The insertion prefetch key reaches the table (default: whole chunk
        // for this small table).
        let whole = |extra: &str| {
            let mut s = r.build_stage("flowpolice", &ctx(), &table(extra)).unwrap();
            let fp = s.as_any_mut().and_then(|a| a.downcast_mut::<flowpolice::FlowPolice>());
            fp.unwrap().router().table().prefetches_whole_chunk()
        };
        assert!(whole(""));
        assert!(!whole("insert_whole_chunk = false"));
        assert_eq!(key("insert_whole_chunk = 1"), "insert_whole_chunk");
    }

    /// Requests of 4 flows (puzzle level 4) through `stage` at `now`.
    fn requests(stage: &mut dyn Stage<Vec<u8>>, now: Now) {
        let tpl: toml::Table = toml::from_str(&format!("kind = \"request\"\n{SEEDS}")).unwrap();
        let ctx = TemplateCtx::new(4, [0; runtime::templates::TAG_LEN]);
        let mut batch = Batch::new();
        for p in super::flowpolice_template(&tpl, &ctx).unwrap() {
            batch.push(p, 0).unwrap();
        }
        stage.process(&mut batch, now);
    }

    fn counters(e: &dyn Element) -> Vec<(&'static str, u64)> {
        let mut v = Vec::new();
        e.named_counters(&mut |n, x| v.push((n, x)));
        e.named_gauges(&mut |n, x| v.push((n, x)));
        v
    }

    fn flowpolice(s: &mut dyn Stage<Vec<u8>>) -> &mut flowpolice::FlowPolice {
        s.as_any_mut().and_then(|a| a.downcast_mut::<flowpolice::FlowPolice>()).unwrap()
    }

    #[test]
    fn a_live_change_through_the_registry_keeps_flows_and_counters() {
        let r = Registry::<Vec<u8>>::with::<crate::All>();
        let parse = |extra: &str| r.parse_stage("flowpolice", &ctx(), &table(extra)).unwrap();
        let mut stage = r.build_stage("flowpolice", &ctx(), &table("")).unwrap();
        let t0 = Now::from_unix_ns(VIRTUAL_UNIX_START_NS);
        requests(&mut *stage, t0);
        let before = counters(&*stage);
        assert!(before.contains(&("table_entries", 4)), "{before:?}");
        assert!(before.contains(&("flows_created", 4)), "{before:?}");
        // The same parameters: nothing to do.
        assert_eq!(stage.reconfigure(&*parse(""), t0), Ok(Reconfigured::Unchanged));
        // Algorithm 1, a cap and the capability key change in place.
        let next = parse(
            "params = { delta = 9, s_th = 50 }\nlegacy_cap = { rate_mbps = 10 }\n\
             capability_key = \"00112233445566778899aabbccddeeff\"",
        );
        assert_eq!(stage.reconfigure(&*next, t0), Ok(Reconfigured::APPLIED));
        let fp = flowpolice(&mut *stage);
        assert_eq!((fp.router().params().delta, fp.router().params().s_th), (9, 50));
        assert_eq!(fp.router().table().len(), 4, "the flows stay");
        // More requests of the same flows: found, not created; counters go on.
        requests(&mut *stage, t0.plus_ns(1_000_000));
        let after = counters(&*stage);
        for ((name, a), (_, b)) in before.iter().zip(&after) {
            assert!(b >= a, "{name} went back from {a} to {b}");
        }
        assert!(after.contains(&("requests", 8)), "{after:?}");
        assert!(after.contains(&("flows_created", 4)), "{after:?}");
        // The table's size cannot change in place: refused, nothing changed.
        let bigger = parse("slots = 2048\nparams = { delta = 1 }");
        assert_eq!(stage.reconfigure(&*bigger, t0), Err(Refused::NeedsRestart("slots".into())));
        assert_eq!(flowpolice(&mut *stage).router().params().delta, 9);
    }
}
