//! Workloads of the full-decode comparison, shared by the `decode` bench and
//! the `scion_profile` example (included into both with `#[path]`, so the
//! two measure the same code): a 15-hop SCION packet and three decoders of it.
//!
//! * [`fixed64`]: the representation `packet` had before, kept here as the
//!   baseline: fixed arrays of 64 hop fields (and HVFs) per path, in an enum
//!   as large as its largest variant, decoded field by field.
//! * [`alloc_decode`]: the same information in heap vectors sized by the hop
//!   count: the usual allocating decoder.
//! * `packet::scion::ScionRepr::parse`: the current representation.

#![allow(dead_code)]

use packet::scion::{
    AddrHdrRepr, HopFieldRepr, InfoFieldRepr, PathRepr, RawHostAddr, ScionPathRepr, ScionRepr,
};
use packet::{HostAddr, Ia};

/// Hop fields of the measured path (three segments of five).
pub const HOPS: usize = 15;

/// A SCION packet (IPv4 hosts, 8 payload bytes) over a 15-hop path, at hop 7.
pub fn packet_15_hops() -> Vec<u8> {
    let infos: [InfoFieldRepr; 3] = core::array::from_fn(|i| InfoFieldRepr {
        peering: false,
        cons_dir: i == 2,
        seg_id: 0x1000 + i as u16,
        timestamp: 1_700_000_000 + i as u32,
    });
    let hops: Vec<HopFieldRepr> = (0..HOPS as u16)
        .map(|i| HopFieldRepr {
            exp_time: 63,
            cons_ingress: i,
            cons_egress: i + 1,
            mac: [i as u8; 6],
            ..Default::default()
        })
        .collect();
    let path = ScionPathRepr {
        curr_inf: 1,
        curr_hf: 7,
        seg_lens: [5, 5, 5],
        info_fields: infos,
        hop_fields: (&hops[..]).into(),
    };
    let r = ScionRepr {
        hdr: AddrHdrRepr {
            qos: 0,
            flow_id: 1,
            next_hdr: 17,
            payload_len: 8,
            dst_ia: Ia::new(1, 0xff00_0000_0110),
            src_ia: Ia::new(2, 0xff00_0000_0220),
            dst_host: RawHostAddr::from(HostAddr::V4([10, 0, 0, 1])),
            src_host: RawHostAddr::from(HostAddr::V4([10, 0, 0, 2])),
        },
        path: PathRepr::Scion(path),
    };
    let mut b = vec![0; r.buffer_len() + 8];
    r.emit(&mut b).expect("bench packet");
    b
}

/// Sum over every field of every hop (so a decoder's laziness is paid for).
#[inline(always)]
pub fn hop_checksum(h: &HopFieldRepr) -> u64 {
    u64::from(h.exp_time)
        + u64::from(h.cons_ingress)
        + u64::from(h.cons_egress)
        + u64::from(h.ingress_alert)
        + u64::from(h.egress_alert)
        + u64::from(h.mac[0])
        + u64::from(h.mac[5])
}

/// The previous representation, as it was: fixed capacity for 64 hops.
pub mod fixed64 {
    use packet::scion::path::{MAX_HOPS, MAX_INFO};
    use packet::scion::{
        parse, AddrHdrRepr, EpicPath, HopFieldRepr, InfoFieldRepr, Path, ScionPath, SibraPathRepr,
    };
    use packet::{Error, Result};

    /// SCION path with arrays for 3 info and 64 hop fields.
    #[derive(Clone, Copy, Debug)]
    pub struct ScionPathRepr {
        pub curr_inf: u8,
        pub curr_hf: u8,
        pub seg_lens: [u8; 3],
        pub info_fields: [InfoFieldRepr; MAX_INFO],
        pub hop_fields: [HopFieldRepr; MAX_HOPS],
    }

    impl Default for ScionPathRepr {
        fn default() -> Self {
            ScionPathRepr {
                curr_inf: 0,
                curr_hf: 0,
                seg_lens: [0; 3],
                info_fields: [InfoFieldRepr::default(); MAX_INFO],
                hop_fields: [HopFieldRepr::default(); MAX_HOPS],
            }
        }
    }

    impl ScionPathRepr {
        pub fn num_hf(&self) -> usize {
            self.seg_lens.iter().map(|&s| usize::from(s)).sum::<usize>().min(MAX_HOPS)
        }

        pub fn hops(&self) -> &[HopFieldRepr] {
            &self.hop_fields[..self.num_hf()]
        }

