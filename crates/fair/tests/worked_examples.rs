//! U-W8, U-P1..U-P3, U-W7: the worked examples of spec §2.8 through the real stages.

mod common;

use std::sync::atomic::AtomicU32;
use std::sync::Arc;

use fair::common::Framing;
use fair::crypto::MarkBinding;
use fair::dest::{DestChannel, FairDestination};
use fair::keys::KeyRing;
use fair::record::Record;
use fair::rng::NonceGen;
use fair::source::{FairSource, SourceChannel, SourceConfig};
use fair::transit::{FairTransit, TransitConfig};
use mac::Key;
use pipeline::{Batch, DropReason, Now, Stage, Verdict};

fn hx(s: &str) -> Vec<u8> {
    hex::decode(s.split_whitespace().collect::<String>()).unwrap()
}

const KSD: &str = "000102030405060708090a0b0c0d0e0f";
const K1: &str = "101112131415161718191a1b1c1d1e1f";

/// A Unix time whose 16 LSBs are `ts`.
fn time_with(ts: u16) -> u64 {
    1_700_000_000u64 / 65536 * 65536 + ts as u64
}

fn one(pkt: Vec<u8>) -> Batch<Vec<u8>> {
    let mut b = Batch::new();
    b.push(pkt, 1).unwrap();
    b
}

fn transit(now: u64, nonce: u8) -> FairTransit {
    let mut ring = KeyRing::data(60, 43_200).unwrap();
    ring.install(now / 60 - 1, &Key::from([0x55; 16]), MarkBinding::Paper).unwrap();
    ring.install(now / 60, &Key::from_hex(K1).unwrap(), MarkBinding::Paper).unwrap();
    ring.install(now / 60 + 1, &Key::from([0x66; 16]), MarkBinding::Paper).unwrap();
    let mut t = FairTransit::new(
        TransitConfig { framing: Framing::Ip, ..Default::default() },
        Arc::new(ring),
        7,
    );
    t.set_nonce_gen(NonceGen::fixed(nonce));
    t
}

fn source(m: u8, first_seq: u32, dst: &str, plen: u8) -> FairSource {
    let mut s = FairSource::new(SourceConfig { framing: Framing::Ip, ..Default::default() });
    let ch = SourceChannel::new(
        0,
        64511,
        &Key::from_hex(KSD).unwrap(),
        m,
        125_000_000,
        12_500_000,
        0,
        Arc::new(AtomicU32::new(first_seq)),
    );
    let idx = s.add_channel(ch);
    s.route(dst.parse().unwrap(), plen, idx);
    s
}

/// The destination of the examples: source AS 64500 owns `prefix`; its
/// channel `id` (key KSD, `m` marks expected, 1 Gbit/s) reads `slots` slots.
fn destination(prefix: (&str, u8), id: u32, m: u8, slots: u8) -> FairDestination<Vec<Record>> {
    let mut d = common::destination();
    d.add_source_prefix(prefix.0.parse().unwrap(), prefix.1, 64500);
    let k = Key::from_hex(KSD).unwrap();
    d.add_channel(DestChannel::new(id, 64500, &k, m, 125_000_000, 12_500_000, 0), 0, slots);
    d
}

