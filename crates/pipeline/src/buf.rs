//! Packet buffers: the one trait every I/O backend's buffer implements.
//!
//! DPDK mbufs, pooled [`Frame`]s (pcap and synthetic backends) and plain
//! `Vec<u8>` (tests) all implement [`PacketBuf`], so stages are written once.

/// Error from growing a buffer beyond its head- or tailroom.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NoRoom;

impl core::fmt::Display for NoRoom {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("no head- or tailroom left in packet buffer")
    }
}

impl std::error::Error for NoRoom {}

/// A packet buffer with (optional) head- and tailroom, like a DPDK mbuf.
pub trait PacketBuf {
    /// The packet bytes.
    fn data(&self) -> &[u8];
    /// The packet bytes, writable.
    fn data_mut(&mut self) -> &mut [u8];
    /// Bytes that [`prepend`](Self::prepend) can still add at the front.
    fn headroom(&self) -> usize;
    /// Bytes that [`append`](Self::append) can still add at the end.
    fn tailroom(&self) -> usize;
    /// Grows the packet by `n` bytes at the front (contents unspecified).
    fn prepend(&mut self, n: usize) -> Result<(), NoRoom>;
    /// Removes `n` bytes from the front.
    fn adj(&mut self, n: usize) -> Result<(), NoRoom>;
    /// Grows the packet by `n` bytes at the end (contents unspecified).
    fn append(&mut self, n: usize) -> Result<(), NoRoom>;
    /// Removes `n` bytes from the end.
    fn trim(&mut self, n: usize) -> Result<(), NoRoom>;

    /// Grows the packet by `n` bytes at the front, like
    /// [`prepend`](Self::prepend), and returns the grown packet split into
    /// its first `N` bytes (the `n` new ones, contents unspecified, and
    /// what followed them) as an array and the rest: a caller writing a
    /// fixed-size header at the front needs no further bounds checks.
    /// `Err(NoRoom)` if the headroom is short of `n` or the grown packet
    /// would be shorter than `N` bytes; the packet is then left as it was.
    fn prepend_front<const N: usize>(
        &mut self,
        n: usize,
    ) -> Result<(&mut [u8; N], &mut [u8]), NoRoom>
    where
        Self: Sized,
    {
        if self.headroom() < n || self.len().saturating_add(n) < N {
            return Err(NoRoom);
        }
        self.prepend(n)?;
        self.data_mut().split_first_chunk_mut::<N>().ok_or(NoRoom)
    }

    /// Packet length in bytes.
    fn len(&self) -> usize {
        self.data().len()
    }

    /// Whether the packet is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Opens an `n`-byte zeroed gap at offset `at` by moving the first `at` bytes
/// forward into the headroom (cheap when `at` is a short header prefix, as when
/// a shim is inserted after the IP header).
pub fn insert_gap<B: PacketBuf + ?Sized>(buf: &mut B, at: usize, n: usize) -> Result<(), NoRoom> {
    if at > buf.len() {
        return Err(NoRoom);
    }
    buf.prepend(n)?;
    let d = buf.data_mut();
    d.copy_within(n..n + at, 0);
    d[at..at + n].fill(0);
    Ok(())
}

/// Removes `n` bytes at offset `at` by moving the first `at` bytes backward.
pub fn remove_gap<B: PacketBuf + ?Sized>(buf: &mut B, at: usize, n: usize) -> Result<(), NoRoom> {
    if at.checked_add(n).is_none_or(|end| end > buf.len()) {
        return Err(NoRoom);
    }
    buf.data_mut().copy_within(0..at, n);
    buf.adj(n)
}

/// Capacity of a [`Frame`]: room for a 1500-byte MTU packet plus jumbo-ish slack.
pub const FRAME_CAPACITY: usize = 2048;
/// Headroom a fresh [`Frame`] reserves, as DPDK's `RTE_PKTMBUF_HEADROOM`.
pub const FRAME_HEADROOM: usize = 128;

/// A fixed-capacity heap buffer with headroom, recycled through a pool by the
/// software backends so that no allocation happens per packet.
#[derive(Clone)]
pub struct Frame {
    bytes: Box<[u8; FRAME_CAPACITY]>,
    start: usize,
    end: usize,
}

impl Frame {
    /// An empty frame with the default headroom.
    pub fn new() -> Self {
        Frame { bytes: Box::new([0u8; FRAME_CAPACITY]), start: FRAME_HEADROOM, end: FRAME_HEADROOM }
    }

