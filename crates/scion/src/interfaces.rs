//! The router's interface ↔ port tables.

use crate::config::IfBinding;

/// Interface ID 0: the AS itself (packet from or to an internal host).
pub const INTERNAL_IF: u16 = 0;

/// Marks an unused slot in the interface tables; also the one port number an
/// interface cannot be bound to.
pub(crate) const NONE: u16 = u16::MAX;

/// Interface → port and port → interface tables of one router.
///
/// Both are flat arrays indexed by a 16-bit number (interface ID, port), so
/// a lookup is one load, without a bounds check.
#[derive(Clone, Debug)]
pub struct InterfaceTable {
    if_to_port: Box<[u16; 1 << 16]>,
    port_to_if: Box<[u16; 1 << 16]>,
}

/// A table of 2^16 entries of `v`, allocated in place.
fn table(v: u16) -> Box<[u16; 1 << 16]> {
    let b = vec![v; 1 << 16].into_boxed_slice();
    match b.try_into() {
        Ok(t) => t,
        // The vector has exactly 2^16 entries.
        Err(_) => unreachable!("2^16 entries"),
    }
}

impl Default for InterfaceTable {
    fn default() -> Self {
        Self::new()
    }
}

impl InterfaceTable {
    /// An empty table (every interface unknown, every port internal).
    pub fn new() -> Self {
        InterfaceTable { if_to_port: table(NONE), port_to_if: table(INTERNAL_IF) }
    }

    /// A table with `bindings` (checked by
    /// [`validate_bindings`](crate::config::validate_bindings); an invalid
    /// binding is skipped as [`bind`](Self::bind) skips it).
    pub fn from_bindings(bindings: &[IfBinding]) -> Self {
        let mut t = Self::new();
        t.rebind(bindings);
        t
    }

    /// Replaces every binding with `bindings`, in place: the tables keep
    /// their allocation.
    pub fn rebind(&mut self, bindings: &[IfBinding]) {
        self.if_to_port.fill(NONE);
        self.port_to_if.fill(INTERNAL_IF);
        for b in bindings {
            self.bind(b.ifid, b.port);
        }
    }

    /// Binds external interface `ifid` (non-zero) to `port` (< 65535), both ways.
    pub fn bind(&mut self, ifid: u16, port: u16) {
        if ifid == INTERNAL_IF || port == NONE {
            return;
        }
        self.if_to_port[usize::from(ifid)] = port;
        self.port_to_if[usize::from(port)] = ifid;
    }

    /// Builder form of [`bind`](Self::bind).
    pub fn with(mut self, ifid: u16, port: u16) -> Self {
        self.bind(ifid, port);
        self
    }

    /// Removes interface `ifid`.
    pub fn unbind(&mut self, ifid: u16) {
        let port = std::mem::replace(&mut self.if_to_port[usize::from(ifid)], NONE);
        let slot = &mut self.port_to_if[usize::from(port)];
        // The port may have been bound to another interface since (and
        // the unused slot's port, NONE, to none).
        if *slot == ifid && port != NONE {
            *slot = INTERNAL_IF;
        }
    }

    /// The port of external interface `ifid`.
    #[inline]
    pub fn port(&self, ifid: u16) -> Option<u16> {
        match self.if_to_port[usize::from(ifid)] {
            NONE => None,
            p => Some(p),
        }
    }

    /// The interface a packet arriving on `port` came through; [`INTERNAL_IF`]
    /// for ports not bound to an external interface.
    #[inline]
    pub fn ingress_if(&self, port: u16) -> u16 {
        self.port_to_if[usize::from(port)]
    }

    /// The bound interfaces, by interface ID (a scan of the table: control
    /// path only).
    pub fn bindings(&self) -> impl Iterator<Item = IfBinding> + '_ {
        (0..=u16::MAX)
            .zip(self.if_to_port.iter())
            .filter(|&(_, &port)| port != NONE)
            .map(|(ifid, &port)| IfBinding { ifid, port })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rebind_replaces_every_binding() {
        let mut t = InterfaceTable::new().with(2, 0).with(3, 1);
        t.rebind(&[IfBinding { ifid: 3, port: 4 }, IfBinding { ifid: 9, port: 1 }]);
        assert_eq!((t.port(2), t.port(3), t.port(9)), (None, Some(4), Some(1)));
        assert_eq!((t.ingress_if(0), t.ingress_if(1), t.ingress_if(4)), (INTERNAL_IF, 9, 3));
        let all: Vec<_> = t.bindings().map(|b| (b.ifid, b.port)).collect();
        assert_eq!(all, [(3, 4), (9, 1)]);
    }

    #[test]
    fn unbind_keeps_a_port_rebound_elsewhere() {
        let mut t = InterfaceTable::new().with(2, 0).with(3, 0);
        t.unbind(2);
        assert_eq!((t.port(2), t.ingress_if(0)), (None, 3));
        t.unbind(3);
        assert_eq!(t.ingress_if(0), INTERNAL_IF);
        // Interface 0 and port 65535 are never bound.
        let t = InterfaceTable::new().with(INTERNAL_IF, 1).with(4, NONE);
        assert_eq!(t.bindings().count(), 0);
    }
}
