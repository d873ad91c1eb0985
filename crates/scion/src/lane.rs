//! The lane of [`ScionForward`](crate::ScionForward) for the common hop: a
//! standard SCION path (PathType 1), or the SCION path embedded in an
//! EPIC-Z path (PathType 201), at a hop field that is not the last of its
//! segment, in a stage that does not check addresses. Such a hop has no
//! cross-over and is not the path's last, so its processing is fixed:
//! verify MAC and expiry, chain the SegID (unless it is a peering hop),
//! check the ingress interface, leave through the egress interface's port,
//! advance CurrHF by one.
//!
//! A lane packet is read without locating or parsing it in full: its
//! common header (and an EPIC-Z packet's HVF count) is recognised as laid
//! out like the last one located, and the position of its current info and
//! hop fields follows from its meta header alone ([`Template`]). In pass 1
//! everything but the MAC is decided and the path is updated as if the MAC
//! verified ([`Hop::settle`]); pass 3 compares the MAC and gives the
//! verdict, undoing the updates if it fails ([`LaneHop::verdict`],
//! [`LaneHop::undo`]). The lane hops that lead a burst are read in a loop
//! of their own ([`sweep`]); the stage's general loop takes the rest.

use core::ops::Range;

use mac::Block;
use packet::scion::epic::{EPIC_LEN, HVF_LEN};
use packet::scion::header::{host_len, ADDR_FIXED_LEN, COMMON_LEN};
use packet::scion::path::{HOP_LEN, INFO_LEN, INF_FLAG_CONS_DIR, INF_FLAG_PEER, META_LEN};
use packet::scion::{curr_segment_bounds, meta_word_valid, path_len_of, PathType};
use pipeline::{Batch, DropReason, Meta, PacketBuf, ScionHint, BURST};

use crate::forward::Forwarder;
use crate::hopmac::is_expired_by;
use crate::interfaces::INTERNAL_IF;
use crate::run::{layout_word, parsed_key, LAYOUT_MASK};

/// The internal interface's number, its two bytes as on the wire (as
/// [`Hop::settle`] takes the arrival interface).
const INTERNAL_WIRE: u16 = INTERNAL_IF.swap_bytes();

/// The lane's template: where the standard path of a SCION packet
/// (PathType 1, or embedded in EPIC-Z's, PathType 201) lies when its common
/// header is laid out like the last one located, and where the current
/// info and hop fields lie when its meta header is also the template's.
///
/// Laid out alike means the same parser findings and hint (so the header
/// is at the same offset), the same [`LAYOUT_MASK`] bytes (header length,
/// path type, address types and lengths), and version 0 and a payload that
/// fits, unless the parse stage checked those ([`crate::run::RunKey`]
/// decides a run the same way): then `stage::locate_path` finds the same
/// path. The same meta header then means the same path length, so the
/// template's [`Shape`] holds.
///
/// An EPIC-Z template also fixes the HVF count (NumHVF, non-zero): with the
/// same path length (from the layout) and the same count,
/// `EpicPath::new_checked` accepts exactly the packets whose embedded meta
/// header is valid, counts that many hop fields and describes a path that
/// ends where the template's does, and puts their embedded path at the
/// template's; a packet whose meta header fails that is a miss, so that
/// the general path locates it and gives its error.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Template {
    parsed: u32,
    hint: ScionHint,
    layout: u64,
    /// For EPIC-Z, the byte at offset `num_at` (NumHVF) must be `num`.
    num_at: usize,
    num: u8,
    /// The HVF count of an EPIC-Z template, 0 for PathType 1.
    hvfs: u32,
    /// Offsets in the packet: the SCION header (32-bit, so that the end of
    /// its common header cannot overflow), its path, the path's end; and
    /// the path's length.
    hdr: u32,
    path: usize,
    end: usize,
    len: usize,
    /// The meta header's shape.
    shape: Shape,
}

/// The fields of a lane packet that its processing writes.
pub(crate) struct Fields<'a> {
    /// The meta header.
    head: &'a mut [u8; META_LEN],
    /// The SegID of the current info field.
    seg: &'a mut [u8; 2],
}

/// What [`Template::read`] found.
pub(crate) enum Read<'a> {
    /// A lane hop, and the fields its processing writes.
    Lane(Hop, Fields<'a>),
    /// A SCION packet laid out as the template, its hop not a lane hop:
    /// its header is at `hdr` and its path at `path`.
    Laid { hdr: usize, path: Range<usize> },
    /// Laid out otherwise.
    Miss,
}

