//! [`Element`]: what the control plane sees of a stage or an egress
//! discipline, whatever buffer type the data plane runs on.
//!
//! Stages ([`Stage`](crate::Stage)) and egress disciplines
//! ([`Egress`](crate::Egress)) are generic over the packet buffer (`Frame`,
//! a DPDK mbuf, `Vec<u8>`), but nothing the control plane asks of them is:
//! their name, their named counters ([`Element::named_counters`]) and levels
//! ([`Element::named_gauges`]), their concrete state (to read a table or
//! install a key) and a live parameter change. Those live here, so that one
//! control plane drives every backend.
//!
//! # Live parameter changes
//! [`Element::reconfigure`] receives the element's *typed* configuration (the
//! value its kind's parser produced from the router configuration, already
//! validated) and applies it in place: soft state (flow tables, token-bucket
//! levels, queued packets, counters) survives. An element answers
//! [`Reconfigured::Unchanged`] when the new configuration equals the running
//! one, and refuses with [`Refused::NeedsRestart`] a change it cannot make
//! without losing state it must not lose (e.g. the size of a flow table).

use core::any::Any;
use core::fmt;

use crate::time::Now;
use crate::validate::Invalid;

/// What a successful [`Element::reconfigure`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reconfigured {
    /// The new configuration equals the running one: nothing changed.
    Unchanged,
    /// The change is in effect.
    Applied {
        /// Packets the change discarded (e.g. a queue shrunk below its
        /// occupancy); the element also counts them in its own counters.
        lost: u64,
    },
}

impl Reconfigured {
    /// Applied, nothing lost.
    pub const APPLIED: Reconfigured = Reconfigured::Applied { lost: 0 };

    /// Packets the change discarded.
    pub fn lost(&self) -> u64 {
        match self {
            Reconfigured::Unchanged => 0,
            Reconfigured::Applied { lost } => *lost,
        }
    }
}

/// Why an element refused a live change (it then runs on unchanged).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// The element has no live reconfiguration: restart with the new configuration.
    Unsupported,
    /// This parameter cannot change while the element runs (restart with it).
    NeedsRestart(String),
    /// The configuration is not valid for this element (a wrong type, or a
    /// value the element's state cannot take): which key, and why.
    Invalid(Invalid),
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refused::Unsupported => f.write_str("cannot be changed while running (restart)"),
            Refused::NeedsRestart(key) => {
                write!(f, "`{key}` cannot be changed while running (restart)")
            }
            Refused::Invalid(why) => write!(f, "{why}"),
        }
    }
}

impl std::error::Error for Refused {}

/// The buffer-independent face of a stage or egress discipline (see the
/// module docs). Every [`Stage`](crate::Stage) and [`Egress`](crate::Egress)
/// is an `Element`.
pub trait Element: Send {
    /// A short name for counters and logs (the kind, e.g. `"sibra-transit"`).
    fn name(&self) -> &str;

    /// Reports the element's own named *counters* to `out`: monotonic
    /// counts of events since the element was built (packets per traffic
    /// class, requests, packets sent per queue...), which only grow, across
    /// live changes too. Called when the worker publishes its counters,
    /// never per packet. Names are static so that publishing never allocates.
    ///
    /// A value that can go down (table occupancy, reservations held) is a
    /// level: report it through [`Element::named_gauges`] instead, so that
    /// monitoring treats it as a gauge (a counter that goes down reads as a
    /// reset, and its rate is meaningless).
    fn named_counters(&self, out: &mut dyn FnMut(&'static str, u64)) {
        let _ = out;
    }

    /// Reports the element's own named *levels* (gauges) to `out`: values
    /// that go up and down, such as table entries or reservations held,
    /// read at the time of the call. The sibling of
    /// [`Element::named_counters`], called at the same times; the default
    /// reports none. A name should not be both a counter and a level.
    fn named_gauges(&self, out: &mut dyn FnMut(&'static str, u64)) {
        let _ = out;
    }

    /// The element as `Any`, so that the control plane can reach its
    /// concrete type between two bursts (read tables, install keys) without
    /// rebuilding it. `None` (the default) keeps it opaque.
    fn as_any_mut(&mut self) -> Option<&mut dyn Any> {
        None
    }

    /// Applies a new typed configuration in place, between two bursts, at
    /// the time of the worker's latest burst. The default refuses.
    fn reconfigure(&mut self, config: &dyn Any, now: Now) -> Result<Reconfigured, Refused> {
        let _ = (config, now);
        Err(Refused::Unsupported)
    }
}

/// Downcasts a configuration handed to [`Element::reconfigure`].
pub fn config_of<'a, C: Any>(config: &'a dyn Any, element: &str) -> Result<&'a C, Refused> {
    config.downcast_ref::<C>().ok_or_else(|| {
        Refused::Invalid(Invalid::at(
            "",
            format!(
                "`{element}` was handed the configuration of another kind ({} expected)",
                core::any::type_name::<C>()
            ),
        ))
    })
}

/// [`Element::reconfigure`] for an element without soft state whose
/// configuration is the element itself (a routing table, a port map): the
/// running value is replaced by the new one when they differ.
pub fn replace_whole<T: Any + Clone + PartialEq>(
    this: &mut T,
    config: &dyn Any,
    element: &str,
) -> Result<Reconfigured, Refused> {
    let new = config_of::<T>(config, element)?;
    if new == this {
        return Ok(Reconfigured::Unchanged);
    }
    this.clone_from(new);
    Ok(Reconfigured::APPLIED)
}