        pub fn parse<T: AsRef<[u8]>>(p: &ScionPath<T>) -> Result<Self> {
            p.check_len()?;
            let mut r = ScionPathRepr {
                curr_inf: p.curr_inf(),
                curr_hf: p.curr_hf(),
                seg_lens: p.seg_lens(),
                ..Default::default()
            };
            for (i, slot) in r.info_fields.iter_mut().enumerate().take(p.num_inf()) {
                let f = p.info_field(i).ok_or(Error::Truncated)?;
                *slot = InfoFieldRepr::parse(&f);
            }
            for (i, slot) in r.hop_fields.iter_mut().enumerate().take(p.num_hf()) {
                let f = p.hop_field(i).ok_or(Error::Truncated)?;
                *slot = HopFieldRepr::parse(&f);
            }
            Ok(r)
        }
    }

    /// EPIC-Z path with 64 HVF slots.
    #[derive(Clone, Copy, Debug)]
    pub struct EpicPathRepr {
        pub ts_rel: u32,
        pub core_id: u8,
        pub counter: u32,
        pub q: bool,
        pub hvfs: [[u8; 4]; MAX_HOPS],
        pub path: ScionPathRepr,
    }

    impl EpicPathRepr {
        pub fn parse<T: AsRef<[u8]>>(p: &EpicPath<T>) -> Result<Self> {
            p.check_len()?;
            let mut r = EpicPathRepr {
                ts_rel: p.ts_rel(),
                core_id: p.core_id(),
                counter: p.counter(),
                q: p.q(),
                hvfs: [[0; 4]; MAX_HOPS],
                path: ScionPathRepr::parse(&p.scion_path())?,
            };
            for (i, h) in r.hvfs.iter_mut().enumerate().take(p.num_hvf()) {
                *h = p.hvf(i).ok_or(Error::Truncated)?;
            }
            Ok(r)
        }
    }

    /// The path enum, as large as SIBRA's representation.
    #[allow(clippy::large_enum_variant)]
    #[derive(Clone, Copy, Debug)]
    pub enum PathRepr {
        Empty,
        Scion(ScionPathRepr),
        Sibra(SibraPathRepr),
        EpicZ(EpicPathRepr),
    }

    impl PathRepr {
        pub fn parse(p: &Path<'_>) -> Result<Self> {
            Ok(match p {
                Path::Empty => PathRepr::Empty,
                Path::Scion(v) => PathRepr::Scion(ScionPathRepr::parse(v)?),
                Path::Sibra(v) => PathRepr::Sibra(SibraPathRepr::parse(v)?),
                Path::EpicZ(v) => PathRepr::EpicZ(EpicPathRepr::parse(v)?),
                _ => return Err(Error::unsupported("SCION path type")),
            })
        }
    }

    /// The whole header.
    #[derive(Clone, Copy, Debug)]
    pub struct ScionRepr {
        pub hdr: AddrHdrRepr,
        pub path: PathRepr,
    }

    impl ScionRepr {
        #[inline]
        pub fn parse(buf: &[u8]) -> Result<Self> {
            let pkt = parse(buf)?;
            Ok(ScionRepr {
                hdr: AddrHdrRepr::parse(&pkt.header)?,
                path: PathRepr::parse(&pkt.path)?,
            })
        }
    }
}

/// A decoded SCION packet in heap vectors sized by the hop count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllocDecoded {
    pub hdr: AddrHdrRepr,
    pub curr_inf: u8,
    pub curr_hf: u8,
    pub seg_lens: [u8; 3],
    pub info_fields: Vec<InfoFieldRepr>,
    pub hop_fields: Vec<HopFieldRepr>,
}

/// The allocating decoder: checked views, then one vector per field list,
/// each allocated once at its final size.
#[inline(never)]
pub fn alloc_decode(buf: &[u8]) -> packet::Result<AllocDecoded> {
    use packet::scion::{parse, Path};
    let pkt = parse(buf)?;
    let Path::Scion(p) = pkt.path else {
        return Err(packet::Error::unsupported("not a SCION path"));
    };
    Ok(AllocDecoded {
        hdr: AddrHdrRepr::parse(&pkt.header)?,
        curr_inf: p.curr_inf(),
        curr_hf: p.curr_hf(),
        seg_lens: p.seg_lens(),
        info_fields: fill(p.num_inf(), |i| p.info_field(i).map(|f| InfoFieldRepr::parse(&f))),
        hop_fields: fill(p.num_hf(), |i| p.hop_field(i).map(|f| HopFieldRepr::parse(&f))),
    })
}

/// A vector of the `n` values `get` returns, allocated once at its size.
#[inline(always)]
fn fill<T>(n: usize, get: impl Fn(usize) -> Option<T>) -> Vec<T> {
    let mut v = Vec::with_capacity(n);
    v.extend((0..n).map_while(get));
    v
}