impl Template {
    /// Reads every packet as a miss: its header and path are empty, so no
    /// common header fits.
    pub(crate) const NONE: Template = Template {
        parsed: 0,
        hint: ScionHint::UNCHECKED,
        layout: 0,
        num_at: 0,
        num: 0,
        hvfs: 0,
        hdr: 0,
        path: 0,
        end: 0,
        len: 0,
        shape: Shape::NONE,
    };

    /// Takes the layout of the packet `data` with `meta`, whose SCION
    /// header at `hdr` was located with its standard path at `path`, if it
    /// is of PathType 1, or of PathType 201 with a non-zero HVF count, and
    /// its path ends within 16-bit offsets (else keeps the template as it
    /// is). Whether it did. Out of line: it runs once a layout, and the
    /// loop that reads packets stays small.
    #[inline(never)]
    pub(crate) fn relayout(
        &mut self,
        meta: &Meta,
        data: &[u8],
        hdr: usize,
        path: &Range<usize>,
    ) -> bool {
        let Some(c) = data.get(hdr..).and_then(|b| b.first_chunk::<COMMON_LEN>()) else {
            return false;
        };
        let (num_at, num, hvfs) = match PathType(c[8]) {
            PathType::SCION => (0, 0, 0),
            PathType::EPIC_Z => {
                // The EPIC part starts where the address header ends; its
                // byte 9 is NumHVF.
                let epic = hdr + COMMON_LEN + ADDR_FIXED_LEN + host_len(c[9] >> 4);
                let epic = epic + host_len(c[9] & 0x0f);
                let Some(&n) = data.get(epic + 9) else {
                    return false;
                };
                // A zero count is inferred from the length: not for the lane.
                if n == 0 || epic + EPIC_LEN + usize::from(n) * HVF_LEN != path.start {
                    return false;
                }
                (epic + 9, n, u32::from(n))
            }
            _ => return false,
        };
        // Offsets in a lane hop are 16-bit.
        let (Ok(hdr), Ok(_)) = (u32::try_from(hdr), u16::try_from(path.end)) else {
            return false;
        };
        *self = Template {
            parsed: parsed_key(meta),
            hint: meta.scion,
            layout: layout_word(c) & LAYOUT_MASK,
            num_at,
            num,
            hvfs,
            hdr,
            path: path.start,
            end: path.end,
            len: path.len(),
            ..Template::NONE
        };
        true
    }

