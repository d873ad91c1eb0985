//! The burst classifier's EPIC-Z template reader (packets read at the
//! offsets of the last layout learned, after a few masked word compares)
//! against per-packet classification: bursts that mix layouts (path shapes,
//! host address kinds, Q and non-Q, plain SCION), with packets edited in the
//! bytes the layout is decided on, truncated, or shorter than the reader's
//! window.

mod common;

use common::*;
use mac::{Cmac, Key};
use packet::scion::{AddrHdrRepr, RawHostAddr, ScionHeader};
use packet::{HostAddr, Ia};
use proptest::prelude::*;
use scion::build::{self, HopSpec, ScionPathBuf};
use zlane::config::{GatewayConfig, Origin, Rate, RateConfig, RouterConfig};

const SRC: Ia = Ia::new(1, 10);

/// The shape of an EPIC-Z packet: segment lengths (hop fields), the current
/// hop field, source and destination host kinds, Q.
#[derive(Clone, Debug)]
struct Shape {
    segments: Vec<usize>,
    curr: usize,
    src_kind: u8,
    dst_kind: u8,
    q: bool,
}

fn shape() -> impl Strategy<Value = Shape> {
    let segments = prop_oneof![
        3 => (1..=4usize).prop_map(|n| vec![n]),
        1 => (1..=3usize, 1..=3usize).prop_map(|(a, b)| vec![a, b]),
        1 => Just(vec![6, 5]),
    ];
    (segments, any::<prop::sample::Index>(), 0..5u8, 0..3u8, any::<bool>()).prop_map(
        |(segments, curr, src_kind, dst_kind, q)| {
            let n = segments.iter().sum::<usize>();
            Shape { curr: curr.index(n), segments, src_kind, dst_kind, q }
        },
    )
}

/// Host `n` of kind `kind`: IPv4 (mostly), IPv6, a service address, or a
/// kind DRKey derives no keys for (type/length 0x1, 8 bytes).
fn host_of(kind: u8, n: u32) -> RawHostAddr {
    match kind {
        0 | 1 => RawHostAddr::from(HostAddr::V4((0x0a00_0000 + n).to_be_bytes())),
        2 => {
            let mut b = [0u8; 16];
            b[0] = 0x20;
            b[12..].copy_from_slice(&n.to_be_bytes());
            RawHostAddr::from(HostAddr::V6(b))
        }
        3 => RawHostAddr::from(HostAddr::Svc(n as u16)),
        _ => RawHostAddr::new(0x1, &[n as u8; 8]).unwrap(),
    }
}

/// The path of `s`, positioned at its current hop field.
fn path_of(s: &Shape) -> ScionPathBuf {
    let mut hop = 0u16;
    let segs: Vec<_> = s
        .segments
        .iter()
        .map(|&n| {
            let hops: Vec<HopSpec> = (0..n)
                .map(|_| {
                    hop += 1;
                    HopSpec {
                        key: fwd_key(),
                        cons_ingress: hop,
                        cons_egress: hop + 1,
                        exp_time: 255,
                    }
                })
                .collect();
            build::segment(true, 7, INFO_TS, &hops)
        })
        .collect();
    let mut p = build::path(&segs).unwrap();
    p.curr_hf = s.curr as u8;
    // (The info field of the segment the current hop field is in.)
    let mut first = 0;
    for (i, &n) in s.segments.iter().enumerate() {
        if s.curr >= first {
            p.curr_inf = i as u8;
        }
        first += n;
    }
    p
}

/// An EPIC-Z packet of shape `s` from host `n`: host-level HVFs under the
/// transit AS's keys, and for `s.q` the gateway's AS-level HVFs.
fn epic(s: &Shape, n: u32, counter: u32, ts_rel: u32, payload: usize) -> Vec<u8> {
    let src = host_of(s.src_kind, n);
    let dst = host_of(s.dst_kind, 7);
    let hdr = AddrHdrRepr { src_host: src, dst_host: dst, ..hdr(SRC, src) };
    let path = path_of(s);
    let k = match src.decode() {
        Ok(_) => host_key(&drkey_sv(), SRC, &src),
        Err(_) => Cmac::new(&Key::from([9; 16])),
    };
    let keys: Vec<&Cmac> = (0..path.num_hf()).map(|_| &k).collect();
    let mut p =
        zlane::host::epic_packet(&hdr, &path, &keys, ts_rel, 0, counter, &vec![0u8; payload])
            .unwrap();
    if s.q && src.decode().is_ok() {
        let cfg = GatewayConfig { default_rate_bps: 1_000_000_000, ..Default::default() };
        let mut g = zlane::Gateway::new(cfg).unwrap();
        g.set_as_key(TRANSIT, &as_key(SRC));
        for h in path.hops() {
            g.register_hop(h.mac, TRANSIT);
        }
        g.process(&mut p, now(0)).unwrap();
    }
    p
}

