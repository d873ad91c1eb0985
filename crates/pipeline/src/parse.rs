//! The `Parse` stage: find the layers once, so protocol stages don't re-parse.
//!
//! It walks Ethernet (optionally 802.1Q-tagged) → IPv4 / IPv6 (with the
//! extension-header chain) and recognises the project's protocols: the FAIR
//! header (IPv6 extension header or IPv4 shim), the FlowPolice shim and SCION
//! over UDP. It fills [`Meta`](crate::Meta)'s offsets and a flow hash and drops
//! anything malformed with the parser's typed error as the reason.
//!
//! SCION over UDP right after IPv4 or IPv6 is not walked per packet: a burst's
//! last packet, when walked and SCION, leaves a template, and a frame whose
//! headers match a template in every byte the walk decides on (and whose
//! lengths fit) is classified as the template was, by a few word compares
//! (`Repeat`, `Repeat6`).

use core::any::Any;

use packet::ethernet::{ethertype, Ethernet};
use packet::ipv4::{protocol, Ipv4};
use packet::ipv6::Ipv6;
use packet::ipv6_ext::ExtConfig;
use packet::udp::Udp;
use packet::Result;

use crate::batch::{Batch, Indices, Proto, ScionHint, L3, NO_OFFSET};
use crate::buf::PacketBuf;
use crate::element::{config_of, Element, Reconfigured, Refused};
use crate::stage::Stage;
use crate::time::Now;
use crate::verdict::DropReason;

/// What the parse stage recognises, and how strict it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseConfig {
    /// UDP destination ports that carry SCION (project default: 30041).
    pub scion_ports: Vec<u16>,
    /// IP protocol / next-header of the FAIR header (default 253); `None` disables FAIR.
    pub fair_protocol: Option<u8>,
    /// IP protocol / next-header of the FlowPolice shim (default 254); `None` disables it.
    pub flowpolice_protocol: Option<u8>,
    /// Verify the IPv4 header checksum (disable when the NIC already did).
    pub verify_ipv4_checksum: bool,
    /// Drop IP fragments instead of forwarding them as plain IP (default: forward;
    /// protocol headers are only looked for in first fragments).
    pub drop_fragments: bool,
    /// Drop frames that are not IPv4/IPv6 (default: forward them unparsed).
    pub drop_non_ip: bool,
}

impl Default for ParseConfig {
    fn default() -> Self {
        ParseConfig {
            scion_ports: vec![30041],
            fair_protocol: Some(protocol::FAIR),
            flowpolice_protocol: Some(protocol::FLOWPOLICE),
            verify_ipv4_checksum: true,
            drop_fragments: false,
            drop_non_ip: false,
        }
    }
}

/// The layers found in one frame (offsets from the start of the frame).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layers {
    /// Network layer.
    pub l3: L3,
    /// Offset of the IP header, or [`NO_OFFSET`].
    pub l3_off: u16,
    /// Offset of the UDP/TCP header, or [`NO_OFFSET`].
    pub l4_off: u16,
    /// Recognised project protocol.
    pub proto: Proto,
    /// Offset of that protocol's header, or [`NO_OFFSET`].
    pub proto_off: u16,
    /// Flow hash over addresses and protocol (software RSS key).
    pub hash: u32,
    /// Whether the packet is an IP fragment.
    pub fragment: bool,
}

impl Layers {
    const NONE: Layers = Layers {
        l3: L3::None,
        l3_off: NO_OFFSET,
        l4_off: NO_OFFSET,
        proto: Proto::None,
        proto_off: NO_OFFSET,
        hash: 0,
        fragment: false,
    };
}