    /// Reads the packet `data` with `meta` (see [`Read`]). A packet whose
    /// layout was just taken ([`relayout`](Self::relayout)) is not a miss.
    #[inline(always)]
    pub(crate) fn read<'a>(&mut self, meta: &Meta, data: &'a mut [u8]) -> Read<'a> {
        if (parsed_key(meta) != self.parsed) | (meta.scion != self.hint) {
            return Read::Miss;
        }
        // The packet up to the path, and from the path on.
        let Some((pre, path)) = data.split_at_mut_checked(self.path) else {
            return Read::Miss;
        };
        // The path, and what is left for the payload after it.
        let Some((path, rest)) = path.split_at_mut_checked(self.len) else {
            return Read::Miss;
        };
        let rest = rest.len();
        let hdr = self.hdr as usize;
        let Some(c) = pre.get(hdr..hdr + COMMON_LEN).and_then(|c| c.first_chunk::<COMMON_LEN>())
        else {
            return Read::Miss;
        };
        if self.hint == ScionHint::UNCHECKED {
            let payload = usize::from(u16::from_be_bytes([c[6], c[7]]));
            if !((c[0] >> 4 == 0) & (rest >= payload)) {
                return Read::Miss;
            }
        }
        if layout_word(c) & LAYOUT_MASK != self.layout {
            return Read::Miss;
        }
        // EPIC-Z's HVF count (inside the header, before the path).
        if (self.hvfs != 0) && pre.get(self.num_at) != Some(&self.num) {
            return Read::Miss;
        }
        let laid = Read::Laid { hdr, path: self.path..self.end };
        // (An EPIC-Z template's path is never this short.)
        let Some((head, _)) = path.split_first_chunk_mut::<META_LEN>() else {
            return laid;
        };
        // The fields are kept as loaded (little-endian words of the wire
        // bytes): compares and the MAC input need no byte swaps.
        let w = u32::from_le_bytes(*head);
        if u64::from(w) != self.shape.w && !self.reshape(w) {
            return if self.located(w) { laid } else { Read::Miss };
        }
        let s = &self.shape;
        // The hop field is read first, then the meta header and the info
        // field (after the meta header, before the hop field, in every
        // path) are taken to write; the offsets are 16-bit, so each range
        // costs one compare.
        let (info_at, hop_off) = (usize::from(s.info_at), usize::from(s.hop_off));
        let Some(hop) =
            path.get(hop_off..hop_off + HOP_LEN).and_then(|h| h.first_chunk::<HOP_LEN>())
        else {
            return laid;
        };
        let (hop_head, tail) = hop.split_at(8);
        let (hop_head, tail) = (
            u64::from_le_bytes(hop_head.try_into().unwrap_or_default()),
            u32::from_le_bytes(tail.try_into().unwrap_or_default()),
        );
        let Some((head, fields)) = path.split_first_chunk_mut::<META_LEN>() else {
            return laid;
        };
        let Some(info) = fields
            .get_mut(info_at..info_at + INFO_LEN)
            .and_then(|f| f.first_chunk_mut::<INFO_LEN>())
        else {
            return laid;
        };
        let info_word = u64::from_le_bytes(*info);
        // The SegID: bytes 2-3 of the info field.
        let [_, _, seg @ .., _, _, _, _] = info;
        Read::Lane(
            Hop {
                meta: w,
                tail,
                info: info_word,
                hop: hop_head,
                path: self.path as u16,
                // The P flag in the info field's flags (byte 0).
                peering: info_word as u8 & s.peer != 0,
            },
            Fields { head, seg },
        )
    }

    /// Whether a layout was taken (else every packet is a miss).
    #[inline(always)]
    pub(crate) fn is_set(&self) -> bool {
        self.end != 0
    }

    /// The header offset and the path of a packet laid out as the template,
    /// and that it is not EPIC-HP.
    #[inline(always)]
    pub(crate) fn at(&self) -> (usize, Range<usize>, bool) {
        (self.hdr as usize, self.path..self.end, false)
    }

    /// Whether a packet that repeats the last lane hop is better left to
    /// start a run: only on a standard path. An EPIC-Z path is not located
    /// from the common header alone, so it starts no run, and its packets
    /// take the lane even when they repeat a hop (one MAC each, still far
    /// less than locating them one by one).
    #[inline(always)]
    pub(crate) fn runs(&self) -> bool {
        self.hvfs == 0
    }

    /// Takes the shape of the meta header `w` (as loaded, little-endian) if
    /// it is a lane hop's in a path of the template's length (and, for
    /// EPIC-Z, [`located`](Self::located) there). Whether it did.
    #[cold]
    #[inline(never)]
    fn reshape(&mut self, w: u32) -> bool {
        match Shape::of(w) {
            Some(s) if s.len == self.len && self.located(w) => {
                self.shape = s;
                true
            }
            _ => false,
        }
    }

    /// Whether a packet laid out as the template, with the meta header `w`
    /// (as loaded) on its path, is located at the template's path: always
    /// for PathType 1; for EPIC-Z if `w` passes `EpicPath::new_checked`'s
    /// checks (valid, as many hop fields as HVFs, ending where the path
    /// does), else the general path locates it and gives its error.
    #[cold]
    #[inline(never)]
    fn located(&self, w: u32) -> bool {
        let w = u32::from_be_bytes(w.to_le_bytes());
        let n_hf = ((w >> 12) & 0x3f) + ((w >> 6) & 0x3f) + (w & 0x3f);
        self.hvfs == 0 || (meta_word_valid(w) && n_hf == self.hvfs && path_len_of(w) == self.len)
    }
}

/// What a PathMetaHdr word fixes of a lane hop: the path's length and where
/// its current info and hop fields lie.
#[derive(Clone, Copy, Debug)]
struct Shape {
    /// The word as loaded (little-endian); wider, so that
    /// [`NONE`](Self::NONE) matches no word.
    w: u64,
    /// Length of the path.
    len: usize,
    /// Offsets of the current info field after the meta header, and of
    /// the current hop field in the path (16-bit: a path is shorter than
    /// 2^16 bytes).
    info_at: u16,
    hop_off: u16,
    /// The info field's P flag if it makes this hop a peering hop (the
    /// first hop field of segment 1 of a two-segment path), else 0.
    peer: u8,
}

impl Shape {
    /// Matches no meta header.
    const NONE: Shape = Shape { w: u64::MAX, len: 0, info_at: 0, hop_off: 0, peer: 0 };

