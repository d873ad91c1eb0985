//! BM-3's extended FIB, shared by the `fair` bench and the `fair_profile`
//! example (included into both with `#[path]`, so the two always measure the
//! same table).

use std::net::IpAddr;
use std::sync::atomic::AtomicU32;
use std::sync::Arc;

use fair::common::Framing;
use fair::rng::Xoshiro;
use fair::source::{FairSource, SourceChannel, SourceConfig};
use mac::Key;

/// Prefixes (and channels) in the FIB.
pub const PREFIXES: usize = 18_000;

/// A source with `PREFIXES` random IPv6 prefixes /24 … /48 inside 2000::/3,
/// one channel (own K_SD, sequence counter, shaper that never runs dry at
/// the benches' rates) per prefix, routes committed; and one random host
/// address inside each prefix, in insertion order.
pub fn bm3_source(rng: &mut Xoshiro) -> (FairSource, Vec<[u8; 16]>) {
    let mut s = FairSource::new(SourceConfig { framing: Framing::Ip, ..Default::default() });
    let big = u64::MAX / 4_000_000_000;
    let mut seen = std::collections::HashSet::new();
    let mut hosts: Vec<[u8; 16]> = Vec::with_capacity(PREFIXES);
    while hosts.len() < PREFIXES {
        let len = 24 + (rng.next_u64() % 25) as u32; // /24 … /48
        let hi = (rng.next_u64() >> 3) | (1 << 61); // inside 2000::/3
        let net = hi & !(u64::MAX >> len);
        if !seen.insert((net, len)) {
            continue;
        }
        let mut k = [0u8; 16];
        k[..8].copy_from_slice(&rng.next_u64().to_le_bytes());
        k[8..].copy_from_slice(&rng.next_u64().to_le_bytes());
        let seq = Arc::new(AtomicU32::new(0));
        let ch = SourceChannel::new(hosts.len() as u32, 2, &Key::from(k), 1, big, big, 0, seq);
        let idx = s.add_channel(ch);
        let mut p = [0u8; 16];
        p[..8].copy_from_slice(&net.to_be_bytes());
        s.route(IpAddr::from(p), len as u8, idx);
        // A host inside the prefix (random host bits).
        let host = net | (rng.next_u64() & (u64::MAX >> len));
        p[..8].copy_from_slice(&host.to_be_bytes());
        p[8..].copy_from_slice(&rng.next_u64().to_be_bytes());
        hosts.push(p);
    }
    s.commit_routes();
    (s, hosts)
}
