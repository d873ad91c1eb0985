//! Software RSS: a flow hash over the 5-tuple (or the fields an [`RssKey`]
//! names) and the worker it maps to.
//!
//! NICs (and DPDK) compute a Toeplitz hash and spread flows over queues; the
//! software backends do the same job with this hash so that all packets of a
//! flow (same addresses, protocol and ports) reach the same worker and its
//! state shard. `[workers] rss` narrows the key to the fields a pipeline's
//! state is keyed on (FlowPolice aggregates per destination, for example;
//! `docs/multicore.md`). The hash is not Toeplitz-compatible: it only needs
//! to be stable and well mixed. Frames are read with the packet crate's Ethernet
//! view, as the `parse` stage reads them (one 802.1Q tag; stacked tags are
//! not unwrapped); frames that are not IPv4/IPv6 there hash over their
//! first 64 bytes.

use packet::ethernet::{ethertype, Ethernet};
use packet::field::be16;

#[inline]
fn mix(h: u64, v: u64) -> u64 {
    // One round of a multiply-xorshift mixer (as in splitmix64).
    let mut x = (h ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x ^= x >> 29;
    x.wrapping_mul(0xbf58_476d_1ce4_e5b9)
}

#[inline]
fn finish(h: u64) -> u32 {
    let x = h ^ (h >> 31);
    (x ^ (x >> 32)) as u32
}

fn bytes_hash(h: u64, b: &[u8]) -> u64 {
    let mut h = h;
    let mut chunks = b.chunks_exact(8);
    for c in &mut chunks {
        let mut a = [0u8; 8];
        a.copy_from_slice(c);
        h = mix(h, u64::from_le_bytes(a));
    }
    let rest = chunks.remainder();
    let mut a = [0u8; 8];
    a[..rest.len()].copy_from_slice(rest);
    mix(h, u64::from_le_bytes(a) ^ ((rest.len() as u64) << 56))
}

/// The fields packets are spread over workers by (`[workers] rss`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RssKey {
    /// Addresses, protocol and TCP/UDP ports (the default; NICs' usual RSS).
    #[default]
    Flow,
    /// Source and destination addresses.
    Addresses,
    /// The source address alone (state keyed per sender).
    Src,
    /// The destination address alone (state keyed per destination).
    Dst,
}

impl RssKey {
    /// The name used in configuration files.
    pub fn name(self) -> &'static str {
        match self {
            RssKey::Flow => "flow",
            RssKey::Addresses => "addresses",
            RssKey::Src => "src",
            RssKey::Dst => "dst",
        }
    }
}

/// The flow hash of an Ethernet frame (never panics, on any input).
pub fn flow_hash(frame: &[u8]) -> u32 {
    hash_by(frame, RssKey::Flow)
}

/// The hash of an Ethernet frame over the fields `key` names (never panics;
/// frames that are not IPv4/IPv6 hash over their first 64 bytes whatever
/// the key).
pub fn hash_by(frame: &[u8], key: RssKey) -> u32 {
    let Ok(eth) = Ethernet::new_checked(frame) else {
        return finish(bytes_hash(1, frame));
    };
    let l3 = eth.header_len();
    match eth.ethertype() {
        ethertype::IPV4 if frame.len() >= l3 + 20 => {
            let ip = &frame[l3..];
            let ihl = usize::from(ip[0] & 0x0f) * 4;
            let proto = ip[9];
            let fragmented = be16(ip, 6) & 0x3fff != 0;
            let (mut h, addrs) = match key {
                RssKey::Flow => (mix(2, u64::from(proto)), &ip[12..20]),
                RssKey::Addresses => (2, &ip[12..20]),
                RssKey::Src => (2, &ip[12..16]),
                RssKey::Dst => (2, &ip[16..20]),
            };
            h = bytes_hash(h, addrs);
            if key == RssKey::Flow
                && !fragmented
                && (proto == 6 || proto == 17)
                && ip.len() >= ihl + 4
                && ihl >= 20
            {
                h = bytes_hash(h, &ip[ihl..ihl + 4]);
            }
            finish(h)
        }
        ethertype::IPV6 if frame.len() >= l3 + 40 => {
            let ip = &frame[l3..];
            let next = ip[6];
            let (mut h, addrs) = match key {
                RssKey::Flow => (mix(3, u64::from(next)), &ip[8..40]),
                RssKey::Addresses => (3, &ip[8..40]),
                RssKey::Src => (3, &ip[8..24]),
                RssKey::Dst => (3, &ip[24..40]),
            };
            h = bytes_hash(h, addrs);
            if key == RssKey::Flow && (next == 6 || next == 17) && ip.len() >= 44 {
                h = bytes_hash(h, &ip[40..44]);
            }
            finish(h)
        }
        _ => finish(bytes_hash(4, &frame[..frame.len().min(64)])),
    }
}

