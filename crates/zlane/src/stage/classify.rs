//! The `zlane-classify` stage: [`Classifier`] over whole bursts.

use core::any::Any;

use pipeline::{config_of, Batch, Element, Now, PacketBuf, Reconfigured, Refused, Stage};

use crate::classify::Classifier;
use crate::config::RouterConfig;

/// The Z-Lane border-router stage: verifies EPIC-Z HVFs (host- or AS-level
/// per the Q flag), checks freshness (and replays if enabled), polices
/// Q-flagged traffic with the per-AS/per-ISD buckets, and sets the class
/// R/N/G/A/U. Drops carry their reason (`BadMac`, `Expired`, `FromFuture`,
/// `Replay`, `UnknownKey`, parse errors).
///
/// Run it **before** `scion::ScionForward`: it checks the HVF of the current
/// hop field, which forwarding then verifies (σ_i) and advances past.
///
/// A live change ([`Element::reconfigure`] with a [`RouterConfig`]) is
/// [`Classifier::reconfigure`]: bucket levels, keys and counters stay.
pub struct ZlaneClassify {
    inner: Classifier,
}

impl ZlaneClassify {
    /// Wraps a classifier.
    pub fn new(inner: Classifier) -> Self {
        ZlaneClassify { inner }
    }

    /// The classifier.
    pub fn classifier(&self) -> &Classifier {
        &self.inner
    }

    /// The classifier, mutable.
    pub fn classifier_mut(&mut self) -> &mut Classifier {
        &mut self.inner
    }
}

/// Names of the classifier's per-class counters, R N G A U.
const CLASS_COUNTER_NAMES: [&str; 5] = ["class_r", "class_n", "class_g", "class_a", "class_u"];

impl Element for ZlaneClassify {
    fn name(&self) -> &str {
        "zlane-classify"
    }

    fn named_counters(&self, out: &mut dyn FnMut(&'static str, u64)) {
        let c = self.classifier().counters();
        for (n, v) in CLASS_COUNTER_NAMES.iter().zip(c.classes) {
            out(n, v);
        }
        out("over_bucket", c.over_bucket);
        out("previous_epoch", c.previous_epoch);
    }

    fn as_any_mut(&mut self) -> Option<&mut dyn Any> {
        Some(self)
    }

    fn reconfigure(&mut self, config: &dyn Any, now: Now) -> Result<Reconfigured, Refused> {
        let cfg = config_of::<RouterConfig>(config, "zlane-classify")?;
        self.inner.reconfigure(cfg, now)
    }
}

impl<B: PacketBuf> Stage<B> for ZlaneClassify {
    fn process(&mut self, batch: &mut Batch<B>, now: Now) {
        // Acceptable epochs (and a fixed SV's installation) once per burst.
        self.inner.classify_burst(batch, now);
    }
}
