//! A burst of up to [`BURST`] packets with per-packet metadata.

use core::ops::Range;

use packet::scion::PathType;

use crate::buf::PacketBuf;
use crate::verdict::{Class, DropReason, Verdict};

/// Packets per burst: the unit of I/O, of stage processing and of AES batching.
pub const BURST: usize = 32;

// The live set is a `u32` bit mask.
const _: () = assert!(BURST <= 32);

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

/// What the parse stage found in a SCION packet's common header, after
/// checking it as `packet::scion::ScionHeader::new_checked` does: later
/// stages pass other path types on by this hint alone, without reading the
/// packet or checking its header again.
///
/// The hint describes the header at [`Meta::proto_off`]; a stage that
/// rewrites a SCION packet's path type or moves its header must reset it.
/// Without a parse stage (or for a header that failed the check) it stays
/// [`UNCHECKED`](Self::UNCHECKED), and stages judge the packet in full.
#[derive(Clone, Copy, Debug, Eq)]
pub struct ScionHint {
    /// The path type plus one (wrapping): 0, all zero bytes with `next_hdr`,
    /// is "unchecked", so a fresh [`Meta`] is written with wide zero stores.
    path_type_plus_one: u8,
    next_hdr: u8,
}

impl ScionHint {
    /// Nothing checked.
    pub const UNCHECKED: ScionHint = ScionHint { path_type_plus_one: 0, next_hdr: 0 };

    /// The hint of a header that passed the check. Path type 255 reads as
    /// unchecked (no such path type is defined; stages then judge in full).
    #[inline(always)]
    pub const fn checked(path_type: u8, next_hdr: u8) -> ScionHint {
        ScionHint { path_type_plus_one: path_type.wrapping_add(1), next_hdr }
    }

    /// The hint for the SCION header at the start of `pkt`, as the parse
    /// stage leaves it: path type and `NextHdr` when the common header
    /// passes `ScionHeader::new_checked`'s checks, unchecked otherwise.
    #[inline(always)]
    pub fn of_header(pkt: &[u8]) -> ScionHint {
        match packet::scion::header::common_header_ok(pkt) {
            Some(c) => ScionHint::checked(c[8], c[4]),
            None => ScionHint::UNCHECKED,
        }
    }

    /// `PathType` and `NextHdr` of a checked header.
    #[inline(always)]
    pub const fn get(self) -> Option<(PathType, u8)> {
        if self.path_type_plus_one == 0 {
            None
        } else {
            Some((PathType(self.path_type_plus_one - 1), self.next_hdr))
        }
    }

    /// The path type of a checked header.
    #[inline(always)]
    pub const fn path_type(self) -> Option<PathType> {
        match self.get() {
            Some((t, _)) => Some(t),
            None => None,
        }
    }

    /// Both bytes as one word, for compares over a burst.
    #[inline(always)]
    const fn word(self) -> u16 {
        u16::from_le_bytes([self.path_type_plus_one, self.next_hdr])
    }
}

// Compared and hashed as one word (a derived compare takes two byte
// compares, in per-packet checks of a run).
impl PartialEq for ScionHint {
    #[inline(always)]
    fn eq(&self, other: &Self) -> bool {
        self.word() == other.word()
    }
}

impl core::hash::Hash for ScionHint {
    fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
        self.word().hash(state);
    }
}

impl Default for ScionHint {
    fn default() -> Self {
        ScionHint::UNCHECKED
    }
}

/// Per-packet metadata carried next to the buffer through the pipeline.
///
/// 20 bytes, laid out (`repr(C)`) for [`Meta::new`], which the runtime
/// writes for every received packet: the zero fields, the two copies of the
/// arrival port and the [`NO_OFFSET`] fields each lie together, so that a
/// fresh record takes a few wide stores instead of one per field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Meta {
    /// Flow hash (RSS) used for sharding and table lookups.
    pub hash: u32,
    /// The decision so far; starts as forward-to-ingress-port in best effort.
    pub verdict: Verdict,
    /// Port the packet arrived on.
    pub port: u16,
    /// Offset of the network header, or [`NO_OFFSET`].
    pub l3_off: u16,
    /// Offset of the transport header (UDP/TCP), or [`NO_OFFSET`].
    pub l4_off: u16,
    /// Offset of the protocol header in [`proto`](Self::proto), or [`NO_OFFSET`].
    pub proto_off: u16,
    /// Network layer found by the parser.
    pub l3: L3,
    /// Protocol found above IP.
    pub proto: Proto,
    /// The parse stage's check of a SCION header ([`Proto::Scion`] only).
    pub scion: ScionHint,
}

// The layout the comment above describes.
const _: () = assert!(core::mem::size_of::<Meta>() == 20);

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
            scion: ScionHint::UNCHECKED,
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

/// The mask with the lowest `n` bits set (`n <= 32`, a batch's length):
/// shifted in 64 bits, so `n == 32` needs no branch.
#[inline]
const fn full_mask(n: usize) -> u32 {
    debug_assert!(n <= BURST);
    ((1u64 << (n % 64)) - 1) as u32
}

/// Fresh metadata ([`Meta::new`]) for every packet of a full burst from
/// port `P`: the record is a compile-time constant, so the compiler writes
/// the burst as 16-byte stores of a few constant vectors (40 stores for 32
/// packets) instead of copying a record from memory for each.
#[inline(always)]
fn fill_fresh<const P: u16>(meta: &mut [Meta; BURST]) {
    let (quads, _) = meta.as_chunks_mut::<4>();
    for q in quads {
        *q = const { [Meta::new(P); 4] };
    }
}