    /// The shape of the meta header `raw` (as loaded, little-endian) if it
    /// is valid ([`meta_word_valid`]) and its current hop field is not the
    /// last of its segment.
    #[inline]
    fn of(raw: u32) -> Option<Shape> {
        let w = u32::from_be_bytes(raw.to_le_bytes());
        if !meta_word_valid(w) {
            return None;
        }
        let (inf, hf) = (w >> 30, (w >> 24) & 0x3f);
        if hf + 1 >= curr_segment_bounds(w).1 {
            return None;
        }
        let (s0, s1, s2) = ((w >> 12) & 0x3f, (w >> 6) & 0x3f, w & 0x3f);
        let n_inf = u32::from(s0 != 0) + u32::from(s1 != 0) + u32::from(s2 != 0);
        Some(Shape {
            w: u64::from(raw),
            len: path_len_of(w),
            info_at: (inf as usize * INFO_LEN) as u16,
            hop_off: (META_LEN + n_inf as usize * INFO_LEN + hf as usize * HOP_LEN) as u16,
            // As `HopPlan`: the last hop field of segment 0 (never a lane
            // hop) or the first of segment 1.
            peer: if s0 != 0 && s1 != 0 && s2 == 0 && (hf + 1 == s0 || hf == s0) {
                INF_FLAG_PEER
            } else {
                0
            },
        })
    }
}

/// The current hop of a lane packet as read: meta header, current info
/// field and current hop field, each as loaded (little-endian words of the
/// wire bytes: byte k of a field is bits 8k..8k+8).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Hop {
    /// The meta header.
    meta: u32,
    /// Offset of the path in the packet (below 2^16: see
    /// [`Template::relayout`]).
    path: u16,
    /// Bytes 8-11 of the hop field (the MAC's last four bytes).
    tail: u32,
    /// The info field.
    info: u64,
    /// Bytes 0-7 of the hop field.
    hop: u64,
    /// A peering hop (its SegID is not chained).
    peering: bool,
}

impl Hop {
    /// Whether the info field is in construction direction.
    #[inline(always)]
    fn cons(&self) -> bool {
        self.info as u8 & INF_FLAG_CONS_DIR != 0
    }

    /// The CMAC input of the hop field
    /// ([`HopPlan::mac_input`](crate::HopPlan::mac_input)) masked with
    /// `k1` (as two little-endian words).
    #[inline(always)]
    pub(crate) fn masked_input(&self, k1: (u64, u64)) -> Block {
        // Bytes 0-7: zero, SegID, Timestamp (the info field with its flags
        // and reserved byte cleared). β_i is the SegID as is in construction
        // direction and on peering hops, else β_{i+1} ⊕ σ_i[0:2] (σ's first
        // two bytes are the hop field's bytes 6-7).
        let mut lo = self.info & !0xffff;
        if !(self.cons() | self.peering) {
            lo ^= (self.hop >> 48) << 16;
        }
        // Bytes 8-15: zero, ExpTime, ConsIngress, ConsEgress, zero (the hop
        // field's bytes 0-7 with its flags and MAC cleared).
        let hi = self.hop & 0x0000_ffff_ffff_ff00;
        let mut b = [0; 16];
        b[..8].copy_from_slice(&(lo ^ k1.0).to_le_bytes());
        b[8..].copy_from_slice(&(hi ^ k1.1).to_le_bytes());
        b
    }

    /// Decides everything [`Forwarder::apply_checked`] decides for this hop
    /// but the MAC, for packet `i` that arrived on the interface whose
    /// number, its two bytes as on the wire, is `ingress_if`,
    /// at the time whose [`expiry_bound`](crate::hopmac::expiry_bound) is
    /// `expiry`, and updates its `fields` as it would once the MAC verifies
    /// ([`LaneHop::undo`] reverts that if it does not).
    #[inline(always)]
    pub(crate) fn settle(
        &self,
        fwd: &Forwarder,
        fields: Fields<'_>,
        i: usize,
        ingress_if: u16,
        expiry: u64,
    ) -> LaneHop {
        let ts = u32::from_be_bytes(((self.info >> 32) as u32).to_le_bytes());
        let expired = is_expired_by(ts, (self.hop >> 8) as u8, expiry);
        // ConsIngress and ConsEgress as one loaded word (its halves swapped
        // against construction direction; one rotate, where a swap of two
        // values took two selects): the interfaces stay as loaded
        // (little-endian words of the wire bytes), compared so, and only
        // the egress one's bytes are swapped to look up its port.
        let pair = (self.hop >> 16) as u32;
        let pair = if self.cons() { pair } else { pair.rotate_left(16) };
        let (ingress, egress) = (pair as u16, (pair >> 16) as u16);
        // In `apply_checked`'s order: expiry (before any write), then the
        // SegID update, the ingress interface, the exit; interface 0 has no
        // port and this is not the last hop field, so it is `no_route`.
        let then = if expired {
            Err(DropReason::Expired)
        } else if fwd.config().check_ingress && ingress_if != INTERNAL_WIRE && ingress != ingress_if
        {
            Err(DropReason::WrongInterface)
        } else {
            fwd.interfaces().port(egress.swap_bytes()).ok_or(DropReason::NoRoute)
        };
        let seg = !(self.peering | expired);
        if seg {
            // Both directions apply the same XOR (`chain_seg_id`), here on
            // the bytes as loaded.
            let seg = (self.info >> 16) as u16 ^ (self.hop >> 48) as u16;
            *fields.seg = seg.to_le_bytes();
        }
        if then.is_ok() {
            // CurrHF + 1 (byte 0, below CurrINF: at most 63, inside the
            // segment, so CurrINF stays).
            *fields.head = (self.meta + 1).to_le_bytes();
        }
        LaneHop {
            wire: (self.hop >> 48) | (u64::from(self.tail) << 16),
            then: LaneExit::of(then),
            seg,
            path: self.path,
            i: i as u8,
        }
    }
}

