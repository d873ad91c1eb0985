//! Keys, paths, packets, gateways and the router configuration shared by the
//! `zlane` bench and the `zlane_profile` example (included into both with
//! `#[path]`, so the two always measure the same workloads).

use drkey::{Epoch, Protocol, SecretValue, DEFAULT_GRACE_NS};
use mac::{Cmac, Key};
use packet::scion::{AddrHdrRepr, RawHostAddr};
use packet::{HostAddr, Ia};
use pipeline::{Batch, Now};
use scion::build::{self, HopSpec, ScionPathBuf};
use scion::ForwardingKey;
use zlane::config::{GatewayConfig, Origin, Rate, RateConfig, RouterConfig};
use zlane::gateway::GatewayOutcome;
use zlane::keys::{RouterKeys, EPIC_Z_PROTOCOL};
use zlane::Gateway;

/// The clock every workload starts at (Unix nanoseconds).
pub const T0: u64 = 1_700_000_000_000_000_000;
/// The source AS of every packet.
pub const SRC: Ia = Ia::new(1, 10);
/// The guaranteed rate of [`SRC`] at the router, and the hosts' rate at the
/// gateway: far above what the workloads send, so every packet is compliant.
pub const RATE_BPS: u64 = 6_000_000_000;

/// The (generic) secret value every on-path AS uses.
pub fn sv() -> SecretValue {
    let epoch = Epoch::new(1_699_990_000, 1_700_076_400).unwrap();
    SecretValue::derive(b"bench master secret", Protocol::GENERIC, epoch).unwrap()
}

/// Router DRKey state: a per-worker level-1 cache over the installed SV.
pub fn router_keys() -> RouterKeys {
    let mut k = RouterKeys::new(4096, 0x5eed, DEFAULT_GRACE_NS);
    k.install(sv()).unwrap();
    k
}

/// A path over `hops` hop fields (one AS each).
pub fn path(hops: usize) -> ScionPathBuf {
    let specs: Vec<HopSpec> = (0..hops as u16)
        .map(|i| HopSpec {
            key: ForwardingKey::new(&Key::from([i as u8 + 1; 16])),
            cons_ingress: i,
            cons_egress: i + 1,
            exp_time: 255,
        })
        .collect();
    build::path(&[build::segment(true, 7, 1_700_000_000, &specs)]).unwrap()
}

/// An EPIC-Z packet from `host` over `path` with host-level HVFs (keys
/// derived with `drkey`'s uncached API, generic level 2, protocol 64) and a
/// 100-byte payload.
pub fn host_packet(path: &ScionPathBuf, host: HostAddr) -> Vec<u8> {
    let raw = RawHostAddr::from(host);
    let hdr = AddrHdrRepr {
        qos: 0,
        flow_id: 1,
        next_hdr: 17,
        payload_len: 0,
        dst_ia: Ia::new(1, 99),
        src_ia: SRC,
        dst_host: raw,
        src_host: raw,
    };
    let k = Cmac::new(&sv().level1(SRC).generic_as_host(Protocol(EPIC_Z_PROTOCOL), &host));
    let keys: Vec<_> = (0..path.num_hf()).map(|_| &k).collect();
    zlane::host::epic_packet(&hdr, path, &keys, 0, 0, 1, &[0; 100]).unwrap()
}

/// A packet of host 10.0.0.1 over `path`, and a gateway that knows every
/// on-path AS key, grants each host `host_rate` bit/s and already holds
/// `active_hosts` other hosts in its table.
pub fn gateway(path: &ScionPathBuf, host_rate: u64, active_hosts: u32) -> (Vec<u8>, Gateway) {
    let pkt = host_packet(path, HostAddr::V4([10, 0, 0, 1]));
    let s = sv();
    let mut gw = Gateway::new(GatewayConfig {
        host_capacity: 32_000,
        default_rate_bps: host_rate,
        burst: 65_535,
        ..Default::default()
    })
    .unwrap();
    for (i, h) in path.hops().iter().enumerate() {
        let ia = Ia::new(1, 100 + i as u64);
        gw.set_as_key(ia, &s.level1_key(SRC));
        gw.register_hop(h.mac, ia);
    }
    for n in 0..active_hosts {
        let mut p = pkt.clone();
        let mut h = packet::scion::ScionHeader::new_unchecked(&mut p[..]);
        h.src_host_bytes_mut().copy_from_slice(&(0x0b00_0000 + n).to_be_bytes());
        let _ = gw.process(&mut p, Now::from_unix_ns(T0));
    }
    (pkt, gw)
}

/// A burst of 32 packets over `path` from the 32 hosts 10.0.`net`.0..31.
pub fn host_burst(path: &ScionPathBuf, net: u8) -> Batch<Vec<u8>> {
    let mut batch = Batch::new();
    for h in 0..32u8 {
        batch.push(host_packet(path, HostAddr::V4([10, 0, net, h])), 0).unwrap();
    }
    batch
}

/// [`host_burst`] passed through `gw`, which must authorize every packet:
/// what the router receives.
pub fn authorized_burst(gw: &mut Gateway, path: &ScionPathBuf, net: u8) -> Batch<Vec<u8>> {
    let mut batch = host_burst(path, net);
    for i in 0..batch.len() {
        let out = gw.process(batch.buf_mut(i), Now::from_unix_ns(T0));
        assert_eq!(out, Ok(GatewayOutcome::Authorized));
    }
    batch
}

/// The router (AS 1-100): [`SRC`] guaranteed [`RATE_BPS`] of 100 Gbit/s.
pub fn router_config() -> RouterConfig {
    RouterConfig {
        local_ia: Ia::new(1, 100),
        capacity_bps: 100_000_000_000,
        rates: vec![RateConfig { origin: Origin::As(SRC), rate: Some(Rate::Bps(RATE_BPS)) }],
        ..Default::default()
    }
}

/// On-CPU nanoseconds of this thread so far (Linux), if available.
pub fn cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}