#[test]
fn u_w8_ipv6_send_forward_receive() {
    let orig = hx("60 00 00 00 00 0c 11 40 20 01 0d b8 00 00 00 00 00 00 00 00 00 00 00 01
                   20 01 0d b9 00 00 00 00 00 00 00 00 00 00 00 02 04 d2 16 2e 00 0c ab cd
                   46 41 49 52");
    let sent = hx("60 00 00 00 00 1c fd 40 20 01 0d b8 00 00 00 00 00 00 00 00 00 00 00 01
                   20 01 0d b9 00 00 00 00 00 00 00 00 00 00 00 02 11 01 be ef 00 00 01 5d
                   00 00 00 00 00 00 00 00 04 d2 16 2e 00 0c ab cd 46 41 49 52");
    let fwd = hx("60 00 00 00 00 1c fd 40 20 01 0d b8 00 00 00 00 00 00 00 00 00 00 00 01
                  20 01 0d b9 00 00 00 00 00 00 00 00 00 00 00 02 11 01 be ef 00 00 01 5d
                  01 a3 00 00 00 00 00 00 04 d2 16 2e 00 0c ab cd 46 41 49 52");
    let now_s = time_with(0xbeef);
    let now = Now::from_unix_ns(now_s * 1_000_000_000);
    let mut src = source(1, 1, "2001:db9::", 32);
    let mut b = one(orig.clone());
    src.process(&mut b, now);
    assert_eq!(b.data(0), &sent[..]);
    assert!(matches!(b.meta(0).verdict, Verdict::Forward { .. }));

    let mut t = transit(now_s, 0xa);
    t.process(&mut b, now);
    assert_eq!(b.data(0), &fwd[..]);

    // Destination: checks, captures, strips back to the original bytes (U-W7).
    let mut d = destination(("2001:db8::", 32), 9, 1, 7);
    let mut b2 = one(fwd.clone());
    d.process(&mut b2, now);
    assert_eq!(b2.data(0), &orig[..]);
    let rec = d.sink()[0];
    assert_eq!(rec, Record::from_wire(&fwd[..56], 253, 9, now_s as u32).unwrap());
    assert_eq!(
        (rec.ts, rec.seqno, rec.icv, rec.next_as, rec.slots[0], rec.len_field),
        (0xbeef, 1, 0x5d, 1, 0xa3, 0x1c)
    );

    // U-P3: ICV mismatch is dropped and not stored; stale is dropped.
    let mut bad = fwd.clone();
    bad[47] ^= 1; // seqno
    let mut b3 = one(bad);
    d.process(&mut b3, now);
    assert_eq!(b3.meta(0).verdict, Verdict::Drop(DropReason::BadMac));
    assert_eq!(d.sink().len(), 1);
    let mut b4 = one(fwd.clone());
    d.process(&mut b4, Now::from_unix_ns((now_s + 4) * 1_000_000_000));
    assert_eq!(b4.meta(0).verdict, Verdict::Drop(DropReason::Expired));
    let mut b5 = one(fwd);
    d.process(&mut b5, Now::from_unix_ns((now_s - 4) * 1_000_000_000));
    assert_eq!(b5.meta(0).verdict, Verdict::Drop(DropReason::FromFuture));
}

#[test]
fn u_w8_ipv4_send_forward_receive() {
    let orig = hx("45 00 00 20 12 34 40 00 40 11 3c 5d c0 00 02 01 c6 33 64 07 04 d2 16 2e
                   00 0c ab cd 46 41 49 52");
    let sent = hx("45 00 00 2d 12 34 40 00 40 fd 3b 64 c0 00 02 01 c6 33 64 07 11 0d 00 01
                   ff ff ff c0 00 00 00 00 00 04 d2 16 2e 00 0c ab cd 46 41 49 52");
    let fwd = hx("45 00 00 2d 12 34 40 00 40 fd 3b 64 c0 00 02 01 c6 33 64 07 11 0d 00 01
                  ff ff ff c0 01 5d 00 00 00 04 d2 16 2e 00 0c ab cd 46 41 49 52");
    let now_s = time_with(0x0001);
    let now = Now::from_unix_ns(now_s * 1_000_000_000);
    let mut src = source(4, 0xffffff, "198.51.100.0", 24);
    let mut b = one(orig.clone());
    src.process(&mut b, now);
    assert_eq!(b.data(0), &sent[..]);
    // The counter wraps: the next packet gets seqno 0 (U-P1).
    let mut b1 = one(orig.clone());
    src.process(&mut b1, now);
    assert_eq!(&b1.data(0)[24..27], &[0, 0, 0]);

    let mut t = transit(now_s, 0x5);
    t.process(&mut b, now);
    assert_eq!(b.data(0), &fwd[..]);

    let mut d = destination(("192.0.2.0", 24), 3, 4, 4);
    let mut b2 = one(fwd.clone());
    d.process(&mut b2, now);
    // Restored except DF (already set in this example) → byte-exact.
    assert_eq!(b2.data(0), &orig[..]);
    assert_eq!(d.sink()[0], Record::from_wire(&fwd[..33], 253, 3, now_s as u32).unwrap());
    assert_eq!(d.channels()[0].stats.mark_count_mismatch, 1); // one mark of the expected four
}

#[test]
fn u_p2_forward_rules() {
    let now_s = time_with(0x0001);
    let now = Now::from_unix_ns(now_s * 1_000_000_000);
    let sent = hx("45 00 00 2d 12 34 40 00 40 fd 3b 64 c0 00 02 01 c6 33 64 07 11 0d 00 01
                   ff ff ff c0 00 00 00 00 00 04 d2 16 2e 00 0c ab cd 46 41 49 52");
    // Four marks fill the header; a fifth AS hits the slot overflow.
    let mut b = one(sent.clone());
    for k in 0..4u8 {
        let mut t = transit(now_s, k);
        t.process(&mut b, now);
        assert_eq!(b.data(0)[28], k + 1);
    }
    let before = b.data(0).to_vec();
    let mut t = transit(now_s, 1);
    t.process(&mut b, now);
    assert_eq!(b.meta(0).verdict, Verdict::Drop(DropReason::Policy));
    assert_eq!(t.stats.slot_overflow, 1);
    assert_eq!(b.data(0), &before[..]);
    // SB preserved across the increment; only next_as and the slot change.
    let mut sb = sent.clone();
    sb[28] = 0x80;
    let mut b = one(sb.clone());
    transit(now_s, 3).process(&mut b, now);
    let out = b.data(0);
    let diff: Vec<usize> = (0..out.len()).filter(|&k| out[k] != sb[k]).collect();
    assert_eq!(diff, vec![28, 29]);
    assert_eq!(out[28], 0x81);
    // Stale in both directions.
    for (dt, why) in [(4i64, DropReason::Expired), (-4, DropReason::FromFuture)] {
        let mut b = one(sent.clone());
        let t_now = Now::from_unix_ns(((now_s as i64 + dt) as u64) * 1_000_000_000);
        transit(now_s, 3).process(&mut b, t_now);
        assert_eq!(b.meta(0).verdict, Verdict::Drop(why));
    }
}

#[test]
fn source_polices_and_rejects_preexisting_headers() {
    let now_s = time_with(9);
    let orig = hx("45 00 00 20 12 34 40 00 40 11 3c 5d c0 00 02 01 c6 33 64 07 04 d2 16 2e
                   00 0c ab cd 46 41 49 52");
    let mut s = FairSource::new(SourceConfig { framing: Framing::Ip, ..Default::default() });
    // CBS of two packets (45 B each), 45 B/s.
    let ch = SourceChannel::new(
        0,
        64511,
        &Key::from_hex(KSD).unwrap(),
        4,
        45,
        90,
        0,
        Arc::new(AtomicU32::new(0)),
    );
    let idx = s.add_channel(ch);
    s.route("198.51.100.0".parse().unwrap(), 24, idx);
    let mut b = Batch::new();
    for _ in 0..3 {
        b.push(orig.clone(), 0).unwrap();
    }
    s.process(&mut b, Now::from_unix_ns(now_s * 1_000_000_000));
    assert!(matches!(b.meta(0).verdict, Verdict::Forward { .. }));
    assert!(matches!(b.meta(1).verdict, Verdict::Forward { .. }));
    assert_eq!(b.meta(2).verdict, Verdict::Drop(DropReason::OverRate));
    // Sequence numbers 0, 1.
    assert_eq!(&b.data(0)[24..27], &[0, 0, 0]);
    assert_eq!(&b.data(1)[24..27], &[0, 0, 1]);
    // A packet that already carries FAIR is dropped (SEC-25).
    let pre = b.data(0).to_vec();
    let mut b2 = one(pre);
    s.process(&mut b2, Now::from_unix_ns((now_s + 5) * 1_000_000_000));
    assert_eq!(b2.meta(0).verdict, Verdict::Drop(DropReason::Policy));
    // No channel: forwarded untouched.
    let mut other = orig.clone();
    other[16] = 9;
    let mut b3 = one(other.clone());
    s.process(&mut b3, Now::from_unix_ns(now_s * 1_000_000_000));
    assert_eq!(b3.data(0), &other[..]);
}