/// Mixes address words into a 32-bit flow hash (multiply-xorshift; not keyed:
/// it only spreads load, tables that face attackers key their own hashes).
#[inline]
fn mix(words: &[u8]) -> u32 {
    let mut h: u64 = 0x9e37_79b9_7f4a_7c15;
    for chunk in words.chunks(8) {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        h = (h ^ u64::from_le_bytes(w)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h ^= h >> 31;
    }
    (h ^ (h >> 32)) as u32
}

fn off(x: usize) -> u16 {
    // Frames are at most a few KiB; saturate rather than wrap for absurd inputs.
    u16::try_from(x).unwrap_or(NO_OFFSET)
}

/// Finds the layers of an Ethernet frame.
pub fn classify(frame: &[u8], cfg: &ParseConfig) -> Result<Layers> {
    let eth = Ethernet::new_checked(frame)?;
    let l3_off = eth.header_len();
    let mut out = Layers::NONE;
    let (upper, upper_off, fragment) = match eth.ethertype() {
        ethertype::IPV4 => {
            let ip = Ipv4::new_checked(&frame[l3_off..])?;
            if cfg.verify_ipv4_checksum && !ip.verify_checksum() {
                return Err(packet::Error::Checksum);
            }
            out.l3 = L3::Ipv4;
            out.hash = mix(&frame[l3_off + 12..l3_off + 20]) ^ u32::from(ip.protocol());
            (ip.protocol(), l3_off + ip.header_len(), ip.is_fragment())
        }
        ethertype::IPV6 => {
            let ip = Ipv6::new_checked(&frame[l3_off..])?;
            let ext_cfg = ExtConfig { fair_next_header: cfg.fair_protocol, ..ExtConfig::DEFAULT };
            let chain = ip.walk_ext(&ext_cfg)?;
            out.l3 = L3::Ipv6;
            out.hash = mix(&frame[l3_off + 8..l3_off + 40]);
            if let Some((fair_off, _)) = chain.fair {
                out.proto = Proto::Fair;
                out.proto_off = off(l3_off + fair_off);
            }
            let fragment = chain.fragment.is_some();
            let later = chain.fragment.is_some_and(|f| f.is_later_fragment());
            if later {
                (protocol::IPV6_NONXT, l3_off + chain.upper_offset, fragment)
            } else {
                (chain.upper_protocol, l3_off + chain.upper_offset, fragment)
            }
        }
        _ => return Ok(out),
    };
    out.l3_off = off(l3_off);
    out.fragment = fragment;
    if fragment && out.l3 == L3::Ipv4 {
        // Only the first IPv4 fragment carries the upper-layer header.
        let ip = Ipv4::new_unchecked(&frame[l3_off..]);
        if ip.frag_offset() != 0 {
            return Ok(out);
        }
    }
    if out.l3 == L3::Ipv4 && Some(upper) == cfg.fair_protocol {
        out.proto = Proto::Fair;
        out.proto_off = off(upper_off);
    } else if Some(upper) == cfg.flowpolice_protocol {
        out.proto = Proto::FlowPolice;
        out.proto_off = off(upper_off);
    } else if upper == protocol::UDP || upper == protocol::TCP {
        out.l4_off = off(upper_off);
        if upper == protocol::UDP {
            let udp = Udp::new_checked(&frame[upper_off..])?;
            if out.proto == Proto::None && is_scion_port(&cfg.scion_ports, udp.dst_port()) {
                out.proto = Proto::Scion;
                out.proto_off = off(upper_off + packet::udp::HEADER_LEN);
            }
        }
    }
    Ok(out)
}

/// Whether UDP destination port `p` carries SCION: one compare for the
/// usual single port (`contains` runs a vectorised search, ≈ 12
/// instructions per packet).
#[inline(always)]
fn is_scion_port(ports: &[u16], p: u16) -> bool {
    match ports {
        [only] => *only == p,
        _ => ports.contains(&p),
    }
}

/// Whether a 20-byte IPv4 header (no options) has a valid checksum: the
/// same answer as [`packet::checksum::verify`], over five 32-bit words and
/// without folding (the general loop cost ≈ 20 instructions per packet).
/// The one's complement sum of the 16-bit words is all ones exactly when
/// their plain sum is a nonzero multiple of 0xFFFF (folding keeps the value
/// mod 0xFFFF). Summing 32-bit words keeps that (2^16 ≡ 1 mod 0xFFFF), and
/// so does loading them little-endian without byte swaps (a swap multiplies
/// a word by 2^8, a unit mod 0xFFFF); the sum is zero only for an all-zero
/// header.
#[inline(always)]
pub fn ipv4_header_checksum_ok(ip: &[u8; 20]) -> bool {
    let w = |i: usize| {
        let b: [u8; 4] = ip[i..i + 4].try_into().unwrap_or_default();
        u64::from(u32::from_le_bytes(b))
    };
    let sum = w(0) + w(4) + w(8) + w(12) + w(16);
    sum != 0 && sum % 0xFFFF == 0
}

/// The common case of [`classify`], without its generality: an untagged
/// Ethernet frame with an IPv4 header of exactly 20 bytes (version 4,
/// IHL 5) that is not a fragment. Returns `None` for anything else (including
/// every frame `classify` would reject), so that the caller falls back to
/// [`classify`], which then gives the verdict and the typed error; when it
/// returns `Some(l)`, `classify` returns `Ok(l)` for the same frame (checked
/// by a property test).
///
/// Why: on a replayed capture the general walk (Ethernet view, IPv4 view,
/// length checks through slices, a `Result<Layers>` returned by value) cost
/// ≈ 150 instructions per packet; reading one fixed 34-byte array takes the
/// bounds checks out and lets the 20-byte checksum unroll.
#[inline(always)]
fn classify_ipv4_fast(frame: &[u8], cfg: &ParseConfig) -> Option<Layers> {
    const ETH: usize = 14;
    const L4: usize = ETH + 20;
    let h: &[u8; L4] = frame.get(..L4)?.try_into().ok()?;
    if u16::from_be_bytes([h[12], h[13]]) != ethertype::IPV4 || h[ETH] != 0x45 {
        return None;
    }
    let total = usize::from(u16::from_be_bytes([h[ETH + 2], h[ETH + 3]]));
    if total < 20 || total > frame.len() - ETH {
        return None;
    }
    let ip: &[u8; 20] = h[ETH..L4].try_into().ok()?;
    if cfg.verify_ipv4_checksum && !ipv4_header_checksum_ok(ip) {
        return None;
    }
    // Any fragment (MF or an offset) takes the general path.
    if u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0 {
        return None;
    }
    let upper = ip[9];
    let mut out = Layers::NONE;
    out.l3 = L3::Ipv4;
    out.l3_off = ETH as u16;
    out.hash = mix(&ip[12..20]) ^ u32::from(upper);
    if Some(upper) == cfg.fair_protocol {
        out.proto = Proto::Fair;
        out.proto_off = L4 as u16;
    } else if Some(upper) == cfg.flowpolice_protocol {
        out.proto = Proto::FlowPolice;
        out.proto_off = L4 as u16;
    } else if upper == protocol::UDP || upper == protocol::TCP {
        out.l4_off = L4 as u16;
        if upper == protocol::UDP {
            let udp = Udp::new_checked(&frame[L4..]).ok()?;
            if is_scion_port(&cfg.scion_ports, udp.dst_port()) {
                out.proto = Proto::Scion;
                out.proto_off = (L4 + packet::udp::HEADER_LEN) as u16;
            }
        }
    }
    Some(out)
}

/// The little-endian words of `h` at `at`.
#[inline(always)]
fn words_at<const N: usize, const M: usize>(h: &[u8; N], at: [usize; M]) -> [u64; M] {
    at.map(|at| {
        u64::from_le_bytes(h.get(at..at + 8).and_then(|w| w.try_into().ok()).unwrap_or_default())
    })
}

/// Big-endian 16-bit field at `at` of `h`, as a length.
#[inline(always)]
fn be16_at<const N: usize>(h: &[u8; N], at: usize) -> usize {
    match h.get(at..at + 2) {
        Some(&[a, b]) => usize::from(u16::from_be_bytes([a, b])),
        _ => 0,
    }
}

/// Bytes of an Ethernet/IPv4/UDP/SCION frame that [`Repeat`] reads: up to
/// byte 10 of the SCION common header at 42.
const REPEAT_LEN: usize = 52;

/// Offsets of the little-endian words [`Repeat`] compares.
const REPEAT_AT: [usize; 5] = [12, 20, 28, 36, 44];

/// Which bytes of each [`REPEAT_AT`] word decide the classification of a
/// frame, besides its length fields, its IPv4 checksum and its addresses
/// (which [`Repeat::hash`] checks and reads for a frame whose headers are
/// not the template's):
const REPEAT_MASK: [u64; 5] = [
    // 12..20: EtherType, IPv4 version/IHL (not ToS, total length, ID).
    0x0000_0000_00ff_ffff,
    // 20..28: the fragment bits (not DF) and the protocol (not TTL, the
    // checksum, the source address).
    0x0000_0000_ff00_ff3f,
    // 28..36: nothing (addresses and the UDP source port).
    0,
    // 36..44: UDP destination port and the SCION version nibble (not the
    // UDP length or checksum, not SCION's traffic class or flow ID).
    0x00f0_0000_0000_ffff,
    // 44..52: SCION NextHdr, HdrLen, PathType and DT/DL/ST/SL (not the
    // flow ID or PayloadLen).
    0xffff_0000_ffff_0000,
];

/// [`REPEAT_MASK`] with the length fields, the IPv4 header in full and
/// SCION's PayloadLen: a frame whose bytes equal the template's under this
/// mask has the template's checksum, flow hash and lengths.
const REPEAT_SAME: [u64; 5] =
    [u64::MAX, u64::MAX, 0x0000_ffff_ffff_ffff, 0x00f0_0000_ffff_ffff, 0xffff_ffff_ffff_0000];

/// Which bytes of each of the first three [`REPEAT_AT`] words belong to
/// the IPv4 header (14..34).
const REPEAT_IP: [u64; 3] = [0xffff_ffff_ffff_0000, u64::MAX, 0x0000_ffff_ffff_ffff];

/// The classification of a SCION-over-IPv4 frame that the IPv4 fast path
/// parsed (untagged Ethernet, 20-byte IPv4 header, no fragment, UDP to a
/// SCION port, a common header that passed the check), as a template for
/// the frames after it: the next packets of a link carry the same headers
/// up to lengths, IPv4 ID and checksum, addresses and flow IDs.
///
/// A frame whose [`REPEAT_MASK`] bytes equal the template's and whose
/// length fields fit the frame is classified as the template was; only its
/// flow hash is its own, and its IPv4 checksum is verified unless its IPv4
/// header is the template's. That is exactly what [`classify_ipv4_fast`]
/// and [`scion_hint`] find for it (checked by a property test against the
/// per-packet path): every byte those read is either compared here, or a
/// length checked here as they check it, or the checksum or the addresses.
/// Such a frame becomes the template, so that the frames after it (most
/// often of the same length) find all of [`REPEAT_SAME`] equal and need one
/// length check.
///
/// Why: on a replayed capture of SCION over IPv4 the per-packet walk cost
/// the stage ≈ 144 instructions per packet, the template ≈ 52.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Repeat {
    /// The template's words at [`REPEAT_AT`].
    words: [u64; 5],
    /// The frame length its length fields need (a frame at least this
    /// long passes every length check the template passed).
    need: usize,
    /// The template's SCION HdrLen in bytes.
    hdr_len: usize,
    /// Its layers (with its flow hash) and SCION hint.
    layers: Layers,
    hint: ScionHint,
    /// The same as metadata.
    meta: crate::batch::Meta,
}

