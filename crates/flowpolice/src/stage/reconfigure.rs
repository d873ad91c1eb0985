//! Live changes: a new [`Config`] applied to the running stage between two
//! bursts, keeping its soft state.

use pipeline::{Invalid, Now, Reconfigured, Refused, TokenBucket, Validate};

use super::{bucket, resolved_lag, FlowPolice};
use crate::config::{ChannelCap, Config};
use crate::table::FlowTable;

impl FlowPolice {
    /// Applies `c` in place at `now` (between two bursts).
    ///
    /// The flow table and every flow's window, loss history and capability
    /// counters stay, and so do the stage's counters. In place: the
    /// Algorithm-1 `params` (each flow sees them from its next update), the
    /// `puzzle` policy and `seeds`, the `capability_key` (capabilities issued
    /// under the old key no longer verify: their flows send a new request),
    /// `protected_v4`/`protected_v6` (the flows of a server that changes
    /// keying re-establish through requests; their old entries go idle and
    /// are reclaimed), `check_flow_binding`, `link`, the prefetch choices
    /// and the ingress caps (a changed cap keeps its level: tokens earned up
    /// to `now` count at the old rate, then the level is clamped to the new
    /// burst; a new cap starts full).
    ///
    /// Refused with [`Refused::NeedsRestart`], nothing changed: `slots` and
    /// `probe_window` (they size and lay out the table), `table_key`
    /// (every flow's slot follows from it) and `clock` (every flow's period
    /// start is a reading of it). An invalid `c` is refused with
    /// its key; [`Reconfigured::Unchanged`] when `c` is what runs.
    pub fn apply_config(&mut self, c: &Config, now: Now) -> Result<Reconfigured, Refused> {
        if *c == self.config && c.params == *self.router.params() {
            return Ok(Reconfigured::Unchanged);
        }
        let fixed = [
            ("slots", c.slots == self.config.slots),
            ("probe_window", c.probe_window == self.config.probe_window),
            ("table_key", c.table_key == self.config.table_key),
            ("clock", c.clock == self.config.clock),
        ];
        if let Some((key, _)) = fixed.iter().find(|(_, same)| !same) {
            return Err(Refused::NeedsRestart((*key).to_string()));
        }
        c.validate().map_err(Refused::Invalid)?;
        // Valid: the first step cannot fail, and nothing after it can.
        self.router
            .set_params(c.params)
            .map_err(|e| Refused::Invalid(Invalid::from(e).under("params")))?;
        if c.capability_key != self.config.capability_key {
            self.router.set_key(&c.capability_key);
        }
        if c.protected_v4 != self.config.protected_v4 || c.protected_v6 != self.config.protected_v6
        {
            self.keying = c.flow_keying();
        }
        self.puzzle = c.puzzle;
        self.seeds = c.seeds.clone();
        self.link = c.link;
        self.check_binding = c.check_flow_binding;
        self.slot_hints = c.slot_hints.unwrap_or(true);
        self.lag = resolved_lag(c);
        let table = self.router.table_mut();
        let whole = c.insert_whole_chunk.unwrap_or(FlowTable::auto_whole_chunk(table.slots()));
        table.set_prefetch_whole_chunk(whole);
        retune(&mut self.request_cap, c.request_cap, now);
        retune(&mut self.legacy_cap, c.legacy_cap, now);
        self.config = c.clone();
        Ok(Reconfigured::APPLIED)
    }
}