    /// Resets to an empty packet with the default headroom.
    pub fn reset(&mut self) {
        self.start = FRAME_HEADROOM;
        self.end = FRAME_HEADROOM;
    }

    /// Replaces the contents with `data` (after the default headroom).
    pub fn set(&mut self, data: &[u8]) -> Result<(), NoRoom> {
        if data.len() > FRAME_CAPACITY - FRAME_HEADROOM {
            return Err(NoRoom);
        }
        self.start = FRAME_HEADROOM;
        self.end = FRAME_HEADROOM + data.len();
        self.bytes[self.start..self.end].copy_from_slice(data);
        Ok(())
    }

    /// A frame holding a copy of `data`.
    pub fn from_slice(data: &[u8]) -> Result<Self, NoRoom> {
        let mut f = Frame::new();
        f.set(data)?;
        Ok(f)
    }
}

impl Default for Frame {
    fn default() -> Self {
        Frame::new()
    }
}

impl core::fmt::Debug for Frame {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Frame").field("len", &self.len()).field("headroom", &self.start).finish()
    }
}

impl PacketBuf for Frame {
    fn data(&self) -> &[u8] {
        &self.bytes[self.start..self.end]
    }
    fn data_mut(&mut self) -> &mut [u8] {
        &mut self.bytes[self.start..self.end]
    }
    fn headroom(&self) -> usize {
        self.start
    }
    fn tailroom(&self) -> usize {
        FRAME_CAPACITY - self.end
    }
    fn prepend(&mut self, n: usize) -> Result<(), NoRoom> {
        self.start = self.start.checked_sub(n).ok_or(NoRoom)?;
        Ok(())
    }
    #[inline]
    fn prepend_front<const N: usize>(
        &mut self,
        n: usize,
    ) -> Result<(&mut [u8; N], &mut [u8]), NoRoom> {
        // A constant `n` folds this away; below the capacity, a `start`
        // short of `n` wraps far past `end` and the slice check fails.
        if n > FRAME_CAPACITY {
            return Err(NoRoom);
        }
        let start = self.start.wrapping_sub(n);
        let data = self.bytes.get_mut(start..self.end).ok_or(NoRoom)?;
        let split = data.split_first_chunk_mut::<N>().ok_or(NoRoom)?;
        self.start = start;
        Ok(split)
    }
    fn adj(&mut self, n: usize) -> Result<(), NoRoom> {
        if n > self.end - self.start {
            return Err(NoRoom);
        }
        self.start += n;
        Ok(())
    }
    fn append(&mut self, n: usize) -> Result<(), NoRoom> {
        if n > self.tailroom() {
            return Err(NoRoom);
        }
        self.end += n;
        Ok(())
    }
    fn trim(&mut self, n: usize) -> Result<(), NoRoom> {
        if n > self.end - self.start {
            return Err(NoRoom);
        }
        self.end -= n;
        Ok(())
    }
}

