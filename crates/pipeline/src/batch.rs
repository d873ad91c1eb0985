//! A burst of up to [`BURST`] packets with per-packet metadata.

use crate::buf::PacketBuf;
use crate::verdict::{Class, DropReason, Verdict};

/// Packets per burst: the unit of I/O, of stage processing and of AES batching.
pub const BURST: usize = 32;

/// Offset value meaning "this header is absent / not parsed".
pub const NO_OFFSET: u16 = u16::MAX;

/// The network layer the parser found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum L3 {
    /// Not parsed yet, or not IP.
    #[default]
    None,
    /// IPv4.
    Ipv4,
    /// IPv6.
    Ipv6,
}

/// The protocol header (above IP) a protocol stage works on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Proto {
    /// Not parsed yet, or none of the project's protocols.
    #[default]
    None,
    /// SCION over UDP; `Meta::proto` is the SCION common header.
    Scion,
    /// FAIR header (IPv6 extension header or IPv4 shim).
    Fair,
    /// FlowPolice shim.
    FlowPolice,
}

/// Per-packet metadata carried next to the buffer through the pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    /// Port the packet arrived on.
    pub port: u16,
    /// Flow hash (RSS) used for sharding and table lookups.
    pub hash: u32,
    /// Network layer found by the parser.
    pub l3: L3,
    /// Offset of the network header, or [`NO_OFFSET`].
    pub l3_off: u16,
    /// Offset of the transport header (UDP/TCP), or [`NO_OFFSET`].
    pub l4_off: u16,
    /// Protocol found above IP.
    pub proto: Proto,
    /// Offset of the protocol header in [`proto`](Self::proto), or [`NO_OFFSET`].
    pub proto_off: u16,
    /// The decision so far; starts as forward-to-ingress-port in best effort.
    pub verdict: Verdict,
}

impl Meta {
    /// Fresh metadata for a packet that arrived on `port`.
    pub const fn new(port: u16) -> Self {
        Meta {
            port,
            hash: 0,
            l3: L3::None,
            l3_off: NO_OFFSET,
            l4_off: NO_OFFSET,
            proto: Proto::None,
            proto_off: NO_OFFSET,
            verdict: Verdict::Forward { port, class: Class::BEST_EFFORT },
        }
    }

    /// The traffic class if the packet is being forwarded.
    pub fn class(&self) -> Option<Class> {
        match self.verdict {
            Verdict::Forward { class, .. } => Some(class),
            _ => None,
        }
    }
}

/// An iterator over the indices of a bit mask (lowest first); a copy, so the
/// batch may be changed while iterating.
#[derive(Clone, Copy, Debug)]
pub struct Indices(u32);

impl Iterator for Indices {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        if self.0 == 0 {
            return None;
        }
        let i = self.0.trailing_zeros() as usize;
        self.0 &= self.0 - 1;
        Some(i)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.0.count_ones() as usize;
        (n, Some(n))
    }
}

impl ExactSizeIterator for Indices {}

impl Indices {
    /// The indices set in `mask`.
    pub const fn of(mask: u32) -> Self {
        Indices(mask)
    }
}

/// Up to [`BURST`] packet buffers and their metadata.
///
/// A packet is *live* until a stage drops it or hands it to control; stages
/// iterate [`live`](Self::live) so dropped packets are skipped for free.
pub struct Batch<B> {
    bufs: Vec<B>,
    meta: [Meta; BURST],
    live: u32,
}

impl<B: PacketBuf> Default for Batch<B> {
    fn default() -> Self {
        Self::new()
    }
}

impl<B: PacketBuf> Batch<B> {
    /// An empty batch; its storage is reused for every burst.
    pub fn new() -> Self {
        Batch { bufs: Vec::with_capacity(BURST), meta: [Meta::new(0); BURST], live: 0 }
    }

    /// Number of packets (live or not).
    pub fn len(&self) -> usize {
        self.bufs.len()
    }

    /// Whether the batch holds no packets.
    pub fn is_empty(&self) -> bool {
        self.bufs.is_empty()
    }

    /// Whether the batch holds [`BURST`] packets.
    pub fn is_full(&self) -> bool {
        self.bufs.len() == BURST
    }