impl Repeat {
    /// The template of `frame`, which [`classify_ipv4_fast`] classified as
    /// `l` and [`scion_hint`] hinted `hint`; `None` unless that is SCION
    /// over UDP with a checked common header.
    #[inline]
    fn of(frame: &[u8], l: &Layers, hint: ScionHint) -> Option<Repeat> {
        if l.proto != Proto::Scion || hint == ScionHint::UNCHECKED {
            return None;
        }
        let h: &[u8; REPEAT_LEN] = frame.first_chunk()?;
        let hdr_len = usize::from(h[47]) * 4;
        Some(Repeat {
            words: words_at(h, REPEAT_AT),
            need: Self::need(h, hdr_len),
            hdr_len,
            layers: *l,
            hint,
            meta: meta_of(l, hint),
        })
    }

    /// The frame length the length fields of `h` need: IPv4 total length,
    /// UDP length, SCION header and payload.
    #[inline(always)]
    fn need(h: &[u8; REPEAT_LEN], hdr_len: usize) -> usize {
        (14 + be16_at(h, 16)).max(34 + be16_at(h, 38)).max(42 + hdr_len + be16_at(h, 48))
    }

    /// The flow hash of `frame` if it is classified as the template, whose
    /// layers it then has with that hash (`None`: it may not be; the
    /// per-packet path decides). `verify`: whether the IPv4 checksum is
    /// verified.
    #[inline(always)]
    fn hash(&mut self, frame: &[u8], verify: bool) -> Option<u32> {
        let h: &[u8; REPEAT_LEN] = frame.first_chunk()?;
        let w = words_at(h, REPEAT_AT);
        let mut same = 0;
        for k in 0..5 {
            same |= (w[k] ^ self.words[k]) & REPEAT_SAME[k];
        }
        if same == 0 {
            return (frame.len() >= self.need).then_some(self.layers.hash);
        }
        self.other(h, frame.len(), verify)
    }

    /// [`hash`](Self::hash) of a frame with other lengths, IPv4 header or
    /// addresses than the template's; it becomes the template when
    /// classified as it.
    #[inline(never)]
    fn other(&mut self, h: &[u8; REPEAT_LEN], n: usize, verify: bool) -> Option<u32> {
        let w = words_at(h, REPEAT_AT);
        let x: [u64; 5] = core::array::from_fn(|k| w[k] ^ self.words[k]);
        let mut differ = 0;
        for k in 0..5 {
            differ |= x[k] & REPEAT_MASK[k];
        }
        // The length checks of the IPv4 header, UDP and the SCION common
        // header (`n >= REPEAT_LEN`, so no subtraction wraps).
        let total = be16_at(h, 16);
        let udp = be16_at(h, 38);
        let fits = (total >= 20)
            & (total <= n - 14)
            & (udp >= packet::udp::HEADER_LEN)
            & (udp <= n - 34)
            & (self.hdr_len + be16_at(h, 48) <= n - 42);
        if differ != 0 || !fits {
            return None;
        }
        let ip_differ = (x[0] & REPEAT_IP[0]) | (x[1] & REPEAT_IP[1]) | (x[2] & REPEAT_IP[2]);
        if ip_differ != 0 {
            let ip: &[u8; 20] = h.get(14..34)?.try_into().ok()?;
            if verify && !ipv4_header_checksum_ok(ip) {
                return None;
            }
            self.layers.hash = mix(&ip[12..20]) ^ u32::from(ip[9]);
        }
        self.words = w;
        self.need = Self::need(h, self.hdr_len);
        Some(self.layers.hash)
    }
}

/// Bytes of an Ethernet/IPv6/UDP/SCION frame that [`Repeat6`] reads: up to
/// byte 10 of the SCION common header at 62.
const REPEAT6_LEN: usize = 72;

/// Offsets of the little-endian words [`Repeat6`] compares: four words
/// around the addresses, which are hashed (22..54), then four.
const REPEAT6_AT: [usize; 8] = [22, 30, 38, 46, 12, 20, 56, 64];

/// Which bytes of each [`REPEAT6_AT`] word decide the classification of a
/// frame (besides the length fields, which [`Repeat6::hash`] checks for a
/// frame whose lengths are not the template's, and the addresses, whose
/// hash it takes):
const REPEAT6_MASK: [u64; 8] = [
    0,
    0,
    0,
    0,
    // 12..20: EtherType (not version, traffic class, flow label, payload
    // length).
    0x0000_0000_0000_ffff,
    // 20..28: Next Header (not the hop limit, the source address).
    0x0000_0000_0000_00ff,
    // 56..64: UDP destination port and the SCION version nibble.
    0x00f0_0000_0000_ffff,
    // 64..72: SCION NextHdr, HdrLen, PathType and DT/DL/ST/SL.
    0xffff_0000_ffff_0000,
];

/// [`REPEAT6_MASK`] with the addresses and the length fields: a frame
/// whose bytes equal the template's under this mask has its flow hash and
/// lengths.
const REPEAT6_SAME: [u64; 8] = [
    u64::MAX,
    u64::MAX,
    u64::MAX,
    u64::MAX,
    0xffff_0000_0000_ffff,
    0x0000_0000_0000_00ff,
    0x00f0_0000_ffff_ffff,
    0xffff_ffff_ffff_0000,
];

/// [`Repeat`] for SCION over IPv6: the classification of a frame that the
/// general path found to be SCION over UDP right after an IPv6 header
/// without extension headers, in untagged Ethernet, with a checked common
/// header. A frame whose [`REPEAT6_MASK`] bytes equal the template's and
/// whose length fields fit the frame is classified as the template was,
/// with its own flow hash: what [`classify`] and [`scion_hint`] find for
/// it (checked by a property test), since every byte they read is compared
/// here, or a length checked here as they check it, or an address. Such a
/// frame becomes the template.
///
/// Why: the general IPv6 walk costs the stage ≈ 234 instructions per SCION
/// packet, the template ≈ 56, ≈ 165 when every frame comes from another
/// address (its hash taken, the template rewritten).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Repeat6 {
    /// The template's words at [`REPEAT6_AT`].
    words: [u64; 8],
    /// The frame length its length fields need.
    need: usize,
    /// The template's SCION HdrLen in bytes.
    hdr_len: usize,
    layers: Layers,
    hint: ScionHint,
    /// The same as metadata.
    meta: crate::batch::Meta,
}

impl Repeat6 {
    /// The template of `frame`, which [`classify`] classified as `l` and
    /// [`scion_hint`] hinted `hint`; `None` unless that is SCION as
    /// [`Repeat6`] describes.
    #[inline]
    fn of(frame: &[u8], l: &Layers, hint: ScionHint) -> Option<Repeat6> {
        let plain = l.l3 == L3::Ipv6 && l.l3_off == 14 && l.l4_off == 54 && l.proto_off == 62;
        if !plain || l.proto != Proto::Scion || hint == ScionHint::UNCHECKED {
            return None;
        }
        let h: &[u8; REPEAT6_LEN] = frame.first_chunk()?;
        let hdr_len = usize::from(h[67]) * 4;
        Some(Repeat6 {
            words: words_at(h, REPEAT6_AT),
            need: Self::need(h, hdr_len),
            hdr_len,
            layers: *l,
            hint,
            meta: meta_of(l, hint),
        })
    }

    /// The frame length the length fields of `h` need: IPv6 payload
    /// length, UDP length, SCION header and payload.
    #[inline(always)]
    fn need(h: &[u8; REPEAT6_LEN], hdr_len: usize) -> usize {
        (54 + be16_at(h, 18)).max(54 + be16_at(h, 58)).max(62 + hdr_len + be16_at(h, 68))
    }

