//! Pass 1, locating: where a packet's FlowPolice shim and addresses are,
//! its flow ID, and the fast path for the common regular packet.

use packet::ethernet::{ethertype, Ethernet};
use packet::flowpolice::FlowPolice as Shim;
use packet::ipv4::{protocol, Ipv4};
use packet::ipv6::Ipv6;
use packet::ipv6_ext::ExtConfig;
use pipeline::{Batch, PacketBuf, Proto, L3, NO_OFFSET};

use super::scratch::{Cap, Carried, Located};
use super::FlowPolice;
use crate::config::LinkLayer;
use crate::flowkey::FlowKeying;

/// The fragment offset's bits (the low 13 of the big-endian field at IP
/// bytes 6–7) in the little-endian `u16` of those bytes.
const FRAG_MASK: u16 = 0xff1f;

impl FlowPolice {
    /// Finds the shim of packet `i`; `Ok(None)` for packets that are not FlowPolice.
    pub(super) fn locate<B: PacketBuf>(
        &self,
        batch: &Batch<B>,
        i: usize,
    ) -> Result<Option<Located>, packet::Error> {
        let m = batch.meta(i);
        let data = batch.data(i);
        let (l3, l3_off) = if m.l3 != L3::None && m.l3_off != NO_OFFSET {
            (m.l3, usize::from(m.l3_off))
        } else {
            match self.link {
                LinkLayer::Ip => match data.first().map(|b| b >> 4) {
                    Some(4) => (L3::Ipv4, 0),
                    Some(6) => (L3::Ipv6, 0),
                    Some(_) => return Ok(None),
                    None => return Err(packet::Error::Truncated),
                },
                LinkLayer::Ethernet => {
                    let eth = Ethernet::new_checked(data)?;
                    match eth.ethertype() {
                        ethertype::IPV4 => (L3::Ipv4, eth.header_len()),
                        ethertype::IPV6 => (L3::Ipv6, eth.header_len()),
                        _ => return Ok(None),
                    }
                }
            }
        };
        let ip = data.get(l3_off..).ok_or(packet::Error::Truncated)?;
        let parsed_shim = (m.proto == Proto::FlowPolice && m.proto_off != NO_OFFSET)
            .then(|| usize::from(m.proto_off));
        let (shim, end, v6) = match l3 {
            L3::Ipv4 => {
                let v4 = Ipv4::new_checked(ip)?;
                if v4.protocol() != protocol::FLOWPOLICE || v4.frag_offset() != 0 {
                    return Ok(None);
                }
                (
                    parsed_shim.unwrap_or(l3_off + v4.header_len()),
                    l3_off + usize::from(v4.total_len()),
                    false,
                )
            }
            L3::Ipv6 => {
                let v6 = Ipv6::new_checked(ip)?;
                let end = l3_off + packet::ipv6::HEADER_LEN + usize::from(v6.payload_len());
                let shim = match parsed_shim {
                    Some(s) => s,
                    None => {
                        let chain = v6.walk_ext(&ExtConfig::DEFAULT)?;
                        if chain.upper_protocol != protocol::FLOWPOLICE
                            || chain.fragment.is_some_and(|f| f.is_later_fragment())
                        {
                            return Ok(None);
                        }
                        l3_off + chain.upper_offset
                    }
                };
                (shim, end, true)
            }
            L3::None => return Ok(None),
        };
        let hdr = data.get(shim..end).ok_or(packet::Error::Truncated)?;
        Shim::new_checked(hdr)?;
        if shim > usize::from(u16::MAX - 1) {
            return Err(packet::Error::unsupported("shim offset"));
        }
        Ok(Some(Located { shim, l3_off, v6 }))
    }

