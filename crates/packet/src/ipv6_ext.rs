//! A bounded walker over the IPv6 extension-header chain.
//!
//! Recognized headers: Hop-by-Hop Options (0, only as the first header, RFC
//! 8200 §4.3), Routing (43), Fragment (44), Destination Options (60),
//! Authentication Header (51, RFC 4302 length rule) and the project's FAIR
//! header (next header 253 by default, [`ExtConfig::fair_next_header`]).
//! Any other value ends the chain and is reported as the upper-layer protocol
//! (ESP and No Next Header included, since nothing after them can be walked).
//!
//! FAIR is recognized only where `fair.md` §2.5 allows it: directly after the
//! fixed header or directly after Hop-by-Hop. The FAIR value anywhere else is
//! treated as an (unknown) upper-layer protocol, so a FAIR header after
//! Destination Options is "not FAIR" (test U-W4).
//!
//! A non-first fragment (offset ≠ 0) ends the walk: the bytes after its
//! Fragment header continue the *datagram*, not the header chain.
//!
//! The walk is bounded twice: every step advances at least 8 bytes inside a
//! finite buffer, and at most [`ExtConfig::max_headers`] headers are accepted
//! (a vendor limit against header-chain DoS).

use crate::field::{be16, be32};
use crate::ipv4::protocol;
use crate::{Error, Result};

/// Caller-tunable limits of the walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtConfig {
    /// Next-header value of the FAIR extension header; `None` disables FAIR
    /// recognition (the value is then an upper-layer protocol).
    pub fair_next_header: Option<u8>,
    /// Most extension headers accepted before the chain is declared malformed.
    pub max_headers: usize,
}

impl ExtConfig {
    /// FAIR at 253, at most 8 extension headers.
    pub const DEFAULT: ExtConfig =
        ExtConfig { fair_next_header: Some(protocol::FAIR), max_headers: 8 };
}

impl Default for ExtConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Which extension header was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExtKind {
    /// Hop-by-Hop Options (0).
    HopByHop,
    /// Routing (43).
    Routing,
    /// Fragment (44).
    Fragment,
    /// Destination Options (60).
    DestinationOptions,
    /// Authentication Header (51).
    Auth,
    /// The FAIR extension header.
    Fair,
}

/// One extension header of the chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ExtHeader {
    /// What it is.
    pub kind: ExtKind,
    /// Offset of its first byte in the walked buffer.
    pub offset: usize,
    /// Its length in bytes.
    pub len: usize,
    /// The value of its own Next Header field.
    pub next_header: u8,
}

/// Fields of an IPv6 Fragment header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FragmentInfo {
    /// Offset of the Fragment header in the walked buffer.
    pub header_offset: usize,
    /// Fragment offset in 8-byte units.
    pub frag_offset: u16,
    /// More Fragments.
    pub more_frags: bool,
    /// Identification.
    pub ident: u32,
}

impl FragmentInfo {
    /// Whether this is not the first fragment (the chain ends at it).
    #[inline]
    pub const fn is_later_fragment(&self) -> bool {
        self.frag_offset != 0
    }
}

/// Summary of a complete walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ExtChain {
    /// The upper-layer protocol (the last Next Header value).
    pub upper_protocol: u8,
    /// Offset of the upper-layer header in the walked buffer.
    pub upper_offset: usize,
    /// Offset of the Next Header byte that names the upper layer (the fixed
    /// header's byte 6, or the last extension header's byte 0).
    pub upper_nh_offset: usize,
    /// Number of extension headers walked.
    pub count: usize,
    /// Offset of the Hop-by-Hop header, if present.
    pub hop_by_hop: Option<usize>,
    /// Offset of the (first) Routing header, if present.
    pub routing: Option<usize>,
    /// Offset and length of the FAIR header, if present.
    pub fair: Option<(usize, usize)>,
    /// The Fragment header, if present.
    pub fragment: Option<FragmentInfo>,
}

/// Iterator over the extension headers; see the module docs for the rules.
///
/// Yields `Err` at most once and then stops. After `None`,
/// [`upper`](Self::upper) tells the upper-layer protocol and its offset.
#[derive(Debug, Clone)]
pub struct ExtHeaders<'a> {
    buf: &'a [u8],
    off: usize,
    nh_off: usize,
    nh: u8,
    count: usize,
    prev: Option<ExtKind>,
    cfg: ExtConfig,
    done: bool,
}