/// Pass 1 of the lane in a burst: the lane hops gathered so far, with
/// their MAC inputs (in a `tags` array passed along, from its end
/// downwards: hop k's at `2 * BURST - 1 - k`).
pub(crate) struct Gather<'a> {
    fwd: &'a Forwarder,
    /// K1 of the CMAC key, as two little-endian words.
    k1: (u64, u64),
    /// The burst's [`expiry_bound`](crate::hopmac::expiry_bound).
    expiry: u64,
    lanes: &'a mut [LaneHop; BURST],
    /// How far it got.
    at: Progress,
}

/// How far a [`Gather`] got: small and `Copy`, so that a loop keeps it in
/// registers.
#[derive(Clone, Copy)]
struct Progress {
    /// Lane hops gathered.
    l: usize,
    /// The hop field of the last lane hop (bytes 0-7 and 8-11, MAC
    /// included): a packet that repeats it is most likely at the same hop
    /// of the same path, and better left to start a run
    /// ([`Gather::fresh`]; only a hint: the run compares it in full).
    last: (u64, u32),
    /// The last arrival port and its ingress interface, the number's two
    /// bytes as on the wire (most of a burst shares it; no port is
    /// `u32::MAX`).
    port: u32,
    ingress_if: u16,
}

impl Progress {
    /// As [`Gather::fresh`].
    #[inline(always)]
    fn fresh(&self, h: &Hop, t: &Template) -> bool {
        !((h.hop == self.last.0) & (h.tail == self.last.1)) || !t.runs()
    }
}

impl<'a> Gather<'a> {
    /// An empty gather into `lanes`.
    pub(crate) fn new(
        fwd: &'a Forwarder,
        k1: (u64, u64),
        expiry: u64,
        lanes: &'a mut [LaneHop; BURST],
    ) -> Self {
        // Repeated by no lane hop whose MAC is not all zero.
        let at = Progress { l: 0, last: (0, 0), port: u32::MAX, ingress_if: INTERNAL_IF };
        Gather { fwd, k1, expiry, lanes, at }
    }

    /// Lane hops gathered.
    pub(crate) fn len(&self) -> usize {
        self.at.l
    }

    /// Whether the lane hop `h`, read with the template `t`, is taken by
    /// the lane: unless it repeats the last lane hop on a path that runs
    /// ([`Template::runs`]); then it starts a run as a repeated plan.
    #[inline(always)]
    pub(crate) fn fresh(&self, h: &Hop, t: &Template) -> bool {
        self.at.fresh(h, t)
    }

    /// Takes the lane hop `h` of packet `i`, which arrived on `port`: its
    /// masked MAC input into `tags`, its path updated ([`Hop::settle`]).
    #[inline(always)]
    pub(crate) fn take(
        &mut self,
        h: Hop,
        fields: Fields<'_>,
        i: usize,
        port: u16,
        tags: &mut [Block; 2 * BURST],
    ) {
        let mut at = self.at;
        self.take_at(&mut at, h, fields, i, port, tags);
        self.at = at;
    }

    /// [`take`](Self::take) with the progress `at` held apart.
    #[inline(always)]
    fn take_at(
        &mut self,
        at: &mut Progress,
        h: Hop,
        fields: Fields<'_>,
        i: usize,
        port: u16,
        tags: &mut [Block; 2 * BURST],
    ) {
        at.last = (h.hop, h.tail);
        if u32::from(port) != at.port {
            at.port = u32::from(port);
            at.ingress_if = self.fwd.interfaces().ingress_if(port).swap_bytes();
        }
        let l = at.l;
        // Never full: a burst has at most BURST packets.
        debug_assert!(l < BURST);
        if l < BURST {
            tags[2 * BURST - 1 - l] = h.masked_input(self.k1);
            self.lanes[l] = h.settle(self.fwd, fields, i, at.ingress_if, self.expiry);
            at.l = l + 1;
        }
    }
}