/// Changes an ingress policer to `cap` at `now`, keeping its level.
fn retune(policer: &mut Option<TokenBucket>, cap: Option<ChannelCap>, now: Now) {
    match (policer.as_mut(), cap) {
        (Some(b), Some(c)) => b.retune(c.bytes_per_sec(), c.burst(), now.mono_ns),
        (_, cap) => *policer = cap.map(|c| bucket(c, now.mono_ns)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::puzzle::SeedChain;
    use pipeline::Element;

    fn config() -> Config {
        Config::new(mac::Key::from([7; 16]), [1, 2], 1024, SeedChain::generate([4; 32], 0, 8))
    }

    #[test]
    fn a_change_keeps_flows_buckets_and_counters_and_a_refusal_changes_nothing() {
        let mut cfg = config();
        cfg.legacy_cap = Some(ChannelCap { rate_mbps: 0.008, burst_bytes: Some(2000) });
        let mut st = FlowPolice::new(cfg.clone()).unwrap();
        let t0 = Now::default();
        assert!(matches!(st.router_mut().on_request(77, 0), Ok(i) if i.created));
        st.counters.legacy = 5;
        assert!(st.legacy_cap.as_mut().unwrap().try_take(1500, 0));
        // Same configuration: nothing to do.
        assert_eq!(st.reconfigure(&cfg, t0), Ok(Reconfigured::Unchanged));
        // New Algorithm-1 values and a faster cap with a smaller burst.
        let mut next = cfg.clone();
        next.params.delta = 9;
        next.puzzle.min_level = 2;
        next.legacy_cap = Some(ChannelCap { rate_mbps: 0.08, burst_bytes: Some(1600) });
        assert_eq!(st.reconfigure(&next, t0), Ok(Reconfigured::APPLIED));
        assert_eq!(st.router().params().delta, 9);
        assert_eq!(st.puzzle.min_level, 2);
        assert_eq!(st.router().flow(77).map(|e| e.p_id), Some(1), "the flow stays");
        assert_eq!(st.counters().legacy, 5, "counters stay");
        let b = st.legacy_cap.as_ref().unwrap();
        assert_eq!((b.rate(), b.burst(), b.available()), (10_000, 1600, 500), "level kept");
        // The table's size or key: refused, and the stage runs on unchanged.
        for (key, edit) in [
            ("slots", Box::new(|c: &mut Config| c.slots = 2048) as Box<dyn Fn(&mut Config)>),
            ("probe_window", Box::new(|c: &mut Config| c.probe_window = 16)),
            ("table_key", Box::new(|c: &mut Config| c.table_key = mac::Key::from([3; 16]))),
        ] {
            let mut bad = next.clone();
            bad.params.delta = 1;
            edit(&mut bad);
            assert_eq!(st.reconfigure(&bad, t0), Err(Refused::NeedsRestart(key.into())));
            assert_eq!(st.router().params().delta, 9);
        }
        let mut bad = next.clone();
        bad.params.beta = 2.0;
        bad.params.delta = 1;
        let Err(Refused::Invalid(e)) = st.reconfigure(&bad, t0) else { panic!("accepted") };
        assert_eq!(e.key, "params.beta");
        assert_eq!(st.router().params().delta, 9);
        assert_eq!(*st.config(), next);
    }

    #[test]
    fn a_new_capability_key_and_keying_apply_to_the_next_packets() {
        let cfg = config();
        let mut st = FlowPolice::new(cfg.clone()).unwrap();
        let old = st.router_mut().on_request(9, 0).unwrap().capability;
        let mut next = cfg.clone();
        next.capability_key = mac::Key::from([8; 16]);
        next.protected_v4 = vec![core::net::Ipv4Addr::new(192, 0, 2, 80)];
        next.insert_whole_chunk = Some(false);
        next.hint_lag = Some(3);
        next.request_cap = Some(ChannelCap { rate_mbps: 1.0, burst_bytes: None });
        st.reconfigure(&next, Now::default()).unwrap();
        assert!(!st.router().key().verify(&old), "issued under the old key");
        assert!(st.router().flow(9).is_some(), "the flow stays");
        assert_eq!(st.keying.v4(1, u32::from(core::net::Ipv4Addr::new(192, 0, 2, 80))), 1);
        assert!(!st.router().table().prefetches_whole_chunk());
        assert_eq!(st.lag, 3);
        assert_eq!(st.request_cap.as_ref().map(|b| b.available()), Some(3036), "starts full");
        // Back to the defaults.
        st.reconfigure(&cfg, Now::default()).unwrap();
        assert!(st.router().table().prefetches_whole_chunk());
        assert!(st.request_cap.is_none());
    }

    #[test]
    fn another_kind_of_configuration_is_refused() {
        let mut st = FlowPolice::new(config()).unwrap();
        assert!(matches!(st.reconfigure(&5u32, Now::default()), Err(Refused::Invalid(_))));
    }
}
