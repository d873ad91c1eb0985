//! `suspicious-bit`: [`SuspiciousBit`] from a [`SuspiciousBitConfig`], live
//! changes and counters.

use std::sync::Arc;

use pipeline::{Now, Refused};

use crate::config::SuspiciousBitConfig;
use crate::sb::{SusPorts, SuspiciousBit};

impl SuspiciousBit {
    /// The stage of a `suspicious-bit` configuration sharing `ports` with
    /// the other workers, its suspicious sources flagged at `now_s` (Unix
    /// seconds) for `sus_ttl_s`.
    pub fn from_config(c: &SuspiciousBitConfig, ports: Arc<SusPorts>, now_s: u64) -> SuspiciousBit {
        let mut st = SuspiciousBit::new(c.settings(), ports);
        for p in &c.suspicious_sources {
            st.add_suspicious(p.addr(), p.prefix_len(), now_s);
        }
        st.configured = Some(Box::new(c.clone()));
        st
    }
}

impl SuspiciousBit {
    /// A live change (see [`crate::stage`]): settings apply from the next
    /// burst; the suspicious ports stay flagged. A source still listed
    /// keeps the time it was flagged (its expiry moves with `sus_ttl_s`;
    /// one that expired stays expired), a newly listed one is flagged now,
    /// one no longer listed is cleared. Sources flagged in code (not
    /// configured) stay.
    fn apply_config(
        &mut self,
        new: &SuspiciousBitConfig,
        old: &SuspiciousBitConfig,
        now: Now,
    ) -> Result<(), Refused> {
        for p in &old.suspicious_sources {
            let (addr, len) = (p.addr(), p.prefix_len());
            let Some(expiry) = self.sources.remove(addr, len) else { continue };
            if new.suspicious_sources.contains(p) {
                let flagged = expiry.saturating_sub(old.sus_ttl_s);
                self.sources.insert(addr, len, flagged.saturating_add(new.sus_ttl_s));
            }
        }
        let expiry = now.unix_secs().saturating_add(new.sus_ttl_s);
        for p in new.suspicious_sources.iter().filter(|p| !old.suspicious_sources.contains(p)) {
            self.sources.insert(p.addr(), p.prefix_len(), expiry);
        }
        self.cfg = new.settings();
        Ok(())
    }
}

configured_element!(
    "fair-sb", SuspiciousBitConfig, any impl[] SuspiciousBit,
    stats[sb_set, suspicious, ports_flagged, ports_cleared],
);