/// The lane's own loop of pass 1: takes the packets of `pending` (a bit
/// mask of batch indices, lowest first) while each is a fresh lane hop
/// ([`Gather::fresh`]), and returns the packets left, starting with the
/// first that is not. Out of line, with few values live across it, so
/// that a burst of lane hops (the common transit hop) is read in a loop
/// of its own; the general loop then continues where it stops, in the same
/// state, so a burst is handled as if that loop had read every packet.
#[inline(never)]
pub(crate) fn sweep<B: PacketBuf>(
    batch: &mut Batch<B>,
    mut pending: u32,
    t: &mut Template,
    g: &mut Gather<'_>,
    tags: &mut [Block; 2 * BURST],
) -> u32 {
    let mut at = g.at;
    let (bufs, metas) = batch.bufs_mut_metas();
    while pending != 0 {
        let i = pending.trailing_zeros() as usize;
        let (Some(buf), Some(meta)) = (bufs.get_mut(i), metas.get(i)) else {
            break;
        };
        match t.read(meta, buf.data_mut()) {
            Read::Lane(h, fields) if at.fresh(&h, t) => {
                g.take_at(&mut at, h, fields, i, meta.port, tags)
            }
            _ => break,
        }
        pending &= pending - 1;
    }
    g.at = at;
    pending
}

/// A lane packet between pass 1 and pass 3: what it becomes once its MAC
/// verifies, and how to undo its path updates if it does not.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LaneHop {
    /// The MAC on the wire (its six bytes as a little-endian word).
    wire: u64,
    /// The exit port, or why the packet is dropped after its MAC verified
    /// ([`LaneExit`]).
    then: LaneExit,
    /// Offset of the path in the packet (the meta header was updated when
    /// `then` is a port).
    path: u16,
    /// Index in the batch.
    pub(crate) i: u8,
    /// Whether the SegID was updated.
    seg: bool,
}

/// What a lane hop becomes once its MAC verifies, as one word: a port
/// (below 2^16), or [`DROP`](Self::DROP) plus the drop reason's index. One
/// word, so that pass 3 tests a hop's MAC and exit port at once
/// ([`LaneHop::leaves_on`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LaneExit(u32);

impl LaneExit {
    /// The first word of a drop.
    const DROP: u32 = 1 << 16;
    /// Equal to no exit.
    pub(crate) const NONE: LaneExit = LaneExit(u32::MAX);

    /// The word of `then`.
    #[inline(always)]
    fn of(then: Result<u16, DropReason>) -> LaneExit {
        match then {
            Ok(port) => LaneExit(u32::from(port)),
            Err(r) => LaneExit(Self::DROP + r.index() as u32),
        }
    }

    /// The exit the word stands for.
    #[inline(always)]
    fn get(self) -> Result<u16, DropReason> {
        match u16::try_from(self.0) {
            Ok(port) => Ok(port),
            Err(_) => {
                let r = DropReason::ALL.get(self.0.wrapping_sub(Self::DROP) as usize);
                Err(r.copied().unwrap_or(DropReason::Malformed))
            }
        }
    }

    /// The exit if it is a port, else [`NONE`](Self::NONE).
    #[inline(always)]
    pub(crate) fn port_or_none(self) -> LaneExit {
        if self.0 < Self::DROP {
            self
        } else {
            Self::NONE
        }
    }

    /// The port of an exit that is one (of [`port_or_none`](Self::port_or_none)).
    #[inline(always)]
    pub(crate) fn port(self) -> Option<u16> {
        u16::try_from(self.0).ok()
    }
}

impl LaneHop {
    /// A placeholder for arrays filled in pass 1.
    pub(crate) const EMPTY: LaneHop =
        LaneHop { wire: 0, then: LaneExit::NONE, path: 0, i: 0, seg: false };

    /// The exit the hop is decided for if its MAC verifies.
    #[inline(always)]
    pub(crate) fn then(&self) -> LaneExit {
        self.then
    }

    /// The bits in which the hop field's MAC on the wire differs from the
    /// first six bytes of its full MAC `tag` (0 if it verifies).
    #[inline(always)]
    fn mac_diff(&self, tag: &Block) -> u64 {
        let computed = u64::from_le_bytes(*tag.first_chunk::<8>().unwrap_or(&[0; 8]));
        (computed & 0xffff_ffff_ffff) ^ self.wire
    }

    /// Whether the hop field's full MAC `tag` verifies and the hop leaves
    /// through `exit` (a port): both in one test.
    #[inline(always)]
    pub(crate) fn leaves_on(&self, tag: &Block, exit: LaneExit) -> bool {
        let differs = self.mac_diff(tag) | u64::from(self.then.0 ^ exit.0);
        // Kept opaque to the optimiser, as `mac_eq`: one test of the whole
        // MAC, no early exit on a byte.
        core::hint::black_box(differs) == 0
    }

