//! `fair-destination`: [`FairDestination`] from a
//! [`FairDestinationConfig`], live changes and counters.

use mac::Aes;
use pipeline::{Now, Refused};

use super::{carry, fixed};
use crate::config::{DestChannelConfig, FairDestinationConfig};
use crate::dest::{default_dup_window, DestChannel, FairDestination};
use crate::lpm::{FastMap, PrefixTable};
use crate::record::RecordSink;

impl<S: RecordSink> FairDestination<S> {
    /// The stage of a `fair-destination` configuration writing records to
    /// `sink` (the header store is the embedder's: `store_dir` and
    /// `retention_s` are not read here). Channel `i` is the configuration's
    /// `channels[i]`, its policer full at time 0.
    pub fn from_config(c: &FairDestinationConfig, sink: S) -> FairDestination<S> {
        let mut st = FairDestination::new(c.settings(), sink);
        st.channels = c.channels.iter().enumerate().map(|(i, ch)| channel(i, ch, 0)).collect();
        st.set_tables(c);
        st.configured = Some(Box::new(c.clone()));
        st
    }

    /// The classification tables of `c` (source prefixes, ingress
    /// neighbors, channel index); the classification cache starts afresh.
    fn set_tables(&mut self, c: &FairDestinationConfig) {
        let mut src_fib = PrefixTable::new();
        let mut index = FastMap::default();
        for (i, ch) in c.channels.iter().enumerate() {
            src_fib.insert(ch.src_prefix.addr(), ch.src_prefix.prefix_len(), ch.src_asn);
            index.insert(ch.class(), i as u32);
        }
        let ports = c.port_neighbors.iter().map(|p| usize::from(p.port) + 1).max().unwrap_or(0);
        let mut port_neighbor = vec![0; ports];
        for p in &c.port_neighbors {
            port_neighbor[usize::from(p.port)] = p.asn;
        }
        (self.src_fib, self.index, self.port_neighbor) = (src_fib, index, port_neighbor);
        self.last = Default::default();
    }
}

/// A fresh channel `i` of configuration `c` (policer full at `now_ns`).
fn channel(i: usize, c: &DestChannelConfig, now_ns: u64) -> DestChannel {
    let (cir, cbs) = (c.cir_bps / 8, c.cbs_bytes);
    let ch = DestChannel::new(i as u32, c.src_asn, &c.k_sd, c.m, cir, cbs, now_ns);
    match c.dup_window {
        Some(w) => ch.with_dup_window(w),
        None => ch,
    }
}

/// The duplicate-filter window of `c` (0: none).
fn dup_window(c: &DestChannelConfig) -> u32 {
    c.dup_window.unwrap_or_else(|| default_dup_window(c.cir_bps / 8, c.cbs_bytes))
}

/// Changes running channel `ch` from `old` to `new` (index `i`), keeping its
/// policer level, monitor and counters.
fn retune(
    i: usize,
    ch: &mut DestChannel,
    old: &DestChannelConfig,
    new: &DestChannelConfig,
    now: Now,
) {
    (ch.id, ch.expected_marks) = (i as u32, new.m);
    if new.k_sd != old.k_sd {
        ch.k_sd = Aes::new(&new.k_sd);
    }
    let (cir, cbs) = (new.cir_bps / 8, new.cbs_bytes);
    if (new.cir_bps, new.cbs_bytes) != (old.cir_bps, old.cbs_bytes) {
        ch.policer.reconfigure(cir, cbs, now.mono_ns);
        ch.monitor.set_policy(cir, cbs);
    }
    if dup_window(new) != dup_window(old) {
        ch.monitor.set_dup_window(dup_window(new));
    }
}

impl<S: RecordSink> FairDestination<S> {
    /// A live change (see [`crate::stage`]): channels are matched by
    /// (source AS, neighbor, slot count); a kept channel keeps its policer
    /// level (retuned to a new CIR/CBS), its monitor (the new policy judges
    /// the seconds still to come) and its counters, and is re-keyed in
    /// place; a new duplicate window starts empty. Source prefixes, port
    /// neighbors and settings apply from the next burst. The header store
    /// is the embedder's: `store_dir` and `retention_s` need a restart.
    fn apply_config(
        &mut self,
        new: &FairDestinationConfig,
        old: &FairDestinationConfig,
        now: Now,
    ) -> Result<(), Refused> {
        fixed(&[
            ("store_dir", new.store_dir != old.store_dir),
            ("retention_s", new.retention_s != old.retention_s),
            // Channels added in code: the configuration no longer describes them.
            ("channels", old.channels.len() != self.channels.len()),
        ])?;
        let before = self.live_duplicates();
        let (channels, _dropped) = carry(
            core::mem::take(&mut self.channels),
            &old.channels,
            &new.channels,
            DestChannelConfig::class,
            |i, ch, o, n| retune(i, ch, o, n, now),
            |i, n| channel(i, n, now.mono_ns),
        );
        self.channels = channels;
        // Duplicates of dropped channels and switched-off filters stay counted.
        self.retired_duplicates += before.saturating_sub(self.live_duplicates());
        self.cfg = new.settings();
        self.set_tables(new);
        Ok(())
    }
}

configured_element!(
    "fair-destination", FairDestinationConfig,
    opaque impl[S: RecordSink] FairDestination<S>,
    stats[accepted, stale, icv_fail, malformed, captured, violations, unknown_channel],
    "duplicates" => |s| s.duplicates(),
);
