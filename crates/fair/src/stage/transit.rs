//! `fair-transit`: [`FairTransit`] from a [`FairTransitConfig`], live
//! changes and counters.

use std::sync::Arc;

use pipeline::{Invalid, Now, Refused};

use super::fixed;
use crate::config::FairTransitConfig;
use crate::keys::KeyError;
use crate::transit::FairTransit;

impl FairTransit {
    /// The stage of a `fair-transit` configuration on worker `worker`: the
    /// derived data keys of the configured range, the nonce generator
    /// seeded with `seed + worker`.
    pub fn from_config(c: &FairTransitConfig, worker: usize) -> Result<FairTransit, KeyError> {
        let keys = Arc::new(c.key_ring()?);
        let mut st = FairTransit::new(c.settings(), keys, c.seed.wrapping_add(worker as u64));
        st.configured = Some(Box::new(c.clone()));
        Ok(st)
    }
}

impl FairTransit {
    /// A live change (see [`crate::stage`]): actions and protocol codes
    /// apply from the next burst. A change of the key parameters installs
    /// the newly derived ring, followed by the running ring's keys that
    /// continue it (keys rotated in through the control plane beyond the
    /// configured range). The nonce generator runs on: a new `seed` needs a
    /// restart.
    fn apply_config(
        &mut self,
        new: &FairTransitConfig,
        old: &FairTransitConfig,
        _now: Now,
    ) -> Result<(), Refused> {
        fixed(&[("seed", new.seed != old.seed)])?;
        if !new.same_keys(old) {
            let mut ring = new
                .key_ring()
                .map_err(|e| Refused::Invalid(Invalid::at("keys_until", e.to_string())))?;
            ring.extend_from(&self.keys);
            self.keys = Arc::new(ring);
        }
        self.cfg = new.settings();
        Ok(())
    }
}

configured_element!(
    "fair-transit", FairTransitConfig, any impl[] FairTransit,
    stats[marked, not_fair, stale, malformed, slot_overflow, no_key],
);
