//! Packets, bursts and stages shared by the `fair` bench and the
//! `fair_profile` example (included into both with `#[path]`, so the two
//! always measure the same workloads and the same harness around them).

use std::sync::atomic::AtomicU32;
use std::sync::Arc;

use fair::common::Framing;
use fair::crypto::MarkBinding;
use fair::dest::{DestChannel, DestConfig, FairDestination};
use fair::keys::{KeyRing, TestKeySource, T_M};
use fair::record::RecordRing;
use fair::rng::Xoshiro;
use fair::source::{FairSource, SourceChannel, SourceConfig};
use fair::transit::{FairTransit, TransitConfig};
use mac::Key;
use pipeline::{Batch, Frame, Meta, Now, PacketBuf, Stage, BURST};

/// The clock every workload starts at (Unix seconds).
pub const T0: u64 = 1_700_000_000;

/// A shaper rate and burst no workload runs dry.
const BIG: u64 = u64::MAX / 4_000_000_000;

/// [`T0`] as the stages' clock.
pub fn now() -> Now {
    Now::from_unix_ns(T0 * 1_000_000_000)
}

/// IPv6/UDP 2001:db8:: → 2001:db9::2, 14 B payload → 74-byte frame once a
/// 16-byte FAIR EH is in (no Ethernet here: 60 + 16 = 76 B network layer).
pub fn plain_v6() -> Vec<u8> {
    let mut p = vec![0u8; 60];
    p[0] = 0x60;
    p[4..6].copy_from_slice(&20u16.to_be_bytes());
    p[6] = 17;
    p[7] = 64;
    p[8..12].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
    p[24..28].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb9]);
    p[39] = 2;
    p
}

/// A source with one channel for 2001:db9::/32 (to AS 2, key `[7; 16]`, one
/// cooperating AS, a shaper that never runs dry).
pub fn source() -> FairSource {
    let mut s = FairSource::new(SourceConfig { framing: Framing::Ip, ..Default::default() });
    let seq = Arc::new(AtomicU32::new(0));
    let ch = SourceChannel::new(0, 2, &Key::from([7; 16]), 1, BIG, BIG, 0, seq);
    let i = s.add_channel(ch);
    s.route("2001:db9::".parse().unwrap(), 32, i);
    s
}

/// [`plain_v6`] as `s` stamps it at `now`: what transit and destination see.
pub fn stamped_v6(s: &mut FairSource, now: Now) -> Vec<u8> {
    let mut b: Batch<Vec<u8>> = Batch::new();
    b.push(plain_v6(), 0).unwrap();
    s.process(&mut b, now);
    b.data(0).to_vec()
}

/// The data keys of a transit AS: 60-second epochs covering [`T0`] … T0 + 200 s.
pub fn data_ring() -> Arc<KeyRing> {
    let mut r = KeyRing::data(60, T_M).unwrap();
    let mut ks = TestKeySource::new(1);
    // Keys for the first 200 s (the protest benchmark's records span 100 s).
    r.rotate(T0, 200, MarkBinding::Paper, || ks.next_key());
    Arc::new(r)
}

/// A transit stage marking with [`data_ring`]'s keys.
pub fn transit() -> FairTransit {
    FairTransit::new(TransitConfig { framing: Framing::Ip, ..Default::default() }, data_ring(), 5)
}

/// The destination of [`source`]'s channel (its source AS 1 owns
/// 2001:db8::/32), keeping records in a ring.
pub fn destination() -> FairDestination<RecordRing> {
    let mut d = FairDestination::new(
        DestConfig { framing: Framing::Ip, ..Default::default() },
        RecordRing::new(1 << 14),
    );
    d.add_source_prefix("2001:db8::".parse().unwrap(), 32, 1);
    d.add_channel(DestChannel::new(1, 1, &Key::from([7; 16]), 0, BIG, BIG, 0), 0, 7);
    d
}

/// Metadata as the parse stage leaves it for `pkt` (FAIR header found), as
/// in a router pipeline.
pub fn parsed_meta(pkt: &[u8]) -> Meta {
    let mut m = Meta::new(0);
    let p = fair::common::locate_meta(pkt, &m, Framing::Ip, Default::default()).unwrap().unwrap();
    fair::common::set_meta(&mut m, &p);
    m
}

/// A burst of [`BURST`] copies of `pkt`.
pub fn batch_of(pkt: &[u8]) -> Batch<Frame> {
    let mut b = Batch::new();
    for _ in 0..BURST {
        b.push(Frame::from_slice(pkt).unwrap(), 0).unwrap();
    }
    b
}

/// Puts `pkt` back into every buffer of `b`, with fresh metadata.
#[inline(always)]
pub fn reset(b: &mut Batch<Frame>, pkt: &[u8]) {
    for i in 0..BURST {
        b.buf_mut(i).set(pkt).unwrap();
        *b.meta_mut(i) = Meta::new(0);
    }
}

/// Loads the next [`BURST`] of `pkts` (from `*at`, wrapping) into `b`, with
/// fresh metadata, and advances `*at`.
#[inline(always)]
pub fn load(b: &mut Batch<Frame>, pkts: &[Vec<u8>], at: &mut usize) {
    for i in 0..BURST {
        b.buf_mut(i).set(&pkts[(*at + i) % pkts.len()]).unwrap();
        *b.meta_mut(i) = Meta::new(0);
    }
    *at = (*at + BURST) % pkts.len();
}

/// Undoes what the destination changed in a burst of stamped packets.
///
/// It strips the 16-byte header: it moves the IPv6 header and advances the
/// packet start, leaving the payload in place. The restore puts back just
/// that (start/end and the first 56 bytes, a fixed-size copy) and the
/// metadata.
pub struct Restore {
    head: [u8; 56],
    len: usize,
}

impl Restore {
    /// The restore of bursts of `stamped`.
    pub fn new(stamped: &[u8]) -> Self {
        Restore { head: stamped[..56].try_into().unwrap(), len: stamped.len() }
    }

    /// Restores every packet of `b`, with metadata `m`.
    ///
    /// `m` is copied from memory (behind `black_box`) as one block, whatever
    /// the caller knows of its fields: otherwise the compiler stores the
    /// fields it can see one by one, as constants where they are known,
    /// and the harness's cost depends on how the caller built `m`.
    #[inline(always)]
    pub fn apply(&self, b: &mut Batch<Frame>, m: Meta) {
        let m = std::hint::black_box(&m);
        for i in 0..BURST {
            let f = b.buf_mut(i);
            f.reset();
            f.append(self.len).unwrap();
            f.data_mut()[..56].copy_from_slice(&self.head);
            *b.meta_mut(i) = *m;
        }
    }
}

/// `n` copies of [`plain_v6`] to the hosts of an extended FIB: to random
/// ones (drawn from `rng`) or all to the first.
pub fn fib_packets(hosts: &[[u8; 16]], rng: &mut Xoshiro, random: bool, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|_| {
            let d = if random {
                hosts[(rng.next_u64() % hosts.len() as u64) as usize]
            } else {
                hosts[0]
            };
            let mut p = plain_v6();
            p[24..40].copy_from_slice(&d);
            p
        })
        .collect()
}