    /// Adds a packet that arrived on `port`; gives it back if the batch is full.
    pub fn push(&mut self, buf: B, port: u16) -> Result<usize, B> {
        let i = self.bufs.len();
        if i == BURST {
            return Err(buf);
        }
        self.bufs.push(buf);
        self.meta[i] = Meta::new(port);
        self.live |= 1 << i;
        Ok(i)
    }

    /// Bit mask of live packets (bit i = packet i).
    pub fn live_mask(&self) -> u32 {
        self.live
    }

    /// Indices of live packets.
    pub fn live(&self) -> Indices {
        Indices(self.live)
    }

    /// Whether packet `i` is still live.
    pub fn is_live(&self, i: usize) -> bool {
        i < BURST && self.live & (1 << i) != 0
    }

    /// The bytes of packet `i`.
    pub fn data(&self, i: usize) -> &[u8] {
        self.bufs[i].data()
    }

    /// The buffer of packet `i`.
    pub fn buf(&self, i: usize) -> &B {
        &self.bufs[i]
    }

    /// The buffer of packet `i`, mutable (to rewrite or resize it).
    pub fn buf_mut(&mut self, i: usize) -> &mut B {
        &mut self.bufs[i]
    }

    /// The metadata of packet `i`.
    pub fn meta(&self, i: usize) -> &Meta {
        &self.meta[i]
    }

    /// The metadata of packet `i`, mutable.
    pub fn meta_mut(&mut self, i: usize) -> &mut Meta {
        &mut self.meta[i]
    }

    /// Buffer and metadata of packet `i` together, both mutable.
    pub fn get_mut(&mut self, i: usize) -> (&mut B, &mut Meta) {
        (&mut self.bufs[i], &mut self.meta[i])
    }

    /// Drops packet `i` for `reason`.
    pub fn drop_packet(&mut self, i: usize, reason: DropReason) {
        self.meta[i].verdict = Verdict::Drop(reason);
        self.live &= !(1 << i);
    }

    /// Hands packet `i` to the control plane.
    pub fn to_control(&mut self, i: usize) {
        self.meta[i].verdict = Verdict::ToControl;
        self.live &= !(1 << i);
    }

    /// Sets packet `i` to be forwarded on `port` in `class` (it stays live).
    pub fn forward(&mut self, i: usize, port: u16, class: Class) {
        self.meta[i].verdict = Verdict::Forward { port, class };
    }

    /// Sets the traffic class of a forwarded packet `i`, keeping its port.
    pub fn set_class(&mut self, i: usize, class: Class) {
        if let Verdict::Forward { port, .. } = self.meta[i].verdict {
            self.meta[i].verdict = Verdict::Forward { port, class };
        }
    }

    /// Empties the batch, handing each buffer and its metadata to `f`
    /// (the runtime transmits forwarded packets and recycles the rest).
    pub fn drain(&mut self, mut f: impl FnMut(B, Meta)) {
        for (i, b) in self.bufs.drain(..).enumerate() {
            f(b, self.meta[i]);
        }
        self.live = 0;
    }

    /// Removes all packets, dropping the buffers.
    pub fn clear(&mut self) {
        self.bufs.clear();
        self.live = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_drop_and_iterate() {
        let mut b: Batch<Vec<u8>> = Batch::new();
        for i in 0..BURST {
            assert_eq!(b.push(vec![i as u8], 7), Ok(i));
        }
        assert!(b.is_full());
        assert_eq!(b.push(vec![0], 7), Err(vec![0]));
        for i in b.live() {
            if i % 2 == 1 {
                b.drop_packet(i, DropReason::BadMac);
            }
        }
        b.to_control(0);
        let live: Vec<usize> = b.live().collect();
        assert_eq!(live.len(), 15);
        assert!(live.iter().all(|i| i % 2 == 0 && *i != 0));
        assert_eq!(b.meta(1).verdict, Verdict::Drop(DropReason::BadMac));
        assert_eq!(b.meta(0).verdict, Verdict::ToControl);
        b.set_class(2, Class(3));
        assert_eq!(b.meta(2).verdict, Verdict::Forward { port: 7, class: Class(3) });
        let mut n = 0;
        b.drain(|_, _| n += 1);
        assert_eq!((n, b.len(), b.live_mask()), (BURST, 0, 0));
    }
}