    /// The flow hash of `frame` if it is classified as the template, whose
    /// layers it then has with that hash (`None`: it may not be).
    #[inline(always)]
    fn hash(&mut self, frame: &[u8]) -> Option<u32> {
        let h: &[u8; REPEAT6_LEN] = frame.first_chunk()?;
        let w = words_at(h, REPEAT6_AT);
        let mut same = 0;
        for k in 0..8 {
            same |= (w[k] ^ self.words[k]) & REPEAT6_SAME[k];
        }
        if same == 0 {
            return (frame.len() >= self.need).then_some(self.layers.hash);
        }
        self.other(h, frame.len())
    }

    /// [`hash`](Self::hash) of a frame with other lengths or addresses
    /// than the template's; it becomes the template when classified as it.
    #[inline(never)]
    fn other(&mut self, h: &[u8; REPEAT6_LEN], n: usize) -> Option<u32> {
        let w = words_at(h, REPEAT6_AT);
        let x: [u64; 8] = core::array::from_fn(|k| w[k] ^ self.words[k]);
        let mut differ = 0;
        for k in 0..8 {
            differ |= x[k] & REPEAT6_MASK[k];
        }
        // The length checks of IPv6, UDP and the SCION common header
        // (`n >= REPEAT6_LEN`, so no subtraction wraps).
        let udp = be16_at(h, 58);
        let fits = (be16_at(h, 18) + 40 <= n - 14)
            & (udp >= packet::udp::HEADER_LEN)
            & (udp <= n - 54)
            & (self.hdr_len + be16_at(h, 68) <= n - 62);
        if differ != 0 || !fits {
            return None;
        }
        if (x[0] | x[1] | x[2] | x[3]) != 0 {
            self.layers.hash = mix(h.get(22..54)?);
        }
        self.words = w;
        self.need = Self::need(h, self.hdr_len);
        Some(self.layers.hash)
    }
}

/// The parse stage; put it first in every pipeline.
#[derive(Clone, Debug, Default)]
pub struct Parse {
    cfg: ParseConfig,
    /// A SCION-over-IPv4 classification, for the frames after it (learned
    /// from the last packet of a burst that was walked, kept across
    /// bursts; made under `cfg`, so dropped when it changes).
    repeat: Option<Repeat>,
    /// The same over IPv6.
    repeat6: Option<Repeat6>,
}

impl Parse {
    /// A parse stage with `cfg`.
    pub fn new(cfg: ParseConfig) -> Self {
        Parse { cfg, repeat: None, repeat6: None }
    }
}

impl Element for Parse {
    fn name(&self) -> &str {
        "parse"
    }

    fn reconfigure(
        &mut self,
        config: &dyn Any,
        _now: Now,
    ) -> core::result::Result<Reconfigured, Refused> {
        let cfg = config_of::<ParseConfig>(config, "parse")?;
        if *cfg == self.cfg {
            return Ok(Reconfigured::Unchanged);
        }
        self.cfg = cfg.clone();
        self.repeat = None;
        self.repeat6 = None;
        Ok(Reconfigured::APPLIED)
    }
}

impl<B: PacketBuf> Stage<B> for Parse {
    fn process(&mut self, batch: &mut Batch<B>, _now: Now) {
        // The packets of SCION links first, from the templates; then the
        // rest walked one by one. (Two loops: template code in the walk's
        // loop costs other traffic instructions per packet.)
        batch.note_layers_recorded();
        let last = batch.live_mask().checked_ilog2();
        let rest = self.by_templates(batch);
        self.walk(batch, rest);
        // Every IPv4 header recorded passed the checks, checksum included
        // (the fast path's, the general walk's or a template's): the next
        // stage need not check again.
        if self.cfg.verify_ipv4_checksum {
            batch.note_ipv4_verified();
        }
        // A burst whose last packet was walked, and is SCION, may leave a
        // new template.
        if let Some(last) = last.map(|l| l as usize).filter(|&l| rest >> l & 1 != 0) {
            if batch.meta(last).proto == Proto::Scion {
                self.learn(batch, last);
            }
        }
    }
}

impl Parse {
    /// Walks the packets of `mask`, one by one. (Not inlined: beside the
    /// template loop it was compiled into more instructions per packet.)
    #[inline(never)]
    fn walk<B: PacketBuf>(&self, batch: &mut Batch<B>, mask: u32) {
        for i in Indices::of(mask) {
            let data = batch.data(i);
            // Plain IPv4 needs none of the checks below (not a fragment, IP).
            if let Some(l) = classify_ipv4_fast(data, &self.cfg) {
                let hint = scion_hint(data, &l);
                set_layers(batch.meta_mut_keep_hints(i), &l, hint);
                continue;
            }
            match classify(data, &self.cfg) {
                Ok(l) => {
                    if (l.fragment && self.cfg.drop_fragments)
                        || (l.l3 == L3::None && self.cfg.drop_non_ip)
                    {
                        batch.drop_packet(i, DropReason::Unsupported);
                        continue;
                    }
                    let hint = scion_hint(data, &l);
                    set_layers(batch.meta_mut_keep_hints(i), &l, hint);
                }
                Err(e) => batch.drop_packet(i, e.into()),
            }
        }
    }

    /// Classifies the live packets of `batch` that match a template;
    /// returns the others.
    #[inline(always)]
    fn by_templates<B: PacketBuf>(&mut self, batch: &mut Batch<B>) -> u32 {
        let live = batch.live_mask();
        if self.repeat.is_none() && self.repeat6.is_none() {
            return live;
        }
        let (mut repeat, mut repeat6) = (self.repeat, self.repeat6);
        let verify = self.cfg.verify_ipv4_checksum;
        let mut rest = 0;
        for i in Indices::of(live) {
            let data = batch.data(i);
            if let Some(r) = &mut repeat {
                if let Some(hash) = r.hash(data, verify) {
                    fill_layers(batch.meta_mut_keep_hints(i), &r.meta, hash);
                    continue;
                }
            }
            if let Some(r) = &mut repeat6 {
                if let Some(hash) = r.hash(data) {
                    fill_layers(batch.meta_mut_keep_hints(i), &r.meta, hash);
                    continue;
                }
            }
            rest |= 1 << i;
        }
        (self.repeat, self.repeat6) = (repeat, repeat6);
        // A burst classified whole by the only template carries its hint
        // (the usual burst of a SCION link): the stages after ask for it.
        if rest == 0 && live != 0 {
            let only = match (repeat, repeat6) {
                (Some(r), None) => Some(r.meta.scion),
                (None, Some(r)) => Some(r.meta.scion),
                _ => None,
            };
            if let Some(hint) = only {
                batch.note_common_scion_hint(hint);
            }
        }
        rest
    }

    /// The template of packet `i`, the last of a burst, walked and still
    /// live, if it is SCION as [`Repeat`] or [`Repeat6`] describes (it
    /// replaces the template of its kind, which did not classify it): over
    /// IPv4 parsed again by the fast path, over IPv6 from its metadata (the
    /// layers [`classify`] found, all but `fragment`, which a frame of
    /// [`Repeat6`]'s layout cannot be: a fragment header would move UDP).
    #[inline(never)]
    fn learn<B: PacketBuf>(&mut self, batch: &Batch<B>, i: usize) {
        let m = *batch.meta(i);
        if m.proto != Proto::Scion || !batch.is_live(i) {
            return;
        }
        let data = batch.data(i);
        match m.l3 {
            L3::Ipv4 => {
                if let Some(l) = classify_ipv4_fast(data, &self.cfg) {
                    if let Some(r) = Repeat::of(data, &l, scion_hint(data, &l)) {
                        self.repeat = Some(r);
                    }
                }
            }
            L3::Ipv6 => {
                let l = Layers {
                    l3: m.l3,
                    l3_off: m.l3_off,
                    l4_off: m.l4_off,
                    proto: m.proto,
                    proto_off: m.proto_off,
                    hash: m.hash,
                    fragment: false,
                };
                if let Some(r) = Repeat6::of(data, &l, m.scion) {
                    self.repeat6 = Some(r);
                }
            }
            L3::None => {}
        }
    }
}

