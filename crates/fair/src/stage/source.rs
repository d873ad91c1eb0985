//! `fair-source`: [`FairSource`] from a [`FairSourceConfig`], live changes
//! and counters.

use pipeline::{Now, Refused};

use super::{carry, fixed};
use crate::config::{FairSourceConfig, SourceChannelConfig};
use crate::lpm::PrefixTable;
use crate::source::{FairSource, SourceChannel};
use crate::sync::{Arc, AtomicU32};

impl FairSource {
    /// The stage of a `fair-source` configuration: channel `i` is the
    /// configuration's `channels[i]`, its bucket full at time 0 and its
    /// sequence counter at 0; the routes compiled.
    pub fn from_config(c: &FairSourceConfig) -> FairSource {
        let mut st = FairSource::new(c.settings());
        for (i, ch) in c.channels.iter().enumerate() {
            st.add_channel(channel(i, ch, 0));
        }
        st.set_routes(c);
        st.configured = Some(Box::new(c.clone()));
        st
    }

    /// Routes every channel's prefix and compiles the FIB.
    fn set_routes(&mut self, c: &FairSourceConfig) {
        let mut fib = PrefixTable::new();
        for (i, ch) in c.channels.iter().enumerate() {
            fib.insert(ch.prefix.addr(), ch.prefix.prefix_len(), i as u32);
        }
        self.fib = fib;
        self.fib_stale = true;
        self.commit_routes();
    }
}

/// A fresh channel `i` of configuration `c` (bucket full at `now_ns`).
fn channel(i: usize, c: &SourceChannelConfig, now_ns: u64) -> SourceChannel {
    let seq = Arc::new(AtomicU32::new(0));
    SourceChannel::new(i as u32, c.dst_asn, &c.k_sd, c.m, c.cir_bps / 8, c.cbs_bytes, now_ns, seq)
}

/// Changes running channel `ch` from `old` to `new` (index `i`), keeping its
/// sequence counter and bucket level.
fn retune(
    i: usize,
    ch: &mut SourceChannel,
    old: &SourceChannelConfig,
    new: &SourceChannelConfig,
    now: Now,
) {
    (ch.id, ch.dst_asn, ch.m) = (i as u32, new.dst_asn, new.m);
    if new.k_sd != old.k_sd {
        ch.set_key(&new.k_sd);
    }
    if (new.cir_bps, new.cbs_bytes) != (old.cir_bps, old.cbs_bytes) {
        ch.set_policy(new.cir_bps / 8, new.cbs_bytes, now.mono_ns);
    }
}

impl FairSource {
    /// A live change (see [`crate::stage`]): channels are matched by
    /// `prefix`; a kept channel keeps its sequence counter and bucket level
    /// (retuned to a new CIR/CBS) and is re-keyed in place; the settings
    /// (`mtu`, `v4_spare`, `forward_nonconforming`) apply from the next burst.
    fn apply_config(
        &mut self,
        new: &FairSourceConfig,
        old: &FairSourceConfig,
        now: Now,
    ) -> Result<(), Refused> {
        // Channels added in code: the configuration no longer describes them.
        fixed(&[("channels", old.channels.len() != self.channels.len())])?;
        let (channels, _dropped) = carry(
            core::mem::take(&mut self.channels),
            &old.channels,
            &new.channels,
            |c| c.prefix,
            |i, ch, o, n| retune(i, ch, o, n, now),
            |i, n| channel(i, n, now.mono_ns),
        );
        self.channels = channels;
        self.cfg = new.settings();
        self.set_routes(new);
        Ok(())
    }
}

configured_element!(
    "fair-source", FairSourceConfig, any impl[] FairSource,
    stats[stamped, no_channel, jumbo_unmarked, src_preexisting_fair, too_big, nonconforming],
);