/// The worker (of `workers`) that owns flows with hash `hash`.
#[inline]
pub fn shard(hash: u32, workers: usize) -> usize {
    ((u64::from(hash) * workers as u64) >> 32) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn udp4(src: [u8; 4], sport: u16, ttl: u8) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 8];
        f[12..14].copy_from_slice(&ethertype::IPV4.to_be_bytes());
        f[14] = 0x45;
        f[14 + 8] = ttl;
        f[14 + 9] = 17;
        f[14 + 12..14 + 16].copy_from_slice(&src);
        f[14 + 16..14 + 20].copy_from_slice(&[10, 0, 0, 2]);
        f[34..36].copy_from_slice(&sport.to_be_bytes());
        f
    }

    #[test]
    fn same_flow_same_hash_other_fields_ignored() {
        assert_eq!(flow_hash(&udp4([10, 0, 0, 1], 5, 64)), flow_hash(&udp4([10, 0, 0, 1], 5, 3)));
        assert_ne!(flow_hash(&udp4([10, 0, 0, 1], 5, 64)), flow_hash(&udp4([10, 0, 0, 1], 6, 64)));
        assert_ne!(flow_hash(&udp4([10, 0, 0, 1], 5, 64)), flow_hash(&udp4([10, 0, 0, 9], 5, 64)));
    }

    #[test]
    fn tagged_frames_hash_like_the_parse_stage_reads_them() {
        let plain = udp4([10, 0, 0, 1], 5, 64);
        let mut tagged = plain[..12].to_vec();
        tagged.extend_from_slice(&[0x81, 0x00, 0x00, 0x07]);
        tagged.extend_from_slice(&plain[12..]);
        assert_eq!(flow_hash(&tagged), flow_hash(&plain), "one 802.1Q tag is read through");
        // Stacked tags are not unwrapped (as in `packet::ethernet`): the
        // frame hashes as bytes, and a truncated one does not panic.
        let mut qinq = tagged[..12].to_vec();
        qinq.extend_from_slice(&[0x88, 0xa8, 0x00, 0x01]);
        qinq.extend_from_slice(&tagged[12..]);
        let _ = flow_hash(&qinq);
        let _ = flow_hash(&tagged[..15]);
    }

    #[test]
    fn narrower_keys_ignore_the_other_fields() {
        let f = |src, sport| udp4(src, sport, 64);
        let (a, b) = (f([10, 0, 0, 1], 5), f([10, 0, 0, 1], 6));
        assert_eq!(hash_by(&a, RssKey::Addresses), hash_by(&b, RssKey::Addresses));
        assert_eq!(hash_by(&a, RssKey::Src), hash_by(&b, RssKey::Src));
        let other_src = f([10, 0, 0, 9], 5);
        assert_eq!(hash_by(&a, RssKey::Dst), hash_by(&other_src, RssKey::Dst));
        assert_ne!(hash_by(&a, RssKey::Src), hash_by(&other_src, RssKey::Src));
        assert_ne!(hash_by(&a, RssKey::Addresses), hash_by(&other_src, RssKey::Addresses));
        assert_eq!(flow_hash(&a), hash_by(&a, RssKey::Flow));
    }

    #[test]
    fn shards_spread_flows() {
        let mut count = [0usize; 4];
        for p in 0..4000u16 {
            count[shard(flow_hash(&udp4([10, 0, 0, 1], p, 64)), 4)] += 1;
        }
        assert!(count.iter().all(|&c| (800..1200).contains(&c)), "{count:?}");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn never_panics_and_shard_in_range(b in proptest::collection::vec(any::<u8>(), 0..128), w in 1usize..16) {
            prop_assert!(shard(flow_hash(&b), w) < w);
            for key in [RssKey::Addresses, RssKey::Src, RssKey::Dst] {
                prop_assert!(shard(hash_by(&b, key), w) < w);
            }
        }
    }
}
