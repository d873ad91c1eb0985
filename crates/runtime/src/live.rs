//! Stages and egress disciplines the control plane can reach while they run.
//!
//! The registry wraps the protocol stages it builds in [`Live`] (and the
//! Z-Lane scheduler in [`LiveEgress`]). The wrapper forwards `process` /
//! `enqueue` / `dequeue` unchanged (it is a newtype, so the call is
//! inlined: no extra indirection on the packet path) and adds two things:
//!
//! * `as_any_mut` returns the *inner* value, so a closure sent through
//!   [`crate::Command::Apply`] can downcast to e.g. `flowpolice::FlowPolice`
//!   and change it in place between two bursts, keeping its soft state
//!   (flow table, token buckets, reservations);
//! * `named_counters` reports the stage's own counters (per traffic class,
//!   per queue) through [`Expose`], published with the worker's other
//!   counters (see [`crate::stats`]).

use std::any::Any;

use pipeline::{Batch, Class, DropReason, Egress, Now, PacketBuf, Stage};

/// Named counters of a concrete stage or egress type (none by default).
pub trait Expose {
    /// Reports `(name, value)` pairs; names are static so that publishing
    /// never allocates.
    fn expose(&self, out: &mut dyn FnMut(&'static str, u64)) {
        let _ = out;
    }
}

/// A stage reachable by the control plane (see the module docs).
pub struct Live<S>(pub S);

impl<B: PacketBuf, S: Stage<B> + Expose + Any> Stage<B> for Live<S> {
    #[inline]
    fn name(&self) -> &str {
        self.0.name()
    }

    #[inline]
    fn process(&mut self, batch: &mut Batch<B>, now: Now) {
        self.0.process(batch, now);
    }

    fn as_any_mut(&mut self) -> Option<&mut dyn Any> {
        Some(&mut self.0)
    }

    fn named_counters(&self, out: &mut dyn FnMut(&'static str, u64)) {
        self.0.expose(out);
    }
}

/// An egress discipline reachable by the control plane.
pub struct LiveEgress<E>(pub E);

impl<B: PacketBuf, E: Egress<B> + Expose + Any> Egress<B> for LiveEgress<E> {
    #[inline]
    fn name(&self) -> &str {
        self.0.name()
    }

    #[inline]
    fn enqueue(&mut self, buf: B, class: Class, now: Now) -> Result<(), (B, DropReason)> {
        self.0.enqueue(buf, class, now)
    }

    #[inline]
    fn dequeue(&mut self, now: Now, max: usize, out: &mut Vec<B>) -> usize {
        self.0.dequeue(now, max, out)
    }

    #[inline]
    fn queued(&self) -> usize {
        self.0.queued()
    }

    fn as_any_mut(&mut self) -> Option<&mut dyn Any> {
        Some(&mut self.0)
    }

    fn named_counters(&self, out: &mut dyn FnMut(&'static str, u64)) {
        self.0.expose(out);
    }
}

#[cfg(feature = "zlane")]
mod zlane_impls {
    use super::Expose;

    /// Names of the classifier's per-class counters, R N G A U.
    pub const CLASS_NAMES: [&str; 5] = ["class_r", "class_n", "class_g", "class_a", "class_u"];

    impl Expose for zlane::ZlaneClassify {
        fn expose(&self, out: &mut dyn FnMut(&'static str, u64)) {
            let c = self.classifier().counters();
            for (n, v) in CLASS_NAMES.iter().zip(c.classes) {
                out(n, v);
            }
            out("over_bucket", c.over_bucket);
            out("previous_epoch", c.previous_epoch);
        }
    }

    impl Expose for zlane::ZlaneGateway {}

    const Q: [[&str; 4]; 5] = [
        ["queue_r_sent", "queue_r_queue_full", "queue_r_over_rate", "queue_r_demoted"],
        ["queue_n_sent", "queue_n_queue_full", "queue_n_over_rate", "queue_n_demoted"],
        ["queue_g_sent", "queue_g_queue_full", "queue_g_over_rate", "queue_g_demoted"],
        ["queue_a_sent", "queue_a_queue_full", "queue_a_over_rate", "queue_a_demoted"],
        ["queue_u_sent", "queue_u_queue_full", "queue_u_over_rate", "queue_u_demoted"],
    ];

    impl<B: pipeline::PacketBuf> Expose for zlane::sched::Scheduler<B> {
        fn expose(&self, out: &mut dyn FnMut(&'static str, u64)) {
            for (names, c) in Q.iter().zip(self.counters()) {
                out(names[0], c.sent);
                out(names[1], c.queue_full);
                out(names[2], c.over_rate);
                out(names[3], c.demoted);
            }
        }
    }
}

#[cfg(feature = "flowpolice")]
impl Expose for flowpolice::stage::FlowPolice {
    fn expose(&self, out: &mut dyn FnMut(&'static str, u64)) {
        let c = self.counters();
        out("requests", c.requests);
        out("flows_created", c.flows_created);
        out("flows_reclaimed", c.flows_reclaimed);
        out("table_full", c.table_full);
        out("privileged", c.privileged);
        out("best_effort", c.best_effort);
        out("legacy", c.legacy);
        out("table_entries", self.router().table().len() as u64);
    }
}

#[cfg(feature = "sibra")]
mod sibra_impls {
    use super::Expose;
    use sibra::stage::SibraCounters;

    fn sibra(c: &SibraCounters, out: &mut dyn FnMut(&'static str, u64)) {
        out("forwarded", c.forwarded);
        out("local", c.local);
        out("blacklisted", c.blacklisted);
        out("granted", c.granted);
        out("denied", c.denied);
    }

    impl Expose for sibra::stage::SibraTransit {
        fn expose(&self, out: &mut dyn FnMut(&'static str, u64)) {
            sibra(self.counters(), out);
        }
    }

    impl Expose for sibra::stage::SibraControl {
        fn expose(&self, out: &mut dyn FnMut(&'static str, u64)) {
            sibra(self.counters(), out);
            let (s, e) = self.admission().len();
            out("steady_reservations", s as u64);
            out("ephemeral_reservations", e as u64);
        }
    }
}

#[cfg(feature = "fair")]
mod fair_impls {
    use super::Expose;
    impl Expose for fair::transit::FairTransit {}
    impl Expose for fair::source::FairSource {}
}