/// Offsets of the bytes the layout is decided on, and of the lengths.
fn decision_offsets(p: &[u8]) -> Vec<usize> {
    let h = ScionHeader::new_checked(p).unwrap();
    let po = h.path_offset();
    let n = usize::from(p[po + 9]);
    let meta = po + 12 + 4 * n;
    // Version, HdrLen, PayloadLen, PathType, DT/DL/ST/SL, the EPIC flags
    // and NumHVF, the meta-header word.
    vec![0, 5, 6, 7, 8, 9, po + 8, po + 9, meta, meta + 1, meta + 2, meta + 3]
}

/// How a packet of a burst is changed.
#[derive(Clone, Debug)]
enum Edit {
    None,
    /// XOR a byte the layout is decided on (by index into
    /// `decision_offsets`) with a non-zero mask.
    Decision(prop::sample::Index, u8),
    /// XOR any byte of the first 200.
    Any(u8, u8),
    /// Cut bytes off the end.
    Truncate(prop::sample::Index),
    /// Path type SCION (the EPIC-Z path then fails its checks or is read as
    /// a plain SCION path: class U).
    PlainScion,
    /// TsRel far ahead (outside the freshness window).
    Stale,
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        12 => Just(Edit::None),
        4 => (any::<prop::sample::Index>(), 1..=255u8).prop_map(|(i, x)| Edit::Decision(i, x)),
        1 => (0..200u8, 1..=255u8).prop_map(|(o, x)| Edit::Any(o, x)),
        2 => any::<prop::sample::Index>().prop_map(Edit::Truncate),
        1 => Just(Edit::PlainScion),
        1 => Just(Edit::Stale),
    ]
}

fn apply(mut p: Vec<u8>, e: &Edit, s: &Shape, n: u32, counter: u32, payload: usize) -> Vec<u8> {
    match e {
        Edit::None => {}
        Edit::Decision(i, x) => {
            let offs = decision_offsets(&p);
            let o = offs[i.index(offs.len())];
            p[o] ^= x;
        }
        Edit::Any(o, x) => {
            if let Some(b) = p.get_mut(usize::from(*o)) {
                *b ^= x;
            }
        }
        Edit::Truncate(i) => {
            let cut = i.index(p.len());
            p.truncate(p.len() - cut);
        }
        Edit::PlainScion => p[8] = 1,
        Edit::Stale => p = epic(s, n, counter, 0x4000_0000, payload),
    }
    p
}

fn config(strict_flags: bool) -> RouterConfig {
    RouterConfig {
        local_ia: TRANSIT,
        rates: vec![RateConfig { origin: Origin::As(SRC), rate: Some(Rate::Bps(100_000_000)) }],
        burst: 3000,
        strict_flags,
        ..Default::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Bursts of packets of a few shapes (so that most packets have the
    /// layout the reader learned last, and some switch it), some edited,
    /// truncated or shorter than the reader's window: verdicts, counters
    /// and the AS bucket as the per-packet classifier finds them.
    #[test]
    fn template_reader_decides_as_the_per_packet_reader(
        shapes in prop::collection::vec(shape(), 1..=3),
        bursts in prop::collection::vec(
            prop::collection::vec(
                (any::<prop::sample::Index>(), 0..12u32, 0..300usize, edit()),
                1..=32,
            ),
            1..4,
        ),
        strict in any::<bool>(),
    ) {
        let mut counter = 0;
        let bursts: Vec<Vec<Vec<u8>>> = bursts
            .iter()
            .map(|b| {
                b.iter()
                    .map(|(s, n, payload, e)| {
                        counter += 1;
                        let s = &shapes[s.index(shapes.len())];
                        let p = epic(s, *n, counter, 0, *payload);
                        apply(p, e, s, *n, counter, *payload)
                    })
                    .collect()
            })
            .collect();
        check_stage_against_classify(&config(strict), &bursts, 7_000, |b, stage, one| {
            let (got, want) = (stage.bucket(Origin::As(SRC)), one.bucket(Origin::As(SRC)));
            prop_assert_eq!(got, want, "bucket after burst {}", b);
            Ok(())
        })?;
    }
}
