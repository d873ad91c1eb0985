//! The header writes of the source's burst path: reading a stampable IP
//! header once, moving it to the front by register copies, storing the FAIR
//! header behind it and patching the IP header's length, protocol (and
//! IPv4 checksum).

use pipeline::{Meta, L3, NO_OFFSET};

use crate::common::Codes;
use crate::lpm::{key_v4, key_v6};

/// What the burst path reads from an IP header it can stamp (scalars, so
/// the header is read once from the frame and never staged on the stack).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Plain {
    /// FIB key of the destination.
    pub(super) key: u128,
    /// The destination as it lies in memory (IPv6; the run loop compares
    /// it without byte swaps).
    pub(super) dst_ne: u128,
    /// IPv6 Payload Length or IPv4 Total Length.
    pub(super) len_field: u16,
    /// The protocol byte the FAIR header takes over (Next Header / Protocol).
    pub(super) old_nh: u8,
}

/// The common IPv6 packet: Next Header names an upper layer directly (no
/// extension header walk), not a jumbogram, the payload within the buffer
/// (what `wire::insert` checks).
#[inline(always)]
pub(super) fn plain_v6(ip: &[u8], code: u8) -> Option<Plain> {
    let h = ip.first_chunk::<40>()?;
    let pl = u16::from_be_bytes([h[4], h[5]]);
    let ok = matches!(h[6], 6 | 17 | 58 | 59) && h[6] != code && pl != 0;
    let d = h.last_chunk::<16>()?;
    (ok && 40 + pl as usize <= ip.len()).then(|| Plain {
        key: key_v6(*d),
        dst_ne: u128::from_ne_bytes(*d),
        len_field: pl,
        old_nh: h[6],
    })
}

/// The common IPv4 packet: no options, not FAIR, Total Length within the
/// buffer and at least the header (what `wire::insert` checks).
#[inline(always)]
pub(super) fn plain_v4(ip: &[u8], code: u8) -> Option<Plain> {
    let h = ip.first_chunk::<20>()?;
    let tl = u16::from_be_bytes([h[2], h[3]]);
    let ok = h[0] & 0x0F == 5 && h[9] != code && tl >= 20 && tl as usize <= ip.len();
    ok.then(|| Plain {
        key: key_v4([h[16], h[17], h[18], h[19]]),
        dst_ne: 0,
        len_field: tl,
        old_nh: h[9],
    })
}

/// Moves `d[from..from + N]` to `d[..N]` for `16 <= N <= 64` with four
/// (possibly overlapping) 16-byte loads at constant offsets, then four
/// stores: register moves after one bounds check, no `memmove` call and no
/// staging copy on the stack. Callers check the bounds.
#[inline(always)]
fn move_front<const N: usize>(d: &mut [u8], from: usize) {
    const { assert!(N >= 16 && N <= 64) };
    let (o1, o2, o3) =
        (if N >= 32 { 16 } else { N - 16 }, if N >= 48 { 32 } else { N - 16 }, N - 16);
    let Some(s) = d.get(from..).and_then(|s| s.first_chunk::<N>()) else { return };
    let ld = |o: usize| u128::from_ne_bytes(s[o..o + 16].try_into().unwrap_or([0; 16]));
    let (a, b, c, e) = (ld(0), ld(o1), ld(o2), ld(o3));
    let Some(t) = d.first_chunk_mut::<N>() else { return };
    t[..16].copy_from_slice(&a.to_ne_bytes());
    t[o1..o1 + 16].copy_from_slice(&b.to_ne_bytes());
    t[o2..o2 + 16].copy_from_slice(&c.to_ne_bytes());
    t[o3..o3 + 16].copy_from_slice(&e.to_ne_bytes());
}

/// The first 8 bytes of the FAIR header as the source writes them before
/// pass 3 (original next header, length code, timestamp; sequence number and
/// ICV zero), big-endian in a register: built with shifts, not byte stores
/// to a stack array that a wide load would then have to wait for.
#[inline(always)]
pub(super) fn fair_head(old_nh: u8, hdr_len: u8, ts: u16) -> u64 {
    (old_nh as u64) << 56 | (hdr_len as u64) << 48 | (ts as u64) << 32
}