/// [`fill_fresh`] for a port known only at run time: four records (80
/// bytes, five 16-byte stores) per step, each step loading them again.
#[inline(always)]
fn fill_fresh_any(meta: &mut [Meta; BURST], port: u16) {
    // Copied as one value: built from the constant, the compiler wrote
    // each record field by field (five stores per packet).
    let quad = [core::hint::black_box(Meta::new(port)); 4];
    let (quads, _) = meta.as_chunks_mut::<4>();
    for q in quads {
        *q = quad;
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

    /// The indices not yet visited, as a bit mask.
    pub const fn mask(&self) -> u32 {
        self.0
    }
}

/// What a batch knows of its live packets' verdicts: that every one is
/// forwarded on one port, and perhaps also in one class. One word, so that
/// forgetting it is one store and forgetting the class one `and`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct EgressHint(u32);

impl EgressHint {
    /// Nothing known.
    const NONE: EgressHint = EgressHint(0);
    /// The port is known (bits 0-15).
    const PORT: u32 = 1 << 24;
    /// The class is known too (bits 16-23).
    const CLASS: u32 = 1 << 25;

    /// Every live packet forwarded on `port`, in `class` if that is known.
    #[inline(always)]
    fn of(port: u16, class: Option<Class>) -> EgressHint {
        let c = class.map_or(0, |c| Self::CLASS | u32::from(c.0) << 16);
        EgressHint(Self::PORT | c | u32::from(port))
    }

    /// The common port, if known.
    #[inline(always)]
    fn port(self) -> Option<u16> {
        (self.0 & Self::PORT != 0).then_some(self.0 as u16)
    }

    /// The common class, if known (only ever with the port).
    #[inline(always)]
    fn class(self) -> Option<Class> {
        (self.0 & Self::CLASS != 0).then_some(Class((self.0 >> 16) as u8))
    }

    /// Whether the common port is known to be `port`.
    #[inline(always)]
    fn is_port(self, port: u16) -> bool {
        self.0 & (Self::PORT | 0xffff) == Self::PORT | u32::from(port)
    }

    /// The same port, the class no longer known.
    #[inline(always)]
    fn without_class(self) -> EgressHint {
        EgressHint(self.0 & (Self::PORT | 0xffff))
    }

    /// Updates what is known after one live packet was forwarded on
    /// `port`, its class not compared (a burst forwarded packet by packet
    /// keeps its port hint only): the port if it was this one. Once nothing
    /// is known, one test and no store (an unconditional store measured +3
    /// instructions per packet on EPIC-HP's per-packet forwards).
    #[inline(always)]
    fn forward_one(&mut self, port: u16) {
        if *self != EgressHint::NONE {
            *self = if self.is_port(port) { self.without_class() } else { EgressHint::NONE };
        }
    }

    /// What is known after some live packets were forwarded on `port` in
    /// `class`: the port if it was this one, the class if it was this one.
    #[inline(always)]
    fn after_forward(self, port: u16, class: Class) -> EgressHint {
        if self == EgressHint::of(port, Some(class)) {
            self
        } else if self.is_port(port) {
            self.without_class()
        } else {
            EgressHint::NONE
        }
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
    /// The port every packet arrived on, if they all share one (a hint kept
    /// by the methods that add packets; cleared when metadata is handed out
    /// mutably, since the caller could change `Meta::port`).
    ingress: Option<u16>,
    /// The port every live packet is forwarded to, if known to be one (a
    /// hint kept by [`forward`](Self::forward) and
    /// [`forward_all`](Self::forward_all); cleared like `ingress`), and
    /// the class they are all forwarded in, if known to be one.
    egress: EgressHint,
    /// Whether the live packets share one SCION hint, and which (see
    /// [`common_scion_hint`](Self::common_scion_hint)), once a stage asked;
    /// forgotten when packets are added or metadata is handed out mutably.
    common_hint: Option<Option<ScionHint>>,
    /// Whether no stage recorded layers since the packets arrived: each
    /// packet's layer fields are still those of [`Meta::new`] (see
    /// [`layers_unparsed`](Self::layers_unparsed)); cleared like `ingress`
    /// and by the parser.
    unparsed: bool,
    /// Whether the stage before the running one was a parse stage that
    /// verified IPv4 checksums (see [`ipv4_verified`](Self::ipv4_verified)).
    ipv4_verified: bool,
    /// Set by such a parse stage, for the stage after it.
    ipv4_verified_next: bool,
}

impl<B: PacketBuf> Default for Batch<B> {
    fn default() -> Self {
        Self::new()
    }
}

impl<B: PacketBuf> Batch<B> {
    /// An empty batch; its storage is reused for every burst.
    pub fn new() -> Self {
        Batch {
            bufs: Vec::with_capacity(BURST),
            meta: [Meta::new(0); BURST],
            live: 0,
            ingress: None,
            egress: EgressHint::NONE,
            common_hint: None,
            unparsed: true,
            ipv4_verified: false,
            ipv4_verified_next: false,
        }
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
        self.note_added(i == 0, port);
        Ok(i)
    }

    /// Updates the port hints after packets from `port` were added (their
    /// verdicts forward back out of `port`).
    #[inline]
    fn note_added(&mut self, was_empty: bool, port: u16) {
        self.common_hint = None;
        if was_empty {
            // Fresh metadata only; packets added later are fresh too, so a
            // batch that was unparsed stays so.
            self.unparsed = true;
            self.ingress = Some(port);
            self.egress = EgressHint::of(port, Some(Class::BEST_EFFORT));
        } else {
            if self.ingress != Some(port) {
                self.ingress = None;
            }
            self.egress = self.egress.after_forward(port, Class::BEST_EFFORT);
        }
    }

    /// Forgets the port hints (metadata is being handed out mutably).
    #[inline]
    fn forget_hints(&mut self) {
        self.ingress = None;
        self.egress = EgressHint::NONE;
        self.common_hint = None;
        self.unparsed = false;
        self.ipv4_verified = false;
        self.ipv4_verified_next = false;
    }

    /// Sets the verdict of every packet (live or not) to `v`.
    #[inline(always)]
    fn set_every_verdict(&mut self, v: Verdict) {
        let n = self.bufs.len();
        if n == BURST {
            // A full burst: a fixed count, unrolled without set-up.
            self.meta.iter_mut().for_each(|m| m.verdict = v);
        } else {
            self.meta[..n].iter_mut().for_each(|m| m.verdict = v);
        }
    }

    /// Whether it is known that no stage has recorded layers in the
    /// metadata since the packets arrived: every packet's [`Meta::l3`],
    /// [`Meta::proto`], offsets and [`Meta::scion`] are those of
    /// [`Meta::new`]. True after packets are added to an empty batch; false
    /// once a parse stage ran or metadata was handed out mutably
    /// ([`meta_mut`](Self::meta_mut), [`get_mut`](Self::get_mut),
    /// [`metas_mut`](Self::metas_mut)). Lets a stage that reads raw packets
    /// skip a walk of the metadata.
    pub fn layers_unparsed(&self) -> bool {
        self.unparsed
    }

    /// Tells the batch that layers are (about to be) recorded in the
    /// metadata through [`meta_mut_keep_hints`](Self::meta_mut_keep_hints):
    /// [`layers_unparsed`](Self::layers_unparsed) is false from now on.
    pub(crate) fn note_layers_recorded(&mut self) {
        self.unparsed = false;
    }

    /// Whether the stage that runs now directly follows, in a
    /// [`Pipeline`](crate::Pipeline), a parse stage that verifies IPv4
    /// header checksums. Then every live packet whose metadata says
    /// [`L3::Ipv4`] has an IPv4 header at [`Meta::l3_off`] that passed the
    /// parse stage's checks: a header length of at least 20 bytes, a total
    /// length that covers the header and fits the frame, and the header
    /// checksum (not the version nibble). The stage may act on such a
    /// packet without making those checks again (IP forwarding after the
    /// parse stage).
    ///
    /// It holds for that one stage only, as no other stage can have changed
    /// the packets since: it is false for every later stage, once metadata
    /// was handed out mutably, and outside a pipeline run (every run starts
    /// and ends with it forgotten, so a parse stage run outside a pipeline
    /// hands nothing on). Packets added during the stage carry fresh
    /// metadata, which says no IPv4.
    #[inline]
    pub fn ipv4_verified(&self) -> bool {
        self.ipv4_verified
    }

    /// Tells the batch that the running parse stage checked every IPv4
    /// header it recorded, as [`ipv4_verified`](Self::ipv4_verified)
    /// describes, for the stage after it.
    pub(crate) fn note_ipv4_verified(&mut self) {
        self.ipv4_verified_next = true;
    }

    /// Called by the pipeline before each stage: what the previous stage
    /// noted for its successor becomes what this one may assume.
    #[inline]
    pub(crate) fn begin_stage(&mut self) {
        self.ipv4_verified = core::mem::take(&mut self.ipv4_verified_next);
    }

    /// Called by the pipeline before its first stage and after its last:
    /// nothing noted outside a run (a stage driven by hand, then bytes
    /// changed) is handed on, and nothing noted in one outlives it.
    #[inline]
    pub(crate) fn forget_stage_notes(&mut self) {
        self.ipv4_verified = false;
        self.ipv4_verified_next = false;
    }

    /// The SCION hint every live packet of the burst carries, if they all
    /// carry the same (checked) one: a stage can then deal with the whole
    /// burst at once (pass standard paths on, class them) instead of
    /// packet by packet. One pass over the hints at the first question after
    /// the burst (or its metadata) changed; kept for the stages after (a
    /// drop since leaves the answer true of the packets still live).
    #[inline]
    pub fn common_scion_hint(&mut self) -> Option<ScionHint> {
        if let Some(h) = self.common_hint {
            return h;
        }
        let h = self.live_hint();
        self.common_hint = Some(h);
        h
    }

    /// Tells the batch that every live packet now carries the checked
    /// hint `hint` (the parse stage classified the whole burst from one
    /// template), so that [`common_scion_hint`](Self::common_scion_hint)
    /// answers without a pass over the packets.
    pub(crate) fn note_common_scion_hint(&mut self, hint: ScionHint) {
        debug_assert!(hint != ScionHint::UNCHECKED);
        debug_assert_eq!(self.live_hint(), Some(hint));
        self.common_hint = Some(Some(hint));
    }

    /// [`common_scion_hint`](Self::common_scion_hint), computed.
    fn live_hint(&self) -> Option<ScionHint> {
        let n = self.bufs.len();
        let first = self.meta.get(self.live.trailing_zeros() as usize)?.scion;
        if first == ScionHint::UNCHECKED {
            return None;
        }
        let key = first.word();
        let mut differ = 0;
        if self.live == full_mask(n) {
            // The usual case: nothing dropped, no per-packet live test.
            for m in &self.meta[..n] {
                differ |= m.scion.word() ^ key;
            }
        } else {
            for i in Indices(self.live) {
                differ |= self.meta[i].scion.word() ^ key;
            }
        }
        (differ == 0).then_some(first)
    }

    /// The port every packet of the batch arrived on, if it is known that
    /// they all share one. Known after packets are added with
    /// [`push`](Self::push) or [`extend_with`](Self::extend_with) from one
    /// port; unknown (`None`) for an empty batch and after metadata was
    /// handed out mutably ([`meta_mut`](Self::meta_mut),
    /// [`get_mut`](Self::get_mut), [`metas_mut`](Self::metas_mut)). A
    /// stage can then decide once for the whole burst.
    pub fn ingress_port(&self) -> Option<u16> {
        self.ingress
    }

    /// The port every live packet is being forwarded to, if it is known to
    /// be one and the same: after [`forward_all`](Self::forward_all), or
    /// when every packet added and every [`forward`](Self::forward) since
    /// named the same port. `None` when unknown (see
    /// [`ingress_port`](Self::ingress_port)). Lets the runtime hand a burst
    /// to one TX queue without looking at each verdict.
    pub fn egress_port(&self) -> Option<u16> {
        self.egress.port()
    }

    /// Sets the flow hash of packet `i` (keeps the port hints, unlike
    /// [`meta_mut`](Self::meta_mut)).
    pub fn set_hash(&mut self, i: usize, hash: u32) {
        self.meta[i].hash = hash;
    }

    /// The metadata of packet `i`, mutable, keeping the port hints: for this
    /// crate's own stages that never change `Meta::port` or the verdict
    /// (the parser filling in offsets).
    /// The caller records layers: it calls
    /// [`note_layers_recorded`](Self::note_layers_recorded) once per burst.
    pub(crate) fn meta_mut_keep_hints(&mut self, i: usize) -> &mut Meta {
        &mut self.meta[i]
    }

    /// Forwards every live packet on `port`, keeping its traffic class
    /// (the whole burst routed at once, e.g. by ingress port).
    pub fn forward_all(&mut self, port: u16) {
        let class = self.egress.class();
        if let Some(class) = class {
            if self.live == full_mask(self.bufs.len()) {
                // Every packet live and known to be forwarded in `class`:
                // one store of the same verdict each, no test of the old one.
                self.set_every_verdict(Verdict::Forward { port, class });
                self.egress = EgressHint::of(port, Some(class));
                return;
            }
        }
        // A live packet whose verdict a stage set by hand (not a forward) is
        // left alone, and then there is no common egress to claim. (The
        // classes stay as they were, and so does what is known of them.)
        let all_forward = self.each_live_forward(|p, _| *p = port);
        self.egress = if all_forward { EgressHint::of(port, class) } else { EgressHint::NONE };
    }

    /// Calls `f` with the port and class of every live forwarded packet;
    /// returns whether every live packet is a forward.
    #[inline(always)]
    fn each_live_forward(&mut self, mut f: impl FnMut(&mut u16, &mut Class)) -> bool {
        let live = self.live;
        let n = self.bufs.len();
        let mut all_forward = true;
        let mut visit = |m: &mut Meta| match &mut m.verdict {
            Verdict::Forward { port, class } => f(port, class),
            _ => all_forward = false,
        };
        if live == full_mask(n) {
            // The usual case: nothing dropped, no per-packet live test.
            self.meta[..n].iter_mut().for_each(&mut visit);
        } else {
            for (i, m) in self.meta[..n].iter_mut().enumerate() {
                if (live >> i) & 1 != 0 {
                    visit(m);
                }
            }
        }
        all_forward
    }

    /// Forwards the live packets of `mask` on `port`, keeping each one's
    /// traffic class: [`forward_all`](Self::forward_all) for part of a
    /// burst, and when `mask` holds every live packet the batch knows their
    /// common egress as it does after `forward_all` (so the runtime sends
    /// the burst whole without a scan of the verdicts).
    pub fn forward_some(&mut self, mask: u32, port: u16) {
        let mask = mask & self.live;
        if mask == self.live {
            self.forward_all(port);
            return;
        }
        for i in Indices(mask) {
            if let Verdict::Forward { port: p, .. } = &mut self.meta[i].verdict {
                *p = port;
            }
        }
        if mask != 0 && !self.egress.is_port(port) {
            self.egress = EgressHint::NONE;
        }
    }

    /// Forwards the live packets of `mask` on `port` in traffic class
    /// `class`: [`forward`](Self::forward) for each of them in one step.
    /// When `mask` holds every live packet the batch knows their common
    /// egress, as after [`forward_all`](Self::forward_all), so the runtime
    /// sends the burst whole (per-packet `forward` calls leave it to scan
    /// the verdicts).
    pub fn forward_some_in(&mut self, mask: u32, port: u16, class: Class) {
        let mask = mask & self.live;
        let v = Verdict::Forward { port, class };
        if mask == full_mask(self.bufs.len()) {
            // The usual case: the whole burst, no per-packet bit test.
            self.set_every_verdict(v);
        } else {
            for i in Indices(mask) {
                self.meta[i].verdict = v;
            }
        }
        if mask == self.live {
            self.egress = EgressHint::of(port, Some(class));
        } else if mask != 0 {
            self.egress = self.egress.after_forward(port, class);
        }
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
        self.forget_hints();
        &mut self.meta[i]
    }

    /// Buffer and metadata of packet `i` together, both mutable.
    pub fn get_mut(&mut self, i: usize) -> (&mut B, &mut Meta) {
        self.forget_hints();
        (&mut self.bufs[i], &mut self.meta[i])
    }

    /// The buffer of packet `i`, mutable, with its metadata read-only:
    /// unlike [`get_mut`](Self::get_mut) this keeps the port hints, so a
    /// stage that rewrites packet bytes (marking, header updates) and sets
    /// verdicts only through [`forward`](Self::forward) /
    /// [`drop_packet`](Self::drop_packet) leaves the runtime its
    /// whole-burst TX path (otherwise it scans the verdicts once per burst).
    pub fn buf_mut_meta(&mut self, i: usize) -> (&mut B, &Meta) {
        (&mut self.bufs[i], &self.meta[i])
    }

    /// The buffers of all packets (live or not), mutable, with the metadata
    /// read-only, both in index order: for a stage that holds on to bytes
    /// of several packets at once (marks written after one MAC batch over
    /// the burst). Like [`buf_mut_meta`](Self::buf_mut_meta) it keeps the
    /// port hints.
    pub fn bufs_mut_metas(&mut self) -> (&mut [B], &[Meta]) {
        let n = self.bufs.len();
        (&mut self.bufs, &self.meta[..n])
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
        self.egress.forward_one(port);
    }

    /// Sets the traffic class of a forwarded packet `i`, keeping its port.
    pub fn set_class(&mut self, i: usize, class: Class) {
        if let Verdict::Forward { port, .. } = self.meta[i].verdict {
            self.meta[i].verdict = Verdict::Forward { port, class };
            // (Tested first: after the first packet the class is unknown.)
            if self.egress.class().is_some() {
                self.egress = self.egress.without_class();
            }
        }
    }

    /// Sets the traffic class of every live forwarded packet, keeping its
    /// port ([`set_class`](Self::set_class) for the whole burst).
    #[inline]
    pub fn class_all(&mut self, class: Class) {
        match self.egress.port() {
            // Every packet live and known to be forwarded on `port`: one
            // store of the same verdict each, no test of the old one.
            Some(port) if self.live == full_mask(self.bufs.len()) => {
                self.set_every_verdict(Verdict::Forward { port, class });
            }
            _ => {
                self.each_live_forward(|_, c| *c = class);
            }
        }
        // With a common egress every live packet is a forward, now in `class`.
        if let Some(port) = self.egress.port() {
            self.egress = EgressHint::of(port, Some(class));
        }
    }

    /// The metadata of all packets (live or not), in index order.
    pub fn metas(&self) -> &[Meta] {
        &self.meta[..self.bufs.len()]
    }

    /// The metadata of all packets, mutable (a stage that rewrites every
    /// packet's verdict can walk this slice instead of [`live`](Self::live)
    /// when [`all_live`](Self::all_live) holds).
    pub fn metas_mut(&mut self) -> &mut [Meta] {
        self.forget_hints();
        let n = self.bufs.len();
        &mut self.meta[..n]
    }

    /// The buffers of all packets, in index order.
    pub fn bufs(&self) -> &[B] {
        &self.bufs
    }

    /// Whether every packet in the batch is still live (none dropped or
    /// handed to control).
    pub fn all_live(&self) -> bool {
        self.live == full_mask(self.bufs.len())
    }

    /// Appends packets that arrived on `port` in one step: `fill` receives
    /// the buffer vector and appends to it (at most up to [`BURST`] buffers in
    /// total; it must not remove any). The new packets get fresh metadata
    /// ([`Meta::new`]) in one pass and become live; returns their index range.
    ///
    /// This is the zero-copy receive path: an I/O backend can let its driver
    /// write buffer handles straight into the vector's spare capacity (at
    /// least [`BURST`] is reserved), instead of pushing packet by packet.
    /// Buffers beyond [`BURST`] are dropped (a contract violation by `fill`).
    pub fn extend_with(&mut self, port: u16, fill: impl FnOnce(&mut Vec<B>)) -> Range<usize> {
        let start = self.bufs.len();
        fill(&mut self.bufs);
        debug_assert!(self.bufs.len() >= start, "extend_with: fill removed buffers");
        debug_assert!(self.bufs.len() <= BURST, "extend_with: more than BURST buffers");
        self.bufs.truncate(BURST);
        let end = self.bufs.len();
        let start = start.min(end);
        if start < end {
            if end - start == BURST {
                // A full burst into an empty batch, the usual case under
                // load: every packet is new and live, all from `port`.
                match port {
                    0 => fill_fresh::<0>(&mut self.meta),
                    1 => fill_fresh::<1>(&mut self.meta),
                    2 => fill_fresh::<2>(&mut self.meta),
                    3 => fill_fresh::<3>(&mut self.meta),
                    _ => fill_fresh_any(&mut self.meta, port),
                }
                self.live = full_mask(BURST);
                self.note_added(true, port);
            } else {
                // Copied as one 20-byte value (two stores per packet):
                // filled from the constant, the compiler wrote it field by
                // field (five).
                self.meta[start..end].fill(core::hint::black_box(Meta::new(port)));
                self.live |= full_mask(end) & !full_mask(start);
                self.note_added(start == 0, port);
            }
        }
        start..end
    }

    /// Empties the batch in one step: `f` receives the buffer vector and the
    /// metadata of every packet (same order) and may move any buffers out
    /// (e.g. hand the whole vector to a TX burst when every packet goes to
    /// the same port, or partition it by verdict); whatever `f` leaves in
    /// the vector is dropped afterwards.
    pub fn drain_with(&mut self, f: impl FnOnce(&mut Vec<B>, &[Meta])) {
        let n = self.bufs.len();
        f(&mut self.bufs, &self.meta[..n]);
        self.bufs.clear();
        self.live = 0;
        self.forget_hints();
    }

    /// Empties the batch, handing each buffer and its metadata to `f`
    /// (the runtime transmits forwarded packets and recycles the rest).
    pub fn drain(&mut self, mut f: impl FnMut(B, Meta)) {
        for (i, b) in self.bufs.drain(..).enumerate() {
            f(b, self.meta[i]);
        }
        self.live = 0;
        self.forget_hints();
    }

    /// Removes all packets, dropping the buffers.
    pub fn clear(&mut self) {
        self.bufs.clear();
        self.live = 0;
        self.forget_hints();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_masks_have_the_lowest_n_bits() {
        for n in 0..=BURST {
            let want = (0..n).fold(0u32, |m, i| m | 1 << i);
            assert_eq!(full_mask(n), want, "n = {n}");
        }
    }

    #[test]
    fn a_common_hint_is_that_of_every_live_packet() {
        let scion = ScionHint::checked(PathType::SCION.0, 17);
        let hp = ScionHint::checked(PathType::EPIC_HP.0, 17);
        let mut b: Batch<Vec<u8>> = Batch::new();
        assert_eq!(b.common_scion_hint(), None, "no packets");
        b.push(vec![0], 0).unwrap();
        b.push(vec![1], 0).unwrap();
        // Fresh packets carry no hint.
        assert_eq!(b.common_scion_hint(), None);
        // Hints written through meta_mut count at the next question.
        b.meta_mut(0).scion = scion;
        b.meta_mut(1).scion = hp;
        assert_eq!(b.common_scion_hint(), None);
        // A drop keeps the answer until the metadata changes.
        b.drop_packet(1, DropReason::Malformed);
        assert_eq!(b.common_scion_hint(), None);
        b.meta_mut(0);
        assert_eq!(b.common_scion_hint(), Some(scion));
        // Another NextHdr is another hint.
        b.meta_mut(1).scion = ScionHint::checked(PathType::SCION.0, 6);
        b.push(vec![2], 0).unwrap();
        b.meta_mut(2).scion = scion;
        assert_eq!(b.common_scion_hint(), Some(scion), "packet 1 is not live");
        b.meta_mut(0).scion = ScionHint::UNCHECKED;
        assert_eq!(b.common_scion_hint(), None);
        // An added packet counts.
        b.meta_mut(0).scion = scion;
        assert_eq!(b.common_scion_hint(), Some(scion));
        b.push(vec![3], 0).unwrap();
        assert_eq!(b.common_scion_hint(), None);
    }

    #[test]
    fn class_all_sets_the_class_of_live_forwarded_packets() {
        let mut b: Batch<Vec<u8>> = Batch::new();
        for k in 0..3u8 {
            b.push(vec![k], 0).unwrap();
        }
        b.forward(0, 4, Class(1));
        b.drop_packet(1, DropReason::Malformed);
        b.class_all(Class(5));
        assert_eq!(b.meta(0).verdict, Verdict::Forward { port: 4, class: Class(5) });
        assert_eq!(b.meta(1).verdict, Verdict::Drop(DropReason::Malformed));
        assert_eq!(b.meta(2).verdict, Verdict::Forward { port: 0, class: Class(5) });
    }

    #[test]
    fn class_all_with_a_common_egress_classes_every_packet() {
        for n in [1, 7, BURST] {
            let mut b: Batch<Vec<u8>> = Batch::new();
            b.extend_with(2, |v| v.extend((0..n).map(|k| vec![k as u8])));
            b.forward_all(3);
            b.class_all(Class(4));
            for i in 0..n {
                assert_eq!(b.meta(i).verdict, Verdict::Forward { port: 3, class: Class(4) });
            }
            assert_eq!(b.egress_port(), Some(3), "n = {n}");
            // A drop leaves the common egress of the live packets; the
            // dropped packet keeps its verdict.
            b.drop_packet(0, DropReason::Policy);
            b.class_all(Class(1));
            assert_eq!(b.meta(0).verdict, Verdict::Drop(DropReason::Policy));
            for i in 1..n {
                assert_eq!(b.meta(i).verdict, Verdict::Forward { port: 3, class: Class(1) });
            }
        }
    }

    #[test]
    fn layers_are_known_unparsed_until_a_stage_may_have_recorded_some() {
        let mut b: Batch<Vec<u8>> = Batch::new();
        assert!(b.layers_unparsed(), "an empty batch");
        b.extend_with(0, |v| v.extend((0..BURST).map(|k| vec![k as u8])));
        assert!(b.layers_unparsed());
        // Verdicts, hashes and drops leave the layers alone.
        b.set_hash(0, 7);
        b.forward(1, 3, Class(2));
        b.drop_packet(2, DropReason::Policy);
        b.class_all(Class(1));
        assert!(b.layers_unparsed());
        let _ = b.bufs_mut_metas();
        assert!(b.layers_unparsed());
        b.meta_mut(0).l3 = L3::Ipv4;
        assert!(!b.layers_unparsed());
        // Packets added to a batch that is not empty keep the answer.
        b.drain_with(|_, _| {});
        b.push(vec![0], 1).unwrap();
        assert!(b.layers_unparsed(), "fresh packets only");
        let _ = b.metas_mut();
        b.push(vec![1], 1).unwrap();
        assert!(!b.layers_unparsed(), "packet 0's metadata was handed out");
        b.clear();
        b.push(vec![0], 1).unwrap();
        let _ = b.get_mut(0);
        assert!(!b.layers_unparsed());
        // The parser records layers through its own accessor.
        b.clear();
        b.push(vec![0], 1).unwrap();
        b.note_layers_recorded();
        b.meta_mut_keep_hints(0).l3_off = 14;
        assert!(!b.layers_unparsed());
    }

    #[test]
    fn forwarding_part_of_a_burst_keeps_classes_and_knows_a_common_egress() {
        let mut b: Batch<Vec<u8>> = Batch::new();
        for k in 0..4u8 {
            b.push(vec![k], 0).unwrap();
        }
        b.set_class(1, Class(3));
        b.drop_packet(3, DropReason::Malformed);
        b.forward_some(0b0011, 1);
        let port_class = |b: &Batch<Vec<u8>>, i| match b.meta(i).verdict {
            Verdict::Forward { port, class } => Some((port, class.0)),
            _ => None,
        };
        assert_eq!(port_class(&b, 0), Some((1, 0)));
        assert_eq!(port_class(&b, 1), Some((1, 3)));
        assert_eq!(port_class(&b, 2), Some((0, 0)));
        assert_eq!(port_class(&b, 3), None, "a dropped packet stays dropped");
        assert_eq!(b.egress_port(), None, "packet 2 still goes to port 0");
        // Every live packet: the common egress is known.
        b.forward_some(0b0100 | 0b1000, 1);
        assert_eq!(port_class(&b, 2), Some((1, 0)));
        assert_eq!(port_class(&b, 3), None);
        b.forward_some(0b0111, 1);
        assert_eq!(b.egress_port(), Some(1));
    }

    #[test]
    fn forwarding_part_of_a_burst_in_a_class_is_forward_per_packet() {
        let five = || {
            let mut b: Batch<Vec<u8>> = Batch::new();
            for k in 0..5u8 {
                b.push(vec![k], 0).unwrap();
            }
            b.set_class(1, Class(3));
            b.drop_packet(4, DropReason::Malformed);
            b
        };
        let (mut b, mut each) = (five(), five());
        b.forward_some_in(0b1_0011, 2, Class(5));
        for i in [0, 1] {
            each.forward(i, 2, Class(5));
        }
        assert_eq!(b.metas(), each.metas(), "as forward, packet by packet");
        assert_eq!(b.egress_port(), None, "packet 2 and 3 still go to port 0");
        // Every live packet (a full burst or not): the common egress.
        b.forward_some_in(0b1_1111, 2, Class(5));
        assert_eq!(b.egress_port(), Some(2));
        // Part of them on the same port keeps it, on another drops it.
        b.forward_some_in(0b0001, 2, Class(5));
        assert_eq!(b.egress_port(), Some(2));
        b.forward_some_in(0b0001, 1, Class(5));
        assert_eq!(b.egress_port(), None);
        assert_eq!(b.metas()[4].verdict, Verdict::Drop(DropReason::Malformed));
        let mut full: Batch<Vec<u8>> = Batch::new();
        for k in 0..BURST {
            full.push(vec![k as u8], 0).unwrap();
        }
        full.forward_some_in(u32::MAX, 1, Class(2));
        assert_eq!(full.egress_port(), Some(1));
        assert!(full
            .metas()
            .iter()
            .all(|m| m.verdict == Verdict::Forward { port: 1, class: Class(2) }));
    }

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

    #[test]
    fn extend_with_initialises_meta_and_live_bits() {
        let mut b: Batch<Vec<u8>> = Batch::new();
        b.push(vec![9], 3).unwrap();
        b.meta_mut(0).hash = 77;
        b.drop_packet(0, DropReason::Policy);
        // Stale metadata in the slots about to be reused must be overwritten.
        b.meta_mut(1).hash = 5;
        let r = b.extend_with(4, |v| v.extend((0..3u8).map(|i| vec![i])));
        assert_eq!(r, 1..4);
        assert_eq!(b.len(), 4);
        assert_eq!(b.live_mask(), 0b1110);
        assert!(!b.all_live());
        assert_eq!(b.meta(0).hash, 77);
        for i in 1..4 {
            assert_eq!(*b.meta(i), Meta::new(4));
            assert_eq!(b.data(i), &[i as u8 - 1]);
        }
        assert_eq!(b.metas().len(), 4);
        assert_eq!(b.bufs().len(), 4);
        // Filling to the brim sets every bit, including bit 31.
        let r = b.extend_with(5, |v| v.extend((0..BURST - 4).map(|_| vec![0])));
        assert_eq!(r, 4..BURST);
        assert_eq!(b.live_mask(), !1u32);
        // A full batch takes nothing more.
        assert_eq!(b.extend_with(5, |_| {}), BURST..BURST);
        for m in b.metas_mut() {
            m.port = 1;
        }
        assert!(b.metas().iter().all(|m| m.port == 1));
        // A whole burst at once into an emptied batch (the full-burst fill):
        // every record is fresh, whatever the previous burst left.
        for m in b.metas_mut() {
            *m = Meta { hash: 9, l3_off: 3, proto: Proto::Fair, ..Meta::new(2) };
            m.verdict = Verdict::Drop(DropReason::Policy);
        }
        b.clear();
        let r = b.extend_with(6, |v| v.extend((0..BURST as u8).map(|i| vec![i])));
        assert_eq!(r, 0..BURST);
        assert!(b.all_live());
        assert!(b.metas().iter().all(|m| *m == Meta::new(6)));
        assert_eq!((b.ingress_port(), b.egress_port()), (Some(6), Some(6)));
    }

    #[test]
    fn a_full_burst_gets_fresh_metadata_from_any_port() {
        // The ports with a constant fill and some without, each over
        // records another burst left changed.
        let mut b: Batch<Vec<u8>> = Batch::new();
        for port in [0u16, 1, 2, 3, 4, 5, 7, 255, 256, u16::MAX, 3, 0] {
            for m in b.metas_mut() {
                *m = Meta { hash: 9, l3_off: 3, proto: Proto::Fair, ..Meta::new(port ^ 1) };
                m.verdict = Verdict::Drop(DropReason::Policy);
                m.scion = ScionHint::checked(1, 17);
            }
            b.clear();
            assert_eq!(b.extend_with(port, |v| v.extend((0..BURST).map(|_| vec![0]))), 0..BURST);
            assert_eq!(b.metas(), &[Meta::new(port); BURST][..], "port {port}");
            assert!(b.all_live());
            assert_eq!((b.ingress_port(), b.egress_port()), (Some(port), Some(port)));
        }
    }

    #[test]
    fn port_hints_are_kept_or_forgotten_conservatively() {
        let mut b: Batch<Vec<u8>> = Batch::new();
        assert_eq!((b.ingress_port(), b.egress_port()), (None, None));
        b.extend_with(3, |v| v.extend((0..4u8).map(|i| vec![i])));
        assert_eq!((b.ingress_port(), b.egress_port()), (Some(3), Some(3)));
        b.set_hash(1, 9);
        assert_eq!((b.meta(1).hash, b.ingress_port()), (9, Some(3)));
        // Same-port forwards keep the egress hint, another port clears it.
        b.forward(0, 3, Class(1));
        assert_eq!(b.egress_port(), Some(3));
        b.forward(1, 5, Class(1));
        assert_eq!(b.egress_port(), None);
        b.drop_packet(2, DropReason::Policy);
        b.forward_all(7);
        assert_eq!(b.egress_port(), Some(7));
        // Live packets go to 7 keeping their class; the dropped one is untouched.
        assert_eq!(b.meta(0).verdict, Verdict::Forward { port: 7, class: Class(1) });
        assert_eq!(b.meta(1).verdict, Verdict::Forward { port: 7, class: Class(1) });
        assert_eq!(b.meta(3).verdict, Verdict::Forward { port: 7, class: Class(0) });
        assert_eq!(b.meta(2).verdict, Verdict::Drop(DropReason::Policy));
        // Packets from another port clear the ingress hint.
        b.push(vec![9], 4).unwrap();
        assert_eq!((b.ingress_port(), b.egress_port()), (None, None));
        b.clear();
        b.push(vec![1], 2).unwrap();
        assert_eq!((b.ingress_port(), b.egress_port()), (Some(2), Some(2)));
        // Rewriting bytes with read-only metadata keeps both hints.
        let (buf, meta) = b.buf_mut_meta(0);
        buf[0] = 7;
        assert_eq!(meta.port, 2);
        assert_eq!((b.ingress_port(), b.egress_port(), b.data(0)), (Some(2), Some(2), &[7u8][..]));
        // So does rewriting every packet's bytes at once, each beside its metadata.
        b.push(vec![5], 2).unwrap();
        let (bufs, metas) = b.bufs_mut_metas();
        assert_eq!((bufs.len(), metas.len()), (2, 2));
        for (buf, meta) in bufs.iter_mut().zip(metas) {
            buf[0] += meta.port as u8;
        }
        assert_eq!((b.data(0), b.data(1)), (&[9u8][..], &[7u8][..]));
        assert_eq!((b.ingress_port(), b.egress_port()), (Some(2), Some(2)));
        // Mutable metadata may change anything: both hints are forgotten.
        b.meta_mut(0).verdict = Verdict::ToControl;
        assert_eq!((b.ingress_port(), b.egress_port()), (None, None));
        b.clear();
        b.push(vec![1], 2).unwrap();
        let _ = b.get_mut(0);
        assert_eq!(b.ingress_port(), None);
        b.clear();
        b.push(vec![1], 2).unwrap();
        let _ = b.metas_mut();
        assert_eq!(b.egress_port(), None);
        // A live packet with a hand-set non-forward verdict: no common egress.
        b.clear();
        b.push(vec![1], 2).unwrap();
        b.push(vec![2], 2).unwrap();
        b.meta_mut(1).verdict = Verdict::ToControl;
        b.forward_all(6);
        assert_eq!(b.egress_port(), None);
        assert_eq!(b.meta(0).verdict, Verdict::Forward { port: 6, class: Class(0) });
        assert_eq!(b.meta(1).verdict, Verdict::ToControl);
        b.drain_with(|_, _| {});
        assert_eq!((b.ingress_port(), b.egress_port(), b.len()), (None, None, 0));
    }

    #[test]
    fn all_live_and_drain_with() {
        let mut b: Batch<Vec<u8>> = Batch::new();
        assert!(b.all_live());
        b.extend_with(2, |v| v.extend((0..5u8).map(|i| vec![i])));
        assert!(b.all_live());
        b.drop_packet(3, DropReason::BadMac);
        let mut seen = Vec::new();
        b.drain_with(|bufs, metas| {
            assert_eq!(bufs.len(), metas.len());
            // Take only the live ones out; the rest is dropped by the batch.
            for (k, m) in metas.iter().enumerate().rev() {
                if m.class().is_some() {
                    seen.push(bufs.swap_remove(k)[0]);
                }
            }
        });
        seen.sort();
        assert_eq!(seen, [0, 1, 2, 4]);
        assert_eq!((b.len(), b.live_mask()), (0, 0));
        b.extend_with(0, |v| v.push(vec![1]));
        assert_eq!(b.live_mask(), 1);
    }

    #[test]
    fn an_egress_hint_keeps_any_port_and_class() {
        assert_eq!((EgressHint::NONE.port(), EgressHint::NONE.class()), (None, None));
        for port in [0, 1, 0x1234, u16::MAX] {
            for class in [None, Some(Class(0)), Some(Class(7)), Some(Class(u8::MAX))] {
                let h = EgressHint::of(port, class);
                assert_eq!((h.port(), h.class()), (Some(port), class));
                assert!(h.is_port(port) && !h.is_port(port ^ 1));
                assert_eq!(
                    (h.without_class().port(), h.without_class().class()),
                    (Some(port), None)
                );
            }
        }
        let h = EgressHint::of(3, Some(Class(2)));
        assert_eq!(h.after_forward(3, Class(2)), h);
        assert_eq!(h.after_forward(3, Class(1)), EgressHint::of(3, None));
        assert_eq!(h.after_forward(4, Class(2)), EgressHint::NONE);
        assert_eq!(EgressHint::NONE.after_forward(3, Class(2)), EgressHint::NONE);
        let after_one = |mut h: EgressHint, port| {
            h.forward_one(port);
            h
        };
        assert_eq!(after_one(h, 3), EgressHint::of(3, None));
        assert_eq!(after_one(h, 4), EgressHint::NONE);
        assert_eq!(after_one(EgressHint::NONE, 0), EgressHint::NONE);
    }

    /// One step a stage (or the runtime) takes on a batch.
    #[derive(Clone, Debug)]
    enum Op {
        Extend(u16, usize),
        Drop(usize),
        ToControl(usize),
        Forward(usize, u16, u8),
        SetClass(usize, u8),
        ClassAll(u8),
        ForwardAll(u16),
        ForwardSome(u32, u16),
        ForwardSomeIn(u32, u16, u8),
        Clear,
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        // Few ports and classes, so that hints are often kept.
        prop_oneof![
            (0..3u16, 1..=BURST).prop_map(|(p, n)| Op::Extend(p, n)),
            (0..BURST).prop_map(Op::Drop),
            (0..BURST).prop_map(Op::ToControl),
            (0..BURST, 0..3u16, 0..2u8).prop_map(|(i, p, c)| Op::Forward(i, p, c)),
            (0..BURST, 0..2u8).prop_map(|(i, c)| Op::SetClass(i, c)),
            (0..2u8).prop_map(Op::ClassAll),
            (0..3u16).prop_map(Op::ForwardAll),
            (any::<u32>(), 0..3u16).prop_map(|(m, p)| Op::ForwardSome(m, p)),
            (any::<u32>(), 0..3u16, 0..2u8).prop_map(|(m, p, c)| Op::ForwardSomeIn(m, p, c)),
            Just(Op::Clear),
        ]
    }

    fn apply(b: &mut Batch<Vec<u8>>, op: &Op) {
        let n = b.len();
        match *op {
            Op::Extend(p, k) => {
                b.extend_with(p, |v| v.extend((0..k.min(BURST - n)).map(|_| vec![0])));
            }
            Op::Drop(i) if i < n => b.drop_packet(i, DropReason::Policy),
            Op::ToControl(i) if i < n => b.to_control(i),
            Op::Forward(i, p, c) if i < n => b.forward(i, p, Class(c)),
            Op::SetClass(i, c) if i < n => b.set_class(i, Class(c)),
            Op::ClassAll(c) => b.class_all(Class(c)),
            Op::ForwardAll(p) => b.forward_all(p),
            Op::ForwardSome(m, p) => b.forward_some(m, p),
            Op::ForwardSomeIn(m, p, c) => b.forward_some_in(m, p, Class(c)),
            Op::Clear => b.clear(),
            _ => {}
        }
    }

    proptest::proptest! {
        /// The port and class hints only ever spare work: any sequence of
        /// steps gives the verdicts it gives with every hint forgotten
        /// before each step, and what the hints claim holds of every live
        /// packet.
        #[test]
        fn hints_never_change_a_verdict(ops in proptest::collection::vec(op(), 1..60)) {
            let (mut b, mut plain) = (Batch::<Vec<u8>>::new(), Batch::<Vec<u8>>::new());
            for op in &ops {
                apply(&mut b, op);
                let _ = plain.metas_mut();
                apply(&mut plain, op);
                proptest::prop_assert_eq!(b.metas(), plain.metas(), "after {:?}", op);
                proptest::prop_assert_eq!(b.live_mask(), plain.live_mask());
                if b.egress.class().is_some() {
                    proptest::prop_assert!(b.egress.port().is_some(), "a class without a port");
                }
                if let Some(port) = b.egress_port() {
                    for i in b.live() {
                        let want_class = b.egress.class().unwrap_or(b.meta(i).class().unwrap_or_default());
                        proptest::prop_assert_eq!(
                            b.meta(i).verdict,
                            Verdict::Forward { port, class: want_class },
                            "packet {} after {:?}", i, op
                        );
                    }
                }
            }
        }
    }
}