/// `Vec<u8>` as a buffer for tests and tools: unlimited room, but prepending
/// moves the whole packet (never use it on a fast path).
impl PacketBuf for Vec<u8> {
    fn data(&self) -> &[u8] {
        self
    }
    fn data_mut(&mut self) -> &mut [u8] {
        self
    }
    fn headroom(&self) -> usize {
        usize::MAX
    }
    fn tailroom(&self) -> usize {
        usize::MAX
    }
    fn prepend(&mut self, n: usize) -> Result<(), NoRoom> {
        self.splice(0..0, core::iter::repeat_n(0u8, n));
        Ok(())
    }
    fn adj(&mut self, n: usize) -> Result<(), NoRoom> {
        if n > self.len() {
            return Err(NoRoom);
        }
        self.drain(..n);
        Ok(())
    }
    fn append(&mut self, n: usize) -> Result<(), NoRoom> {
        self.resize(self.len() + n, 0);
        Ok(())
    }
    fn trim(&mut self, n: usize) -> Result<(), NoRoom> {
        let len = self.len().checked_sub(n).ok_or(NoRoom)?;
        self.truncate(len);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_head_and_tail_room() {
        let mut f = Frame::from_slice(&[1, 2, 3, 4]).unwrap();
        assert_eq!(f.headroom(), FRAME_HEADROOM);
        insert_gap(&mut f, 2, 3).unwrap();
        assert_eq!(f.data(), &[1, 2, 0, 0, 0, 3, 4]);
        remove_gap(&mut f, 2, 3).unwrap();
        assert_eq!(f.data(), &[1, 2, 3, 4]);
        assert_eq!(f.prepend(FRAME_HEADROOM + 1), Err(NoRoom));
        assert_eq!(f.adj(5), Err(NoRoom));
        assert_eq!(f.trim(5), Err(NoRoom));
        assert!(f.append(f.tailroom()).is_ok());
        assert_eq!(f.append(1), Err(NoRoom));
    }

    #[test]
    fn prepend_front_grows_or_leaves_the_packet() {
        let mut f = Frame::from_slice(&[1, 2, 3, 4]).unwrap();
        let (w, rest) = f.prepend_front::<5>(2).unwrap();
        assert_eq!((&w[2..], &rest[..]), (&[1, 2, 3][..], &[4][..]));
        w[..2].copy_from_slice(&[8, 9]);
        assert_eq!((f.data(), f.headroom()), (&[8, 9, 1, 2, 3, 4][..], FRAME_HEADROOM - 2));
        // The array may take the whole packet.
        let (w, rest) = f.prepend_front::<7>(1).unwrap();
        assert_eq!((&w[1..], rest.len()), (&[8, 9, 1, 2, 3, 4][..], 0));
        f.adj(1).unwrap();
        // Too short for the array, or no headroom: nothing changes.
        assert_eq!(f.prepend_front::<9>(2), Err(NoRoom));
        assert_eq!(f.prepend_front::<4>(FRAME_HEADROOM - 1), Err(NoRoom));
        assert_eq!(f.prepend_front::<4>(usize::MAX), Err(NoRoom));
        assert_eq!((f.len(), f.headroom()), (6, FRAME_HEADROOM - 2));
        let (w, rest) = f.prepend_front::<0>(FRAME_HEADROOM - 2).unwrap();
        assert_eq!((w.len(), rest.len()), (0, FRAME_HEADROOM + 4));
        assert_eq!(f.headroom(), 0);
        // The default method (here `Vec`'s unlimited headroom).
        let mut v = vec![1u8, 2];
        assert_eq!(
            v.prepend_front::<3>(1).map(|(w, r)| (w[1..] == [1, 2], r.len())),
            Ok((true, 0))
        );
        assert_eq!(v.prepend_front::<5>(1), Err(NoRoom));
        assert_eq!(v.len(), 3);
    }

    #[test]
    fn vec_gap() {
        let mut v = vec![1u8, 2, 3];
        insert_gap(&mut v, 1, 2).unwrap();
        assert_eq!(v, [1, 0, 0, 2, 3]);
        remove_gap(&mut v, 1, 2).unwrap();
        assert_eq!(v, [1, 2, 3]);
        assert_eq!(remove_gap(&mut v, 2, 2), Err(NoRoom));
        assert_eq!(insert_gap(&mut v, 4, 1), Err(NoRoom));
    }
}