/// Writes a frame whose first `fair_len` (≥ 8) bytes were just prepended:
/// moves the `at` bytes up to the end of the IP header to the front (by
/// register moves for bare IP and behind Ethernet with or without VLAN tag),
/// then stores the FAIR header behind them: `head` (see [`fair_head`]), then
/// zeros (NextAS and slots). `false` if the frame is too short (it is not,
/// after the parse checks).
#[inline(always)]
pub(super) fn write_front(d: &mut [u8], at: usize, head: u64, fair_len: usize) -> bool {
    // The common layouts with every offset constant (one bounds check).
    match (at, fair_len) {
        (40, 16) => return write_front_fixed::<40, 56>(d, head),
        (54, 16) => return write_front_fixed::<54, 70>(d, head),
        _ => {}
    }
    if d.len() < at + fair_len || fair_len < 8 {
        return false;
    }
    match at {
        40 => move_front::<40>(d, fair_len),
        20 => move_front::<20>(d, fair_len),
        54 => move_front::<54>(d, fair_len),
        34 => move_front::<34>(d, fair_len),
        58 => move_front::<58>(d, fair_len),
        38 => move_front::<38>(d, fair_len),
        _ => d.copy_within(fair_len..fair_len + at, 0),
    }
    let (h8, zeros) = d[at..at + fair_len].split_at_mut(8);
    h8.copy_from_slice(&head.to_be_bytes());
    match zeros.len() {
        8 => zeros.copy_from_slice(&[0; 8]),
        16 => zeros.copy_from_slice(&[0; 16]),
        _ => zeros.fill(0),
    }
    true
}

/// [`write_front`] for `at = AT` and a 16-byte FAIR header (`END = AT + 16`).
#[inline(always)]
pub(super) fn write_front_fixed<const AT: usize, const END: usize>(
    d: &mut [u8],
    head: u64,
) -> bool {
    const { assert!(END == AT + 16) };
    let Some(w) = d.first_chunk_mut::<END>() else { return false };
    move_front::<AT>(w, 16);
    w[AT..AT + 8].copy_from_slice(&head.to_be_bytes());
    w[AT + 8..].copy_from_slice(&[0; 8]);
    true
}

/// The metadata after insertion (as `set_meta` and the L4 shift of the per-packet path).
#[inline(always)]
pub(super) fn update_meta(meta: &mut Meta, l3_off: usize, l3: L3, at: usize, fair_len: usize) {
    if meta.l4_off != NO_OFFSET {
        meta.l4_off += fair_len as u16;
    }
    meta.l3_off = l3_off as u16;
    meta.l3 = l3;
    meta.proto = pipeline::Proto::Fair;
    meta.proto_off = at as u16;
}

/// Patches the moved IP header `ip` (its fixed header: 40 or 20 bytes) for
/// an inserted FAIR header: the length field (`new_len`), the protocol
/// byte, and for IPv4 DF and the checksum.
#[inline(always)]
pub(super) fn patch_ip(ip: &mut [u8], v6: bool, new_len: u16, codes: Codes) {
    if v6 {
        ip[4..6].copy_from_slice(&new_len.to_be_bytes());
        ip[6] = codes.v6;
    } else {
        // IPv4 (not the common carrier): the checksum over the moved
        // header, as `Ipv4::set_flags_offset` + `fill_checksum` leave it.
        let code = codes.v4;
        let w = |k: usize| u16::from_be_bytes([ip[2 * k], ip[2 * k + 1]]);
        let flags = (w(3) & 0x3FFF) | 0x4000; // DF; MF and offset kept, reserved bit cleared
        let sum =
            [w(0), new_len, w(2), flags, (ip[8] as u16) << 8 | code as u16, w(6), w(7), w(8), w(9)]
                .iter()
                .map(|x| *x as u64)
                .sum::<u64>();
        ip[2..4].copy_from_slice(&new_len.to_be_bytes());
        ip[6..8].copy_from_slice(&flags.to_be_bytes());
        ip[9] = code;
        ip[10..12].copy_from_slice(&(!packet::checksum::fold(sum)).to_be_bytes());
    }
}