/// The SCION header hint of a frame with layers `l`: checked for SCION over
/// UDP, for the stages after the parse stage (see [`ScionHint`]).
#[inline(always)]
fn scion_hint(frame: &[u8], l: &Layers) -> ScionHint {
    if l.proto != Proto::Scion {
        return ScionHint::UNCHECKED;
    }
    frame.get(usize::from(l.proto_off)..).map_or(ScionHint::UNCHECKED, ScionHint::of_header)
}

/// Metadata with the layer fields of `l` and the SCION hint `hint` (the
/// other fields as for a packet from port 0).
fn meta_of(l: &Layers, hint: ScionHint) -> crate::batch::Meta {
    let mut m = crate::batch::Meta::new(0);
    set_layers(&mut m, l, hint);
    m
}

/// Sets the layer fields and the SCION hint of `m` to those of `layers`,
/// with flow hash `hash`: one copy of the whole record, then its verdict and
/// port put back (fewer instructions than a store per layer field).
#[inline(always)]
fn fill_layers(m: &mut crate::batch::Meta, layers: &crate::batch::Meta, hash: u32) {
    let (verdict, port) = (m.verdict, m.port);
    *m = *layers;
    m.verdict = verdict;
    m.port = port;
    m.hash = hash;
}

/// Copies the layer fields and the SCION header hint into the metadata
/// (only layer fields change, so the batch's port hints stay valid).
#[inline(always)]
fn set_layers(m: &mut crate::batch::Meta, l: &Layers, scion: ScionHint) {
    m.l3 = l.l3;
    m.l3_off = l.l3_off;
    m.l4_off = l.l4_off;
    m.proto = l.proto;
    m.proto_off = l.proto_off;
    m.hash = l.hash;
    m.scion = scion;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::Verdict;
    use packet::ipv4::Ipv4;

    /// Ethernet + IPv4 (fixed 20-byte header) with `proto` and `payload`.
    fn v4(proto: u8, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + payload.len()];
        f[12..14].copy_from_slice(&ethertype::IPV4.to_be_bytes());
        let ip = &mut f[14..];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&((20 + payload.len()) as u16).to_be_bytes());
        ip[8] = 64;
        ip[9] = proto;
        ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
        ip[16..20].copy_from_slice(&[10, 0, 0, 2]);
        ip[20..].copy_from_slice(payload);
        Ipv4::new_unchecked(&mut f[14..]).fill_checksum();
        f
    }

    /// Ethernet + IPv6 with `nh` and `payload`.
    fn v6(nh: u8, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 40 + payload.len()];
        f[12..14].copy_from_slice(&ethertype::IPV6.to_be_bytes());
        let ip = &mut f[14..];
        ip[0] = 0x60;
        ip[4..6].copy_from_slice(&(payload.len() as u16).to_be_bytes());
        ip[6] = nh;
        ip[7] = 64;
        ip[8] = 0xfd;
        ip[24] = 0xfd;
        ip[39] = 2;
        ip[40..].copy_from_slice(payload);
        f
    }

    fn udp(dst_port: u16, payload_len: usize) -> Vec<u8> {
        let mut u = vec![0u8; 8 + payload_len];
        u[0..2].copy_from_slice(&50000u16.to_be_bytes());
        u[2..4].copy_from_slice(&dst_port.to_be_bytes());
        u[4..6].copy_from_slice(&((8 + payload_len) as u16).to_be_bytes());
        u
    }

    #[test]
    fn scion_over_udp_ipv4_and_ipv6() {
        let cfg = ParseConfig::default();
        let l = classify(&v4(17, &udp(30041, 12)), &cfg).unwrap();
        assert_eq!((l.l3, l.l3_off, l.l4_off), (L3::Ipv4, 14, 34));
        assert_eq!((l.proto, l.proto_off), (Proto::Scion, 42));
        let l = classify(&v6(17, &udp(30041, 12)), &cfg).unwrap();
        assert_eq!((l.l3, l.l4_off, l.proto, l.proto_off), (L3::Ipv6, 54, Proto::Scion, 62));
        let l = classify(&v4(17, &udp(53, 12)), &cfg).unwrap();
        assert_eq!((l.proto, l.proto_off, l.l4_off), (Proto::None, NO_OFFSET, 34));
    }

    #[test]
    fn an_all_zero_ipv4_header_has_no_valid_checksum() {
        // Its plain sum is 0, a multiple of 0xFFFF; its one's complement
        // sum is 0x0000, not all ones.
        assert!(!packet::checksum::verify(&[0; 20]));
        assert!(!ipv4_header_checksum_ok(&[0; 20]));
    }

    #[test]
    fn a_checked_scion_header_leaves_its_path_type_and_next_header_as_a_hint() {
        // The hint the stage leaves in the metadata of one frame.
        let hint = |frame: Vec<u8>| {
            let mut batch = Batch::<Vec<u8>>::new();
            batch.push(frame, 0).unwrap();
            Stage::process(&mut Parse::default(), &mut batch, Now::default());
            batch.meta(0).scion
        };
        // Common header: version 0, NextHdr UDP, HdrLen 9 (36 bytes: common,
        // IAs and two 4-byte hosts), PayloadLen 4, PathType 1, DL = SL = 0.
        let mut scion = [0u8; 40];
        scion[4] = 17;
        scion[5] = 9;
        scion[6..8].copy_from_slice(&4u16.to_be_bytes());
        scion[8] = 1;
        let mut u = udp(30041, 0);
        u.extend_from_slice(&scion);
        // The IPv4 fast path and the general (IPv6) path.
        assert_eq!(hint(v4(17, &u)).get(), Some((packet::scion::PathType::SCION, 17)));
        assert_eq!(hint(v6(17, &u)).path_type(), Some(packet::scion::PathType::SCION));
        // A payload the header does not cover, or an HdrLen shorter than the
        // address header: no hint (the SCION stages name the error).
        let broken = |at: usize, v: u8| {
            let mut u = u.clone();
            u[8 + at] = v;
            (hint(v4(17, &u)), hint(v6(17, &u)))
        };
        let none = (ScionHint::UNCHECKED, ScionHint::UNCHECKED);
        assert_eq!(broken(7, 5), none);
        assert_eq!(broken(5, 6), none);
        assert_eq!(broken(0, 0x10), none, "version 1");
        // Not SCION: no hint.
        assert_eq!(hint(v4(17, &udp(53, 40))), ScionHint::UNCHECKED);

        // The burst's common hint: what every live packet's hint says.
        let parsed = |frames: &[Vec<u8>]| {
            let mut batch = Batch::<Vec<u8>>::new();
            for f in frames {
                batch.push(f.clone(), 0).unwrap();
            }
            Stage::process(&mut Parse::default(), &mut batch, Now::default());
            batch.common_scion_hint()
        };
        let scion = Some(ScionHint::checked(packet::scion::PathType::SCION.0, 17));
        assert_eq!(parsed(&[v4(17, &u), v6(17, &u)]), scion);
        assert_eq!(parsed(&[v4(17, &u), v4(17, &udp(53, 40))]), None);
        let mut short_payload = u.clone();
        short_payload[8 + 7] = 5;
        assert_eq!(parsed(&[v4(17, &u), v4(17, &short_payload)]), None);
        // A frame the stage drops does not count.
        assert_eq!(parsed(&[v4(17, &u), vec![0; 10]]), scion);
    }

    #[test]
    fn flowpolice_and_fair_carriers() {
        let cfg = ParseConfig::default();
        let l = classify(&v4(254, &[0u8; 28]), &cfg).unwrap();
        assert_eq!((l.proto, l.proto_off), (Proto::FlowPolice, 34));
        let l = classify(&v6(254, &[0u8; 28]), &cfg).unwrap();
        assert_eq!((l.proto, l.proto_off), (Proto::FlowPolice, 54));
        let l = classify(&v4(253, &[0u8; 16]), &cfg).unwrap();
        assert_eq!((l.proto, l.proto_off), (Proto::Fair, 34));
        let off = ParseConfig { fair_protocol: None, flowpolice_protocol: None, ..cfg };
        let l = classify(&v4(254, &[0u8; 28]), &off).unwrap();
        assert_eq!(l.proto, Proto::None);
    }

    #[test]
    fn non_ip_is_passed_through_unless_configured() {
        let mut arp = vec![0u8; 60];
        arp[12..14].copy_from_slice(&ethertype::ARP.to_be_bytes());
        let l = classify(&arp, &ParseConfig::default()).unwrap();
        assert_eq!((l.l3, l.proto), (L3::None, Proto::None));

        let mut batch: Batch<Vec<u8>> = Batch::new();
        batch.push(arp, 0).unwrap();
        let mut strict = Parse::new(ParseConfig { drop_non_ip: true, ..Default::default() });
        strict.process(&mut batch, Now::default());
        assert_eq!(batch.meta(0).verdict, Verdict::Drop(DropReason::Unsupported));
    }

    #[test]
    fn stage_fills_meta_and_drops_bad_packets_with_reasons() {
        let good = v4(17, &udp(30041, 4));
        let mut bad_sum = good.clone();
        bad_sum[14 + 10] ^= 0xff;
        let truncated = good[..30].to_vec();
        let mut batch: Batch<Vec<u8>> = Batch::new();
        for f in [good, bad_sum, truncated] {
            batch.push(f, 3).unwrap();
        }
        Parse::default().process(&mut batch, Now::default());
        assert_eq!(batch.live_mask(), 0b001);
        assert_eq!(batch.meta(0).proto, Proto::Scion);
        assert_ne!(batch.meta(0).hash, 0);
        assert_eq!(batch.meta(1).verdict, Verdict::Drop(DropReason::BadChecksum));
        assert_eq!(batch.meta(2).verdict, Verdict::Drop(DropReason::Truncated));
        // Parsing changes no port or verdict of a live packet: the batch's
        // port hints survive it, so later stages and the runtime can use them.
        assert_eq!((batch.ingress_port(), batch.egress_port()), (Some(3), Some(3)));
        // Layers were recorded: a later stage must read them.
        assert!(!batch.layers_unparsed());
    }

    /// Records, per burst, whether the batch let it rely on the parse
    /// stage's IPv4 checks.
    struct Probe(std::sync::Arc<std::sync::Mutex<Vec<bool>>>);
    impl crate::Element for Probe {
        fn name(&self) -> &str {
            "probe"
        }
    }
    impl<B: PacketBuf> Stage<B> for Probe {
        fn process(&mut self, batch: &mut Batch<B>, _now: Now) {
            self.0.lock().unwrap().push(batch.ipv4_verified());
        }
    }

    #[test]
    fn only_the_stage_right_after_a_verifying_parse_stage_may_rely_on_it() {
        let seen = |cfg: Option<ParseConfig>, probes: usize| {
            let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
            let mut p: crate::Pipeline<Vec<u8>> = crate::Pipeline::new();
            if let Some(cfg) = cfg {
                p.push(Box::new(Parse::new(cfg)));
            }
            for _ in 0..probes {
                p.push(Box::new(Probe(log.clone())));
            }
            for _ in 0..2 {
                let mut batch = Batch::new();
                batch.push(v4(254, &[0u8; 28]), 0).unwrap();
                p.run(&mut batch, Now::default());
            }
            let log = log.lock().unwrap().clone();
            log
        };
        // Two bursts: the first probe may rely on it each time, the second
        // never (the first could have changed the packets).
        assert_eq!(seen(Some(ParseConfig::default()), 2), [true, false, true, false]);
        let no_verify = ParseConfig { verify_ipv4_checksum: false, ..ParseConfig::default() };
        assert_eq!(seen(Some(no_verify), 1), [false, false]);
        assert_eq!(seen(None, 1), [false, false]);
        // Outside a pipeline, and for packets added afterwards: no.
        let mut batch: Batch<Vec<u8>> = Batch::new();
        batch.push(v4(254, &[0u8; 28]), 0).unwrap();
        Parse::default().process(&mut batch, Now::default());
        assert!(!batch.ipv4_verified());
        // A pipeline after a parse stage driven by hand starts afresh.
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut probe: crate::Pipeline<Vec<u8>> = crate::Pipeline::new();
        probe.push(Box::new(Probe(log.clone())));
        probe.run(&mut batch, Now::default());
        assert_eq!(*log.lock().unwrap(), [false]);
        let mut p: crate::Pipeline<Vec<u8>> = crate::Pipeline::new();
        p.push(Box::new(Parse::default()));
        p.run(&mut batch, Now::default());
        // Nothing outlives a run, not even the last stage's view.
        let mut q: crate::Pipeline<Vec<u8>> = crate::Pipeline::new();
        q.push(Box::new(Parse::default()));
        q.push(Box::new(Probe(log.clone())));
        q.run(&mut batch, Now::default());
        assert_eq!(*log.lock().unwrap(), [false, true]);
        assert!(!batch.ipv4_verified());
        batch.clear();
        batch.push(v4(254, &[0u8; 28]), 0).unwrap();
        batch.begin_stage();
        assert!(!batch.ipv4_verified());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1024))]
        /// What the stage after the parse stage may rely on: every live
        /// frame recorded as IPv4 has a header that passes the checks, with
        /// its total length within the frame (any frame, verifying parse).
        #[test]
        fn every_ipv4_header_the_parse_stage_records_passed_its_checks(
            frames in proptest::collection::vec(mixed_frame(), 1..40),
            burst in proptest::prop_oneof![1usize..6, proptest::prelude::Just(crate::BURST)],
        ) {
            let mut p = Parse::default();
            for chunk in frames.chunks(burst) {
                let mut batch: Batch<Vec<u8>> = Batch::new();
                for f in chunk {
                    batch.push(f.clone(), 0).unwrap();
                }
                p.process(&mut batch, Now::default());
                for i in batch.live() {
                    let m = *batch.meta(i);
                    if m.l3 != L3::Ipv4 {
                        continue;
                    }
                    let ip = &batch.data(i)[usize::from(m.l3_off)..];
                    proptest::prop_assert!(ip.len() >= 20);
                    let ihl = usize::from(ip[0] & 0x0f) * 4;
                    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
                    proptest::prop_assert!(ihl >= 20 && ihl <= total && total <= ip.len());
                    proptest::prop_assert!(Ipv4::new_unchecked(ip).verify_checksum());
                }
            }
        }
    }

    #[test]
    fn later_ipv4_fragments_are_plain_ip() {
        let mut f = v4(254, &[0u8; 28]);
        f[14 + 6] = 0x00;
        f[14 + 7] = 0x10; // offset 16 * 8 bytes
        f[14 + 10] = 0;
        f[14 + 11] = 0;
        Ipv4::new_unchecked(&mut f[14..]).fill_checksum();
        let l = classify(&f, &ParseConfig::default()).unwrap();
        assert!(l.fragment);
        assert_eq!(l.proto, Proto::None);
    }

    #[test]
    fn fast_path_takes_plain_ipv4_and_agrees() {
        let cfg = ParseConfig::default();
        for (proto, payload) in [
            (protocol::UDP, udp(30041, 12)),
            (protocol::UDP, udp(53, 12)),
            (protocol::TCP, vec![0u8; 20]),
            (protocol::FAIR, vec![0u8; 16]),
            (protocol::FLOWPOLICE, vec![0u8; 16]),
            (47, vec![0u8; 4]),
        ] {
            let f = v4(proto, &payload);
            let fast = classify_ipv4_fast(&f, &cfg).expect("plain IPv4 takes the fast path");
            assert_eq!(Ok(fast), classify(&f, &cfg), "proto {proto}");
        }
        // Fragments, options, VLAN tags and bad checksums go the general way.
        let mut frag = v4(protocol::UDP, &udp(53, 4));
        frag[14 + 6] = 0x20;
        let mut bad = v4(protocol::UDP, &udp(53, 4));
        bad[14 + 10] ^= 1;
        let mut opts = v4(protocol::UDP, &udp(53, 4));
        opts[14] = 0x46;
        for f in [frag, bad, opts] {
            assert_eq!(classify_ipv4_fast(&f, &cfg), None);
        }
    }

    /// Ethernet + IPv4 + UDP 30041 + a SCION common and address header
    /// (4-byte hosts, HdrLen 9, no path bytes) with `payload` bytes after it.
    fn scion_v4(payload: usize) -> Vec<u8> {
        let mut scion = vec![0u8; 36 + payload];
        scion[4] = 17;
        scion[5] = 9;
        scion[6..8].copy_from_slice(&(payload as u16).to_be_bytes());
        scion[8] = 1;
        let mut u = udp(30041, 0);
        u.extend_from_slice(&scion);
        let n = u.len() as u16;
        u[4..6].copy_from_slice(&n.to_be_bytes());
        v4(protocol::UDP, &u)
    }

    /// Refills the IPv4 header checksum of an untagged frame.
    fn refill_ipv4_checksum(f: &mut [u8]) {
        if f.len() >= 34 {
            f[24] = 0;
            f[25] = 0;
            let c = packet::checksum::checksum(&f[14..34]);
            f[24..26].copy_from_slice(&c.to_be_bytes());
        }
    }

    /// Each frame parsed alone by a fresh stage (no template from earlier
    /// frames): the per-packet path. Metadata and whether it stayed live.
    fn one_by_one(cfg: &ParseConfig, frames: &[Vec<u8>]) -> Vec<(crate::batch::Meta, bool)> {
        frames
            .iter()
            .map(|f| {
                let mut b = Batch::<Vec<u8>>::new();
                b.push(f.clone(), 1).unwrap();
                Parse::new(cfg.clone()).process(&mut b, Now::default());
                (*b.meta(0), b.is_live(0))
            })
            .collect()
    }

    /// The frames as bursts of `size` through one stage (templates learned
    /// from a burst's last frame and carried from burst to burst).
    fn in_bursts(
        p: &mut Parse,
        frames: &[Vec<u8>],
        size: usize,
    ) -> Vec<(crate::batch::Meta, bool)> {
        let mut out = Vec::new();
        for burst in frames.chunks(size) {
            let mut b = Batch::<Vec<u8>>::new();
            for f in burst {
                b.push(f.clone(), 1).unwrap();
            }
            p.process(&mut b, Now::default());
            // The common hint the stage may have noted is that of the packets.
            let hints: Vec<ScionHint> = b.live().map(|i| b.meta(i).scion).collect();
            let first = hints.first().copied().filter(|h| *h != ScionHint::UNCHECKED);
            let want = first.filter(|h| hints.iter().all(|x| x == h));
            assert_eq!(b.common_scion_hint(), want);
            out.extend((0..burst.len()).map(|i| (*b.meta(i), b.is_live(i))));
        }
        out
    }

    /// The layers a template gives `frame`, if it does.
    fn layers4(r: &mut Repeat, frame: &[u8], verify: bool) -> Option<Layers> {
        r.hash(frame, verify).map(|hash| Layers { hash, ..r.layers })
    }

    /// The same over IPv6.
    fn layers6(r: &mut Repeat6, frame: &[u8]) -> Option<Layers> {
        r.hash(frame).map(|hash| Layers { hash, ..r.layers })
    }

    #[test]
    fn repeated_scion_frames_are_classified_from_the_template() {
        let cfg = ParseConfig::default();
        let first = scion_v4(20);
        let l = classify_ipv4_fast(&first, &cfg).unwrap();
        let hint = scion_hint(&first, &l);
        let mut r = Repeat::of(&first, &l, hint).expect("SCION over IPv4 is a template");
        // The same headers: the same layers.
        assert_eq!(layers4(&mut r, &first, true), Some(l));
        // Another IPv4 ID and source address (checksum refilled): the
        // template's layers with the frame's own hash.
        let mut other = first.clone();
        other[18] = 0x12;
        other[29] = 7;
        refill_ipv4_checksum(&mut other);
        let want = classify(&other, &cfg).unwrap();
        assert_ne!(want.hash, l.hash);
        assert_eq!(layers4(&mut r, &other, true), Some(want));
        // A longer SCION payload in a longer frame, other flow IDs and UDP
        // source port: classified from the template.
        let mut longer = scion_v4(200);
        longer[34] = 0x99;
        longer[43] = 0x55;
        longer[44] = 0x66;
        refill_ipv4_checksum(&mut longer);
        assert_eq!(layers4(&mut r, &longer, true), Some(classify(&longer, &cfg).unwrap()));
        // A bad checksum, a fragment, a payload the frame does not hold,
        // another path type or port: the per-packet path decides.
        let edit = |at: usize, v: u8, refill: bool| {
            let mut f = first.clone();
            f[at] = v;
            if refill {
                refill_ipv4_checksum(&mut f);
            }
            f
        };
        for f in [
            edit(18, 0x34, false),
            edit(21, 1, true),
            edit(49, 200, false),
            edit(50, 2, false),
            edit(37, 0x5a, false),
            edit(42, 0x10, false),
            first[..60].to_vec(),
        ] {
            assert_eq!(layers4(&mut r, &f, true), None);
        }
        // Not verifying checksums: a bad one is taken, as the fast path does.
        let bad = edit(18, 0x34, false);
        let no_verify = ParseConfig { verify_ipv4_checksum: false, ..cfg };
        assert_eq!(layers4(&mut r, &bad, false), classify_ipv4_fast(&bad, &no_verify));

        // Through the stage: the same metadata as frame by frame.
        let frames =
            vec![first.clone(), other, longer, bad, first.clone(), edit(49, 200, false), first];
        let cfg = ParseConfig::default();
        for size in [1, 2, 3, crate::BURST] {
            let got = in_bursts(&mut Parse::new(cfg.clone()), &frames, size);
            assert_eq!(got, one_by_one(&cfg, &frames), "bursts of {size}");
        }
    }

    #[test]
    fn repeated_scion_over_ipv6_is_classified_from_the_template() {
        let cfg = ParseConfig::default();
        let first = scion_v6(20);
        let l = classify(&first, &cfg).unwrap();
        let hint = scion_hint(&first, &l);
        assert_eq!((l.l3, l.proto, l.proto_off), (L3::Ipv6, Proto::Scion, 62));
        let mut r = Repeat6::of(&first, &l, hint).expect("SCION over IPv6 is a template");
        assert_eq!(layers6(&mut r, &first), Some(l));
        // Other addresses, flow label, hop limit, a longer payload: the
        // template's layers with the frame's own hash.
        let mut other = scion_v6(100);
        other[15] = 0x12;
        other[21] = 3;
        other[30] = 0x77;
        other[53] = 0x42;
        let want = classify(&other, &cfg).unwrap();
        assert_ne!(want.hash, l.hash);
        assert_eq!(layers6(&mut r, &other), Some(want));
        // Extension headers, another EtherType, a payload the frame does not hold,
        // another path type, port or SCION version: not from the template.
        let edit = |at: usize, v: u8| {
            let mut f = first.clone();
            f[at] = v;
            f
        };
        for f in [
            edit(20, 0),
            edit(12, 0x81),
            edit(19, 200),
            edit(59, 255),
            edit(69, 200),
            edit(70, 2),
            edit(57, 0x5a),
            edit(62, 0x10),
            first[..70].to_vec(),
        ] {
            assert_eq!(layers6(&mut r, &f), None);
        }
        let frames = vec![first.clone(), other, edit(69, 200), first.clone(), scion_v4(3), first];
        for size in [1, 2, 3, crate::BURST] {
            let got = in_bursts(&mut Parse::new(cfg.clone()), &frames, size);
            assert_eq!(got, one_by_one(&cfg, &frames), "bursts of {size}");
        }
    }

    #[test]
    fn a_new_configuration_drops_the_template() {
        let mut p = Parse::default();
        let frames = [scion_v4(8), scion_v6(8)];
        in_bursts(&mut p, &frames, 1);
        assert!(p.repeat.is_some() && p.repeat6.is_some());
        let other = ParseConfig { scion_ports: vec![4000], ..ParseConfig::default() };
        assert_eq!(p.reconfigure(&other, Now::default()), Ok(Reconfigured::APPLIED));
        assert_eq!((p.repeat, p.repeat6), (None, None));
        let got = in_bursts(&mut p, &frames, 1);
        assert_eq!(got, one_by_one(&other, &frames));
        assert_eq!((got[0].0.proto, got[1].0.proto), (Proto::None, Proto::None));
    }

    /// Offsets whose bytes decide a SCION-over-IPv4 frame's classification.
    const TOUCHY4: [usize; 27] = [
        12, 13, 14, 15, 16, 17, 18, 20, 21, 22, 23, 24, 29, 33, 34, 36, 37, 38, 39, 42, 43, 46, 47,
        48, 49, 50, 51,
    ];

    /// The same over IPv6.
    const TOUCHY6: [usize; 24] = [
        12, 13, 14, 17, 18, 19, 20, 21, 22, 37, 53, 54, 56, 57, 58, 59, 62, 63, 66, 67, 68, 69, 70,
        71,
    ];

    /// Ethernet + IPv6 + UDP 30041 + the SCION header of [`scion_v4`].
    fn scion_v6(payload: usize) -> Vec<u8> {
        let f = scion_v4(payload);
        v6(protocol::UDP, &f[34..])
    }

    /// SCION frames from `base` with a few edits (mostly where the
    /// classification is decided; for IPv4 the checksum refilled or not),
    /// cut short or padded.
    fn edited(
        base: fn(usize) -> Vec<u8>,
        touchy: &'static [usize],
    ) -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        use proptest::prelude::*;
        let edit = prop_oneof![
            3 => (proptest::sample::select(touchy), any::<u8>()),
            1 => (0usize..90, any::<u8>()),
        ];
        // Payload lengths repeat often, so that frames repeat in full.
        (
            prop_oneof![Just(20usize), 0usize..60],
            proptest::collection::vec(edit, 0..3),
            any::<bool>(),
            0usize..24,
            0usize..6,
        )
            .prop_map(move |(payload, edits, refill, cut, pad)| {
                let mut f = base(payload);
                for (at, v) in edits {
                    if at < f.len() {
                        f[at] = v;
                    }
                }
                if refill && f.get(12..14) == Some(&ethertype::IPV4.to_be_bytes()[..]) {
                    refill_ipv4_checksum(&mut f);
                }
                // Cut a few bytes (most often none) or pad the frame.
                f.truncate(f.len() - (cut.saturating_sub(16)).min(f.len()));
                f.extend(std::iter::repeat_n(0xee, pad));
                f
            })
    }

    /// One frame of a mixed burst: mostly edited SCION over IPv4 or IPv6,
    /// some other UDP and random bytes.
    fn mixed_frame() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        use proptest::prelude::*;
        prop_oneof![
            8 => edited(scion_v4, &TOUCHY4),
            6 => edited(scion_v6, &TOUCHY6),
            1 => (0usize..40).prop_map(|n| v4(protocol::UDP, &udp(53, n))),
            1 => proptest::collection::vec(any::<u8>(), 0..100),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]
        /// Bursts through one stage (templates from earlier frames and
        /// bursts) give every frame the metadata and verdict it gets parsed
        /// alone.
        #[test]
        fn templates_classify_as_the_per_packet_path(
            frames in proptest::collection::vec(mixed_frame(), 1..80),
            burst in proptest::prop_oneof![1usize..6, proptest::prelude::Just(crate::BURST)],
            verify in proptest::prelude::any::<bool>(),
            two_ports in proptest::prelude::any::<bool>(),
            fair_off in proptest::prelude::any::<bool>(),
        ) {
            let cfg = ParseConfig {
                verify_ipv4_checksum: verify,
                scion_ports: if two_ports { vec![53, 30041] } else { vec![30041] },
                fair_protocol: if fair_off { None } else { Some(protocol::FAIR) },
                ..ParseConfig::default()
            };
            let got = in_bursts(&mut Parse::new(cfg.clone()), &frames, burst);
            proptest::prop_assert_eq!(got, one_by_one(&cfg, &frames));
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]
        /// Whatever the fast path accepts, `classify` classifies the same way.
        #[test]
        fn fast_path_agrees_with_classify(
            proto in proptest::prop_oneof![
                proptest::prelude::Just(protocol::UDP),
                proptest::prelude::Just(protocol::TCP),
                proptest::prelude::Just(protocol::FAIR),
                proptest::prelude::Just(protocol::FLOWPOLICE),
                proptest::prelude::any::<u8>(),
            ],
            scion in proptest::prelude::any::<bool>(),
            extra in 0usize..40,
            edits in proptest::collection::vec((0usize..60, proptest::prelude::any::<u8>()), 0..3),
            cut in 0usize..80,
            verify in proptest::prelude::any::<bool>(),
        ) {
            let payload = if proto == protocol::UDP {
                udp(if scion { 30041 } else { 53 }, extra)
            } else {
                vec![0xa5; extra]
            };
            let mut f = v4(proto, &payload);
            for (at, v) in edits {
                if at < f.len() {
                    f[at] = v;
                }
            }
            f.truncate(f.len().saturating_sub(cut % 8));
            let cfg = ParseConfig { verify_ipv4_checksum: verify, ..ParseConfig::default() };
            if let Some(l) = classify_ipv4_fast(&f, &cfg) {
                proptest::prop_assert_eq!(Ok(l), classify(&f, &cfg));
            }
        }

        #[test]
        fn unrolled_ipv4_checksum_matches_the_packet_crate(
            h in proptest::prelude::any::<[u8; 20]>(),
            ones in proptest::prelude::any::<bool>(),
        ) {
            proptest::prop_assert_eq!(ipv4_header_checksum_ok(&h), packet::checksum::verify(&h));
            // And a header with its checksum filled in passes, also with
            // 0xFFFF for a computed 0x0000 (the same one's complement value).
            let mut f = h;
            f[10] = 0;
            f[11] = 0;
            let c = packet::checksum::checksum(&f);
            let c = if ones && c == 0 { 0xffff } else { c };
            f[10..12].copy_from_slice(&c.to_be_bytes());
            proptest::prop_assert_eq!(ipv4_header_checksum_ok(&f), packet::checksum::verify(&f));
            proptest::prop_assert!(ipv4_header_checksum_ok(&f));
        }

        #[test]
        fn never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
            let _ = classify(&bytes, &ParseConfig::default());
        }
    }
}