impl<'a> ExtHeaders<'a> {
    /// Starts a walk of `buf` at `start` (the first byte after the fixed
    /// header), where the fixed header's Next Header is `first`. Offsets in
    /// the results index `buf`. `start` should be ≥ 1 so that the fixed
    /// header's Next Header byte precedes it; `upper_nh_offset` assumes it is
    /// at `start − 34` otherwise (i.e. the layout of an IPv6 packet).
    pub fn new(buf: &'a [u8], start: usize, first: u8, cfg: &ExtConfig) -> Self {
        ExtHeaders {
            buf,
            off: start,
            nh_off: start.saturating_sub(crate::ipv6::HEADER_LEN - 6),
            nh: first,
            count: 0,
            prev: None,
            cfg: *cfg,
            done: false,
        }
    }

    /// The current Next Header value and offset: after the iterator returned
    /// `None`, the upper-layer protocol and where it starts.
    #[inline]
    pub fn upper(&self) -> (u8, usize) {
        (self.nh, self.off)
    }

    fn classify(&self) -> Option<ExtKind> {
        match self.nh {
            protocol::HOP_BY_HOP => Some(ExtKind::HopByHop),
            protocol::IPV6_ROUTE => Some(ExtKind::Routing),
            protocol::IPV6_FRAG => Some(ExtKind::Fragment),
            protocol::IPV6_OPTS => Some(ExtKind::DestinationOptions),
            protocol::AH => Some(ExtKind::Auth),
            nh if Some(nh) == self.cfg.fair_next_header
                && (self.count == 0
                    || (self.count == 1 && self.prev == Some(ExtKind::HopByHop))) =>
            {
                Some(ExtKind::Fair)
            }
            _ => None,
        }
    }

    fn step(&mut self, kind: ExtKind) -> Result<ExtHeader> {
        if kind == ExtKind::HopByHop && self.count != 0 {
            return Err(Error::malformed("ipv6 hop-by-hop not first"));
        }
        if self.count >= self.cfg.max_headers {
            return Err(Error::malformed("ipv6 too many extension headers"));
        }
        let b = self.buf;
        let off = self.off;
        // Bytes left from `off`; written so that no `start` can overflow.
        let avail = b.len().saturating_sub(off);
        if avail < 2 {
            return Err(Error::Truncated);
        }
        let hl = b[off + 1] as usize;
        let len = match kind {
            ExtKind::Fragment => 8,
            ExtKind::Auth => (hl + 2) * 4,
            ExtKind::Fair => {
                if hl == 0 || hl > crate::fair::MAX_IPV6_HDR_LEN as usize {
                    return Err(Error::malformed("fair ipv6 hdr_len"));
                }
                (hl + 1) * 8
            }
            _ => (hl + 1) * 8,
        };
        if avail < len {
            return Err(Error::Truncated);
        }
        let h = ExtHeader { kind, offset: off, len, next_header: b[off] };
        self.prev = Some(kind);
        self.count += 1;
        self.nh = b[off];
        self.nh_off = off;
        self.off = off + len;
        if kind == ExtKind::Fragment && be16(b, off + 2) >> 3 != 0 {
            // Later fragment: what follows is datagram data, not headers.
            self.done = true;
        }
        Ok(h)
    }
}

impl Iterator for ExtHeaders<'_> {
    type Item = Result<ExtHeader>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let Some(kind) = self.classify() else {
            self.done = true;
            return None;
        };
        let r = self.step(kind);
        if r.is_err() {
            self.done = true;
        }
        Some(r)
    }
}

/// Walks the chain of `buf` from `start` (see [`ExtHeaders::new`]) and
/// summarizes it.
pub fn walk(buf: &[u8], start: usize, first: u8, cfg: &ExtConfig) -> Result<ExtChain> {
    let mut it = ExtHeaders::new(buf, start, first, cfg);
    let mut c = ExtChain {
        upper_protocol: first,
        upper_offset: start,
        upper_nh_offset: it.nh_off,
        count: 0,
        hop_by_hop: None,
        routing: None,
        fair: None,
        fragment: None,
    };
    for h in &mut it {
        let h = h?;
        match h.kind {
            ExtKind::HopByHop => c.hop_by_hop = Some(h.offset),
            ExtKind::Routing => {
                c.routing.get_or_insert(h.offset);
            }
            ExtKind::Fair => c.fair = Some((h.offset, h.len)),
            ExtKind::Fragment => {
                if c.fragment.is_some() {
                    return Err(Error::malformed("ipv6 two fragment headers"));
                }
                let v = be16(buf, h.offset + 2);
                c.fragment = Some(FragmentInfo {
                    header_offset: h.offset,
                    frag_offset: v >> 3,
                    more_frags: v & 1 != 0,
                    ident: be32(buf, h.offset + 4),
                });
            }
            ExtKind::DestinationOptions | ExtKind::Auth => {}
        }
    }
    c.count = it.count;
    (c.upper_protocol, c.upper_offset) = it.upper();
    c.upper_nh_offset = it.nh_off;
    Ok(c)
}