    /// The packet's source and destination addresses (4 or 16 bytes each;
    /// `locate` checked that the header holds them).
    pub(super) fn addrs<'d>(data: &'d [u8], l: &Located) -> (&'d [u8], &'d [u8]) {
        if l.v6 {
            (&data[l.l3_off + 8..l.l3_off + 24], &data[l.l3_off + 24..l.l3_off + 40])
        } else {
            (&data[l.l3_off + 12..l.l3_off + 16], &data[l.l3_off + 16..l.l3_off + 20])
        }
    }

    #[inline(always)]
    pub(super) fn flow_id_of(&self, data: &[u8], l: &Located) -> u64 {
        if !l.v6 {
            // One bounds check for both addresses.
            let a: Option<&[u8; 8]> =
                data.get(l.l3_off + 12..l.l3_off + 20).and_then(|a| a.try_into().ok());
            let Some(a) = a else { return 0 };
            let src = u32::from_be_bytes([a[0], a[1], a[2], a[3]]);
            let dst = u32::from_be_bytes([a[4], a[5], a[6], a[7]]);
            return self.keying.v4(src, dst);
        }
        let (s, d) = Self::addrs(data, l);
        {
            let mut a = [0u8; 16];
            let mut b = [0u8; 16];
            a.copy_from_slice(s);
            b.copy_from_slice(d);
            self.keying.v6(u128::from_be_bytes(a), u128::from_be_bytes(b))
        }
    }

    /// The common packet in one read: an option-less, unfragmented IPv4
    /// header directly followed by a regular shim (the case
    /// [`Self::locate`] accepts with the shim at `l3_off + 20`), read as
    /// one fixed 48-byte view. `None`: take the generic path (which accepts
    /// this case too, with the same result).
    #[inline(always)]
    pub(super) fn fast_regular(&self, m: &pipeline::Meta, data: &[u8]) -> Option<Carried> {
        Self::fast_regular_with(self.link, &self.keying, m, data)
    }

    /// [`Self::fast_regular`] with the stage's link layer and flow keying
    /// passed in (a loop that borrows the stage's other fields at once).
    #[inline(always)]
    pub(super) fn fast_regular_with(
        link: LinkLayer,
        keying: &FlowKeying,
        m: &pipeline::Meta,
        data: &[u8],
    ) -> Option<Carried> {
        let l3_off = if m.l3 != L3::None && m.l3_off != NO_OFFSET {
            if m.l3 != L3::Ipv4 {
                return None;
            }
            usize::from(m.l3_off)
        } else {
            match link {
                LinkLayer::Ip => 0,
                LinkLayer::Ethernet => {
                    let t: &[u8; 2] = data.get(12..14)?.try_into().ok()?;
                    if u16::from_be_bytes(*t) != ethertype::IPV4 {
                        return None;
                    }
                    packet::ethernet::HEADER_LEN
                }
            }
        };
        let shim = l3_off + 20;
        if m.proto == Proto::FlowPolice
            && m.proto_off != NO_OFFSET
            && usize::from(m.proto_off) != shim
        {
            return None;
        }
        Self::fast_regular_at::<false>(l3_off, keying, data)
    }

    /// Whether every one of `metas` is fresh metadata (no stage found a
    /// layer): [`Self::fast_regular_with`] then ignores them. (It also
    /// ignores some parsed metadata; such bursts take the path that reads
    /// it.) Folded without a branch per packet.
    #[inline(always)]
    pub(super) fn all_fresh(metas: &[pipeline::Meta]) -> bool {
        const _: () = assert!(L3::None as u8 == 0 && Proto::None as u8 == 0);
        // The two bytes as one word: one load each where the layout puts
        // them side by side.
        metas.iter().fold(0u16, |a, m| a | u16::from_le_bytes([m.l3 as u8, m.proto as u8])) == 0
    }

    /// [`Self::fast_regular_with`] past the metadata, with the IP header at
    /// `l3_off`. `PLAIN`: `keying` has no protected IPv4 destination, so
    /// the flow ID of the addresses is the destination (no lookup).
    #[inline(always)]
    pub(super) fn fast_regular_at<const PLAIN: bool>(
        l3_off: usize,
        keying: &FlowKeying,
        data: &[u8],
    ) -> Option<Carried> {
        let shim = l3_off + 20;
        let p: &[u8; 48] = data.get(l3_off..)?.first_chunk()?;
        let total = usize::from(u16::from_be_bytes([p[2], p[3]]));
        // The fixed fields in four compares with constants of at most 32
        // bits (a 64-bit mask is rebuilt in a register for every packet of
        // a loop whose registers are all taken): version/IHL 0x45 (byte 0);
        // IP bytes 6–9 as one little-endian word, the fragment offset (the
        // low 13 bits of bytes 6–7) zero and the protocol (byte 9)
        // FlowPolice, the TTL (byte 8) masked out; the shim's type bit
        // (regular: 10 or 11, the top bit of shim byte 1); its length
        // field, 28 (shim bytes 2–3).
        const FRAG_PROTO_MASK: u32 = FRAG_MASK as u32 | 0xff << 24;
        const FRAG_PROTO: u32 = (protocol::FLOWPOLICE as u32) << 24;
        // One 4-byte load: written as `[p[6], p[7], p[8], p[9]]` it
        // compiled into byte loads (+5 instructions per packet, measured).
        let (_, w) = p.split_first_chunk::<6>()?;
        let (frag_proto, _) = w.split_first_chunk::<4>()?;
        const SHIM_LEN: [u8; 2] = (packet::flowpolice::REGULAR_LEN as u16).to_be_bytes();
        // `total ≥ 48`: the 28-byte shim lies inside the datagram.
        if p[0] != 0x45
            || u32::from_le_bytes(*frag_proto) & FRAG_PROTO_MASK != FRAG_PROTO
            || p[21] & 0x80 == 0
            || [p[22], p[23]] != SHIM_LEN
            || total < 20 + packet::flowpolice::REGULAR_LEN
            || l3_off + total > data.len()
            || shim > usize::from(u16::MAX - 1)
        {
            return None;
        }
        let src = u32::from_be_bytes([p[12], p[13], p[14], p[15]]);
        let dst = u32::from_be_bytes([p[16], p[17], p[18], p[19]]);
        let (_, h) = p.split_first_chunk::<20>()?;
        let h: &[u8; 28] = h.first_chunk()?;
        let addr_fid = if PLAIN { u64::from(dst) } else { keying.v4(src, dst) };
        Some(Self::carried(h, shim, addr_fid))
    }

    /// The flow ID a regular shim carries and its capability's MAC input
    /// (bytes 4..18 as on the wire, then two zero bytes), read as
    /// [`Cap::read`] reads them.
    #[inline(always)]
    pub(super) fn carried(h: &[u8; 28], shim: usize, addr_fid: u64) -> Carried {
        let c = Cap::read(h.first_chunk().unwrap_or(&[0; 26]));
        Carried { shim, addr_fid, fid: c.fid, block: c.block() }
    }
}