    /// The verdict with the hop field's full MAC `tag`: `then` if the MAC
    /// verifies, else `bad_mac` (the path updates are then undone).
    #[inline(always)]
    pub(crate) fn verdict(&self, tag: &Block) -> Result<u16, DropReason> {
        // One XOR kept opaque to the optimiser, as `mac_eq`.
        if core::hint::black_box(self.mac_diff(tag)) != 0 {
            return Err(DropReason::BadMac);
        }
        self.then.get()
    }

    /// Restores the SegID and meta header [`Hop::settle`] updated in the
    /// packet bytes `data`: the SegID was XORed with the MAC's first two
    /// bytes, CurrHF was incremented (CurrINF, which places the SegID, was
    /// not).
    #[cold]
    pub(crate) fn undo(&self, data: &mut [u8]) {
        let path = usize::from(self.path);
        let Some(head) = data.get_mut(path..).and_then(|b| b.first_chunk_mut::<META_LEN>()) else {
            return;
        };
        let curr_inf = usize::from(head[0] >> 6);
        if self.then.get().is_ok() {
            *head = (u32::from_le_bytes(*head) - 1).to_le_bytes();
        }
        // The SegID: bytes 2-3 of the current info field.
        let at = path + META_LEN + curr_inf * INFO_LEN + 2;
        if let (true, Some(f)) = (self.seg, data.get_mut(at..at + 2)) {
            let seg = u16::from_le_bytes([f[0], f[1]]) ^ self.wire as u16;
            f.copy_from_slice(&seg.to_le_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::{self, HopSpec};
    use crate::hopmac::ForwardingKey;
    use mac::Key;
    use packet::scion::{AddrHdrRepr, EpicPathRepr, PathRepr, RawHostAddr, ScionRepr};
    use packet::{HostAddr, Ia};

    /// A bare SCION packet over two segments of 3 and 2 hop fields at hop
    /// `hf`, with IPv4 or IPv6 host addresses.
    fn packet(hf: u8, v6: bool) -> Vec<u8> {
        packet_of(hf, v6, false)
    }

    /// As [`packet`], as EPIC-Z (the same SCION path embedded).
    fn epic_z(hf: u8) -> Vec<u8> {
        packet_of(hf, false, true)
    }

    fn packet_of(hf: u8, v6: bool, epic_z: bool) -> Vec<u8> {
        let key = ForwardingKey::new(&Key::from([3; 16]));
        let hs = |i, e| HopSpec { key: key.clone(), cons_ingress: i, cons_egress: e, exp_time: 9 };
        let s0 = build::segment(false, 0x1111, 1_700_000_000, &[hs(0, 1), hs(2, 3), hs(4, 5)]);
        let s1 = build::segment(true, 0x2222, 1_700_000_050, &[hs(0, 4), hs(5, 0)]);
        let mut path = build::path(&[s0, s1]).expect("path");
        path.curr_hf = hf;
        path.curr_inf = u8::from(hf >= 3);
        let host = RawHostAddr::from(if v6 { HostAddr::V6([1; 16]) } else { HostAddr::V4([1; 4]) });
        let hdr = AddrHdrRepr {
            qos: 0,
            flow_id: 1,
            next_hdr: 17,
            payload_len: 8,
            dst_ia: Ia::new(1, 2),
            src_ia: Ia::new(1, 1),
            dst_host: host,
            src_host: host,
        };
        let hvfs = [[0xee; 4]; 5];
        let path = match epic_z {
            true => PathRepr::EpicZ(EpicPathRepr {
                hvfs: (&hvfs[..]).into(),
                path: path.repr(),
                ..EpicPathRepr::default()
            }),
            false => PathRepr::Scion(path.repr()),
        };
        let r = ScionRepr { hdr, path };
        let mut b = vec![0; r.buffer_len() + 8];
        r.emit(&mut b).expect("packet");
        b
    }

    /// A template taken from `pkt` (bare, header at 0).
    fn template(pkt: &[u8]) -> Template {
        let loc = crate::locate::locate(pkt, 0).expect("valid");
        let mut t = Template::NONE;
        assert!(t.relayout(&Meta::new(0), pkt, 0, &loc.scion));
        t
    }

    fn kind(t: &mut Template, pkt: &mut [u8]) -> &'static str {
        match t.read(&Meta::new(0), pkt) {
            Read::Lane(..) => "lane",
            Read::Laid { .. } => "laid",
            Read::Miss => "miss",
        }
    }

    #[test]
    fn hops_inside_a_segment_take_the_lane() {
        let mut t = template(&packet(1, false));
        // Inside segment 0 (either hop before its last), and the first
        // hop of segment 1: the lane; the meta header's shape changes.
        for hf in [0, 1, 3] {
            assert_eq!(kind(&mut t, &mut packet(hf, false)), "lane", "hop {hf}");
        }
        // The end of segment 0 (a cross-over) and the last hop: laid out
        // alike, for the general parse.
        for hf in [2, 4] {
            assert_eq!(kind(&mut t, &mut packet(hf, false)), "laid", "hop {hf}");
        }
        // Another layout, another version, a payload longer than the packet.
        assert_eq!(kind(&mut t, &mut packet(1, true)), "miss");
        let mut p = packet(1, false);
        p[0] |= 0x10;
        assert_eq!(kind(&mut t, &mut p), "miss");
        let mut p = packet(1, false);
        p.truncate(p.len() - 1);
        assert_eq!(kind(&mut t, &mut p), "miss");
        // A meta header that is not valid is left to the general parse
        // (the shape that matches no word is not taken for it).
        let mut p = packet(1, false);
        let path = p.len() - 8 - (4 + 2 * 8 + 5 * 12);
        p[path..path + 4].fill(0);
        let none = || Template::NONE;
        assert_eq!(kind(&mut none(), &mut p), "miss");
        assert_eq!(kind(&mut template(&p), &mut p), "laid");
        // No packet fits the empty template.
        assert_eq!(kind(&mut none(), &mut packet(1, false)), "miss");
    }

    #[test]
    fn a_path_that_ends_past_16_bit_offsets_takes_no_template() {
        let pkt = packet(1, false);
        let loc = crate::locate::locate(&pkt, 0).expect("valid");
        // The same packet behind other headers, so that its path ends at
        // 2^16.
        let far = usize::from(u16::MAX) + 1 - loc.scion.end;
        let mut behind = vec![0; far];
        behind.extend_from_slice(&pkt);
        let path = loc.scion.start + far..loc.scion.end + far;
        let mut t = Template::NONE;
        assert!(!t.relayout(&Meta::new(0), &behind, far, &path));
        assert_eq!(kind(&mut t, &mut behind), "miss");
        // One byte less, and its path ends at the last 16-bit offset.
        let path = path.start - 1..path.end - 1;
        assert!(t.relayout(&Meta::new(0), &behind[1..], far - 1, &path));
        assert_eq!(kind(&mut t, &mut behind[1..]), "lane");
    }

    #[test]
    fn epic_z_takes_the_lane_with_its_hvf_count() {
        let mut t = template(&epic_z(1));
        for hf in [0, 1, 3] {
            assert_eq!(kind(&mut t, &mut epic_z(hf)), "lane", "hop {hf}");
        }
        for hf in [2, 4] {
            assert_eq!(kind(&mut t, &mut epic_z(hf)), "laid", "hop {hf}");
        }
        // Standard paths are laid out otherwise (their path type).
        assert_eq!(kind(&mut t, &mut packet(1, false)), "miss");
        // NumHVF is byte 9 of the EPIC part, after the common header, the
        // two ISD-AS and two IPv4 hosts.
        let epic = 12 + 16 + 2 * 4;
        let num = epic + 9;
        for n in [0, 4, 6, 0xff] {
            let mut p = epic_z(1);
            p[num] = n;
            assert_eq!(kind(&mut t, &mut p), "miss", "NumHVF {n}");
        }
        // An embedded meta header that EPIC-Z's checks reject: a miss, so
        // that the general path gives its error.
        let meta = epic + 12 + 5 * 4;
        let mut p = epic_z(1);
        p[meta..meta + 4].fill(0);
        assert_eq!(kind(&mut t, &mut p), "miss");
        // A count left to inference: no template.
        let mut p = epic_z(1);
        p[num] = 0;
        let loc = crate::locate::locate(&p, 0).expect("inferred");
        let mut none = Template::NONE;
        assert!(!none.relayout(&Meta::new(0), &p, 0, &loc.scion));
    }

    #[test]
    fn the_mac_input_is_the_plans() {
        let mut t = template(&packet(1, false));
        for hf in [0, 1, 3] {
            let mut p = packet(hf, false);
            let h = packet::scion::ScionHeader::new_checked(&p[..]).expect("valid");
            let path = h.path_offset()..h.header_len();
            let plan = crate::HopPlan::parse(&p[path]).expect("valid");
            let Read::Lane(hop, _) = t.read(&Meta::new(0), &mut p) else {
                panic!("hop {hf}: not a lane hop");
            };
            assert_eq!(hop.masked_input((0, 0)), plan.mac_input(), "hop {hf}");
        }
    }
}
