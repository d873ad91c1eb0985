//! Overhead and storage calculators (spec §7.4, §7.5; benchmark BM-6).
//!
//! Plain arithmetic over a traffic mix, used to reproduce the paper's
//! bandwidth-overhead and storage numbers and to size deployments.
//!
//! **Decision (§7.4, A9).** The paper's per-packet FAIR overhead for a 5-hop
//! path is 13 B for IPv4 (the 9-byte fixed part plus 4 slots, as
//! [`wire::layout`](crate::wire::layout) allocates) and 2 B more for IPv6
//! ([`PAPER_V6_OVERHEAD`]). This crate's IPv6 header rounds up to the 8-octet
//! rule (16 B for 4 slots), so pass the overhead you want to model.

/// The paper's FAIR bytes per IPv4 packet on a 5-hop path (§7.4).
pub const PAPER_V4_OVERHEAD: f64 = 13.0;
/// The paper's FAIR bytes per IPv6 packet on a 5-hop path (§7.4).
pub const PAPER_V6_OVERHEAD: f64 = 15.0;
/// Bytes of an expanded AES-128 key schedule (11 round keys).
pub const AES128_SCHEDULE: u64 = 176;
/// Bytes of K_SD per channel.
pub const KSD_BYTES: u64 = 16;

/// A traffic mix: rate and per-family mean packet sizes and packet shares.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TrafficMix {
    /// Line rate in bit/s (decimal, 10^9 per Gbps, as the traces report it).
    pub rate_bps: f64,
    /// Mean IPv4 packet size in bytes.
    pub v4_mean: f64,
    /// Share of packets that are IPv4 (0..1).
    pub v4_share: f64,
    /// Mean IPv6 packet size in bytes.
    pub v6_mean: f64,
    /// Share of packets that are IPv6 (0..1).
    pub v6_share: f64,
}

impl TrafficMix {
    /// The paper's three 1-hour CAIDA OC-192 traces (§7.4).
    pub const CAIDA: [TrafficMix; 3] = [
        TrafficMix {
            rate_bps: 1.63e9,
            v4_mean: 747.0,
            v4_share: 0.9995,
            v6_mean: 130.0,
            v6_share: 0.0005,
        },
        TrafficMix {
            rate_bps: 3.72e9,
            v4_mean: 920.0,
            v4_share: 0.9996,
            v6_mean: 342.0,
            v6_share: 0.0004,
        },
        TrafficMix {
            rate_bps: 3.57e9,
            v4_mean: 736.0,
            v4_share: 0.9988,
            v6_mean: 155.0,
            v6_share: 0.0012,
        },
    ];

    /// Mean original packet size in bytes (packet-weighted).
    pub fn mean_size(&self) -> f64 {
        self.v4_share * self.v4_mean + self.v6_share * self.v6_mean
    }

    /// Mean per-packet value of `(v4, v6)` weighted by packet shares.
    fn per_packet(&self, v4: f64, v6: f64) -> f64 {
        self.v4_share * v4 + self.v6_share * v6
    }

    /// Bandwidth overhead `overhead / (original + overhead)` (a fraction).
    pub fn bandwidth_overhead(&self, v4_overhead: f64, v6_overhead: f64) -> f64 {
        let o = self.per_packet(v4_overhead, v6_overhead);
        o / (self.mean_size() + o)
    }

    /// Packets in `secs` seconds: `rate · secs / 8 / mean size`.
    pub fn packets(&self, secs: f64) -> f64 {
        self.rate_bps * secs / 8.0 / self.mean_size()
    }

    /// Destination header-store bytes for `secs` seconds, storing the IP
    /// header plus the FAIR header per packet (`v4_hdr`, `v6_hdr` bytes each).
    pub fn header_storage(&self, secs: f64, v4_hdr: f64, v6_hdr: f64) -> f64 {
        self.packets(secs) * self.per_packet(v4_hdr, v6_hdr)
    }
}

/// Source storage for K_SD of `channels` channels (§7.5: 16 B each).
pub const fn source_key_storage(channels: u64) -> u64 {
    channels * KSD_BYTES
}

/// Transit storage for local keys kept for `retain_s` seconds with a
/// rotation `period_s`, `schedules` expanded schedules of `schedule_bytes`
/// per key (§7.5: 12 h, 1 min, 2 × 176 B).
pub const fn transit_key_storage(
    retain_s: u64,
    period_s: u64,
    schedules: u64,
    schedule_bytes: u64,
) -> u64 {
    retain_s / period_s * schedules * schedule_bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: f64 = (1u64 << 30) as f64;

    fn round(x: f64, digits: i32) -> f64 {
        let p = 10f64.powi(digits);
        (x * p).round() / p
    }

    #[test]
    fn bm_6_overhead_reproduces_section_7_4() {
        // The IPv4 overhead is the layout this crate allocates for m = 4.
        let (_, v4) = crate::wire::layout(packet::fair::Carrier::Ipv4, 4, 0).unwrap();
        assert_eq!(v4 as f64, PAPER_V4_OVERHEAD);
        let pct = |o4: f64, o6: f64, d: i32| -> Vec<f64> {
            TrafficMix::CAIDA
                .iter()
                .map(|m| round(100.0 * m.bandwidth_overhead(o4, o6), d))
                .collect()
        };
        assert_eq!(pct(13.0, 15.0, 3), vec![1.711, 1.394, 1.738]);
        // The paper's printed values (two decimals) and the A9 alternatives.
        assert_eq!(pct(13.0, 15.0, 2), vec![1.71, 1.39, 1.74]);
        assert_eq!(pct(12.0, 14.0, 2), vec![1.58, 1.29, 1.61]);
        assert_eq!(pct(11.0, 13.0, 2), vec![1.45, 1.18, 1.47]);
        // "the bandwidth overhead does not exceed 2%".
        assert!(pct(13.0, 15.0, 6).iter().all(|p| *p < 2.0));
    }

    #[test]
    fn bm_6_storage_reproduces_section_7_5() {
        let gib: Vec<f64> = TrafficMix::CAIDA
            .iter()
            .map(|m| round(m.header_storage(3600.0, 20.0 + 13.0, 40.0 + 15.0) / GIB, 1))
            .collect();
        assert_eq!(gib, vec![30.2, 56.0, 67.2]);
        assert_eq!(source_key_storage(1), 16);
        assert_eq!(source_key_storage(50_000), 800_000);
        assert_eq!(transit_key_storage(12 * 3600, 60, 2, AES128_SCHEDULE), 253_440);
        // §7.6: the 413-byte mean at 1 Gbps (2^30 b/s) is 324,982 pps; 10^9 gives 302,663.
        assert_eq!((((1u64 << 30) as f64) / (413.0 * 8.0)) as u64, 324_982);
        assert_eq!((1e9 / (413.0 * 8.0)) as u64, 302_663);
    }
}
