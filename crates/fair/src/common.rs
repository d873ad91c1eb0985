//! Configuration and helpers shared by the data-plane stages.

use packet::fair::{Carrier, FairLocation};
use pipeline::{DropReason, Meta, Proto, L3, NO_OFFSET};

use crate::wire::{self, FairPkt, FAIR_NH, FAIR_PROTO};

/// The protocol numbers that announce a FAIR header (§4, configurable).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Codes {
    /// IPv6 Next Header value (default 253).
    pub v6: u8,
    /// IPv4 Protocol value (default 253).
    pub v4: u8,
}

impl Default for Codes {
    fn default() -> Self {
        Codes { v6: FAIR_NH, v4: FAIR_PROTO }
    }
}

impl Codes {
    /// The code for `l3`.
    #[inline]
    pub fn for_l3(&self, l3: L3) -> u8 {
        if l3 == L3::Ipv6 {
            self.v6
        } else {
            self.v4
        }
    }
}

/// What a frame starts with when no parse stage has set `meta.l3_off`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Framing {
    /// Ethernet II (optionally one VLAN tag).
    #[default]
    Ethernet,
    /// A bare IP packet (version nibble decides).
    Ip,
}

/// The IP header of a frame: from the metadata if a parse stage set it, else found here.
#[inline]
pub fn l3_of(frame: &[u8], meta: &Meta, framing: Framing) -> Option<(usize, L3)> {
    if meta.l3_off != NO_OFFSET && meta.l3 != L3::None {
        return Some((meta.l3_off as usize, meta.l3));
    }
    match framing {
        Framing::Ethernet => wire::find_l3(frame),
        Framing::Ip => match frame.first()? >> 4 {
            4 => Some((0, L3::Ipv4)),
            6 => Some((0, L3::Ipv6)),
            _ => None,
        },
    }
}

/// Locates the FAIR header of a packet. Uses `meta.proto_off` when a parse stage
/// already found the header (trusting its validation), else parses (§2.9).
/// `Ok(None)`: not a FAIR packet (or not IP).
#[inline]
pub fn locate_meta(
    frame: &[u8],
    meta: &Meta,
    framing: Framing,
    codes: Codes,
) -> Result<Option<FairPkt>, DropReason> {
    let Some((l3_off, l3)) = l3_of(frame, meta, framing) else { return Ok(None) };
    if meta.proto == Proto::Fair
        && meta.proto_off != NO_OFFSET
        && (meta.proto_off as usize) > l3_off
    {
        let carrier = if l3 == L3::Ipv6 { Carrier::Ipv6 } else { Carrier::Ipv4 };
        let off = meta.proto_off as usize - l3_off;
        let view = packet::fair::Fair::new_checked(
            frame.get(meta.proto_off as usize..).ok_or(DropReason::Truncated)?,
            carrier,
        )?;
        // The byte naming FAIR: IPv4 Protocol; IPv6 fixed header, or HBH when FAIR follows it.
        let nh_offset = match carrier {
            Carrier::Ipv4 => 9,
            Carrier::Ipv6 if off == 40 => 6,
            Carrier::Ipv6 => 40,
        };
        let loc = FairLocation { offset: off, len: view.header_len(), nh_offset, carrier };
        return Ok(Some(FairPkt { l3_off, loc }));
    }
    wire::locate(frame, l3_off, l3, codes.for_l3(l3)).map_err(DropReason::from)
}

/// Records a located header in the metadata for later stages.
#[inline]
pub fn set_meta(meta: &mut Meta, p: &FairPkt) {
    meta.l3_off = p.l3_off as u16;
    meta.l3 = if p.carrier() == Carrier::Ipv6 { L3::Ipv6 } else { L3::Ipv4 };
    meta.proto = Proto::Fair;
    meta.proto_off = p.fair_off() as u16;
}
