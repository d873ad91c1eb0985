//! `fair-transit` and `fair-source` stages and the `fair` template (feature `fair`).
//!
//! **Decision (data keys from configuration):** a FAIR transit AS rotates its
//! data key every Δ_K seconds. The configuration holds one 16-byte master
//! key; the key of epoch `e` is `CMAC(master, "fair-data-key" ‖ e)` (64-bit
//! big-endian), installed for every epoch of `[keys_from, keys_until)`
//! (Unix seconds). A deployment would push fresh random keys from its
//! control plane (`FairTransit::set_keys`); the derivation only makes the
//! configuration reproducible, and verifiers (protest handling) can
//! re-derive the same keys from the master.

use std::net::Ipv4Addr;
use std::sync::Arc;

use serde::Deserialize;

use fair::crypto::MarkBinding;
use fair::keys::KeyRing;
use fair::transit::{FairTransit, MalformedAction, OverflowAction, TransitConfig};
use pipeline::PacketBuf;

use super::{config_err, key16};
use crate::config::{typed, ConfigError};
use crate::registry::Registry;

/// Slot-MAC binding.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BindingParam {
    /// The paper's input (default).
    #[default]
    Paper,
    /// Also bind the top 32 bits of the addresses.
    Bound,
}

/// Action on a header without a free slot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OverflowParam {
    /// Drop (default).
    #[default]
    Drop,
    /// Forward unmarked.
    Forward,
}

/// `fair-transit` parameters.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FairTransitParams {
    /// Master data key, hex (32 digits); epoch keys are derived from it.
    pub data_key: String,
    /// Data-key rotation period Δ_K, seconds (≥ 8, default 60).
    #[serde(default = "d_period")]
    pub key_period_s: u64,
    /// First second covered by installed keys (Unix).
    pub keys_from: u64,
    /// End of the covered time (Unix, exclusive); at most 100 000 epochs.
    pub keys_until: u64,
    /// Slot-MAC binding: `paper` (default) or `bound`.
    #[serde(default)]
    pub binding: BindingParam,
    /// No free slot: `drop` (default) or `forward`.
    #[serde(default)]
    pub slot_overflow: OverflowParam,
    /// Forward malformed FAIR headers unmarked instead of dropping them.
    #[serde(default)]
    pub forward_malformed: bool,
    /// IPv4 protocol / IPv6 next header of FAIR (default 253).
    pub protocol: Option<u8>,
    /// Nonce generator seed of worker 0 (worker w uses seed + w).
    #[serde(default = "d_seed")]
    pub seed: u64,
}

fn d_period() -> u64 {
    fair::keys::DELTA_K
}
fn d_seed() -> u64 {
    0x0fa1_5eed
}

/// The key of `epoch` derived from `master` (see the module docs).
pub fn epoch_key(master: &mac::Key, epoch: u64) -> mac::Key {
    let mut msg = [0u8; 21];
    msg[..13].copy_from_slice(b"fair-data-key");
    msg[13..].copy_from_slice(&epoch.to_be_bytes());
    mac::Key::from(mac::Cmac::new(master).mac(&msg))
}

impl FairTransitParams {
    fn key_ring(&self) -> Result<KeyRing, ConfigError> {
        let master = mac::Key::from(key16("data_key", &self.data_key)?);
        let mut ring = KeyRing::data(self.key_period_s, fair::keys::T_M)
            .map_err(|e| config_err("key_period_s", e))?;
        if self.keys_until <= self.keys_from {
            return Err(ConfigError::at("keys_until", "must be after keys_from"));
        }
        let (first, last) = (ring.epoch_of(self.keys_from), ring.epoch_of(self.keys_until - 1));
        if last - first >= 100_000 {
            return Err(ConfigError::at("keys_until", "covers more than 100000 epochs"));
        }
        let binding = match self.binding {
            BindingParam::Paper => MarkBinding::Paper,
            BindingParam::Bound => MarkBinding::Bound,
        };
        for e in first..=last {
            ring.install(e, &epoch_key(&master, e), binding)
                .map_err(|x| config_err("keys_from", x))?;
        }
        Ok(ring)
    }
}

/// Registers `fair-transit`.
pub fn register<B: PacketBuf + Send + 'static>(r: &mut Registry<B>) {
    r.stage("fair-transit", |ctx, p| {
        let c: FairTransitParams = typed(p)?;
        let mut cfg = TransitConfig {
            overflow: match c.slot_overflow {
                OverflowParam::Drop => OverflowAction::Drop,
                OverflowParam::Forward => OverflowAction::Forward,
            },
            malformed: if c.forward_malformed {
                MalformedAction::ForwardUnmarked
            } else {
                MalformedAction::Drop
            },
            ..TransitConfig::default()
        };
        if let Some(code) = c.protocol {
            cfg.codes = fair::common::Codes { v4: code, v6: code };
        }
        let seed = c.seed.wrapping_add(ctx.worker as u64);
        Ok(Box::new(FairTransit::new(cfg, Arc::new(c.key_ring()?), seed)))
    });
    register_source(r);
}

/// One FAIR channel of `fair-source`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelParams {
    /// Destination prefix routed into this channel, `addr/len`.
    pub prefix: String,
    /// Destination ASN.
    #[serde(default)]
    pub dst_asn: u32,
    /// K_SD, hex (32 digits).
    pub k_sd: String,
    /// Cooperating transit ASes to reserve slots for.
    pub m: u8,
    /// Committed rate of the channel, bit/s (the sending policy's CIR).
    pub cir_bps: u64,
    /// Committed burst, bytes.
    pub cbs_bytes: u64,
}

/// `fair-source` parameters.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FairSourceParams {
    /// Channels (longest prefix wins).
    pub channels: Vec<ChannelParams>,
    /// Network-layer MTU of the egress (default 1500).
    pub mtu: Option<u16>,
    /// Spare IPv4 slots beyond `m`.
    #[serde(default)]
    pub v4_spare: usize,
    /// Stamp and forward packets over the channel's rate instead of dropping them.
    #[serde(default)]
    pub forward_nonconforming: bool,
}

fn register_source<B: PacketBuf + Send + 'static>(r: &mut Registry<B>) {
    use fair::source::{FairSource, NonConforming, SourceChannel, SourceConfig};
    r.stage("fair-source", |ctx, p| {
        let c: FairSourceParams = typed(p)?;
        // (ts, seqno) must be unique per channel: the sequence counter is
        // shared by the workers of one stage, which per-worker constructors
        // cannot do. One worker (or RSS steering each channel to one) it is.
        if ctx.workers > 1 {
            return Err(ConfigError::at("", "fair-source supports one worker"));
        }
        let d = SourceConfig::default();
        let mut st = FairSource::new(SourceConfig {
            mtu: c.mtu.unwrap_or(d.mtu),
            v4_spare: c.v4_spare,
            nonconforming: if c.forward_nonconforming {
                NonConforming::Forward
            } else {
                NonConforming::Drop
            },
            ..d
        });
        for (i, ch) in c.channels.iter().enumerate() {
            let at = |k: &str| format!("channels[{i}].{k}");
            let k_sd = mac::Key::from(key16(&at("k_sd"), &ch.k_sd)?);
            if ch.cbs_bytes < 1518 {
                return Err(ConfigError::at(at("cbs_bytes"), "must hold a full frame"));
            }
            let (addr, len) = ch
                .prefix
                .split_once('/')
                .and_then(|(a, l)| {
                    Some((a.parse::<std::net::IpAddr>().ok()?, l.parse::<u8>().ok()?))
                })
                .filter(|(a, l)| *l <= if a.is_ipv4() { 32 } else { 128 })
                .ok_or_else(|| ConfigError::at(at("prefix"), "not addr/len"))?;
            let seq = Arc::new(std::sync::atomic::AtomicU32::new(0));
            let idx = st.add_channel(SourceChannel::new(
                i as u32,
                ch.dst_asn,
                &k_sd,
                ch.m,
                ch.cir_bps / 8,
                ch.cbs_bytes,
                0,
                seq,
            ));
            st.route(addr, len, idx);
        }
        Ok(Box::new(st))
    });
}

fn d_src() -> Ipv4Addr {
    Ipv4Addr::new(10, 1, 0, 1)
}
fn d_dst() -> Ipv4Addr {
    Ipv4Addr::new(10, 2, 0, 1)
}
fn d_size() -> usize {
    200
}
fn d_m() -> u8 {
    2
}

/// `fair` template parameters.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FairTemplateParams {
    /// Source address (flows vary the low bits).
    #[serde(default = "d_src")]
    pub src: Ipv4Addr,
    /// Destination address.
    #[serde(default = "d_dst")]
    pub dst: Ipv4Addr,
    /// Frame length including Ethernet, before the FAIR header is inserted.
    #[serde(default = "d_size")]
    pub size: usize,
    /// The source-destination key K_SD, hex (only the destination checks it).
    pub k_sd: String,
    /// Cooperating transit ASes the header has slots for.
    #[serde(default = "d_m")]
    pub m: u8,
    /// Destination ASN.
    #[serde(default)]
    pub dst_asn: u32,
    /// Stamp the packets this many seconds before the backend's start (more
    /// than 3 makes them stale at every transit).
    #[serde(default)]
    pub age_s: u64,
}

/// `fair`: IPv4/UDP packets stamped by a `fair::source::FairSource` of the
/// source AS (FAIR header with `m` slots, timestamp and ICV under `k_sd`) at
/// the backend's start time (minus `age_s`).
pub fn fair_template(
    params: &toml::Table,
    ctx: &crate::templates::TemplateCtx,
) -> Result<Vec<Vec<u8>>, ConfigError> {
    use crate::templates::TAG_LEN;
    use fair::source::{FairSource, SourceChannel, SourceConfig};
    use pipeline::{Batch, Now, Stage, Verdict};
    let p: FairTemplateParams = typed(params)?;
    let min = 42 + TAG_LEN;
    if p.size < min || p.size > 1400 {
        return Err(ConfigError::at("size", format!("must be in {min}..=1400")));
    }
    let k_sd = mac::Key::from(key16("k_sd", &p.k_sd)?);
    let unix_ns = ctx.unix_s.saturating_sub(p.age_s).saturating_mul(1_000_000_000);
    let now = Now { mono_ns: 0, unix_ns };
    let mut src_stage = FairSource::new(SourceConfig::default());
    let seq = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let ch = src_stage.add_channel(SourceChannel::new(
        0,
        p.dst_asn,
        &k_sd,
        p.m,
        u64::MAX / 4,
        u64::MAX / 4,
        0,
        seq,
    ));
    src_stage.route(std::net::IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0, ch);
    let mut payload = vec![0u8; p.size - 42];
    let n = payload.len();
    payload[n - TAG_LEN..].copy_from_slice(&ctx.tag);
    let mut out = Vec::with_capacity(ctx.flows as usize);
    for i in 0..ctx.flows {
        let src = Ipv4Addr::from(u32::from(p.src).wrapping_add(i));
        let frame =
            crate::templates::ipv4_udp_frame(&payload, src, p.dst, 1024 + (i % 60000) as u16, 5000);
        let mut b: Batch<Vec<u8>> = Batch::new();
        b.push(frame, 0).map_err(|_| ConfigError::at("", "batch full"))?;
        src_stage.process(&mut b, now);
        if let Verdict::Drop(r) = b.meta(0).verdict {
            return Err(ConfigError::at("", format!("FAIR source dropped the packet: {r:?}")));
        }
        let mut f = Vec::new();
        b.drain(|buf, _| f = buf);
        out.push(f);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use crate::registry::{BuildContext, Registry};
    use crate::templates::{tag_for, TemplateCtx, Templates};
    use packet::fair::{Carrier, Fair};
    use pipeline::{Batch, DropReason, Now, Verdict};

    const STAGE: &str = "data_key = \"000102030405060708090a0b0c0d0e0f\"\n\
        keys_from = 1767225000\nkeys_until = 1767312000";

    fn run(frames: Vec<Vec<u8>>) -> (Vec<Verdict>, Vec<Vec<u8>>) {
        let ctx = BuildContext { worker: 0, workers: 1, ports: vec![0, 1] };
        let r = Registry::<Vec<u8>>::builtin();
        let t: toml::Table = toml::from_str(STAGE).unwrap();
        let mut st = r.build_stage("fair-transit", &ctx, &t).unwrap();
        let mut b = Batch::new();
        for f in frames {
            b.push(f, 0).unwrap();
        }
        st.process(&mut b, Now::from_unix_ns(crate::synthetic::VIRTUAL_UNIX_START_NS));
        let v = (0..b.len()).map(|i| b.meta(i).verdict).collect();
        let mut out = Vec::new();
        b.drain(|buf, _| out.push(buf));
        (v, out)
    }

    fn frames(extra: &str) -> Vec<Vec<u8>> {
        let t: toml::Table =
            toml::from_str(&format!("k_sd = \"0f0e0d0c0b0a09080706050403020100\"\n{extra}"))
                .unwrap();
        Templates::builtin().build("fair", &t, &TemplateCtx::new(3, tag_for(0))).unwrap()
    }

    #[test]
    fn transit_marks_fresh_packets_and_drops_stale_ones() {
        let fresh = frames("m = 2");
        // IPv4 protocol 253: the source inserted the FAIR header.
        assert_eq!(fresh[0][14 + 9], 253);
        let (v, out) = run(fresh.clone());
        assert!(v.iter().all(|v| !matches!(v, Verdict::Drop(_))), "{v:?}");
        for (a, b) in fresh.iter().zip(&out) {
            assert_eq!(a.len(), b.len());
            assert_ne!(a, b, "the transit AS wrote its mark");
            let h = Fair::new_checked(&b[34..], Carrier::Ipv4).unwrap();
            let h0 = Fair::new_checked(&a[34..], Carrier::Ipv4).unwrap();
            assert_eq!(h.next_as(), h0.next_as() + 1);
        }
        let (v, _) = run(frames("age_s = 10"));
        assert_eq!(v, vec![Verdict::Drop(DropReason::Expired); 3]);
        let (v, _) = run(frames("m = 0"));
        assert_eq!(v, vec![Verdict::Drop(DropReason::Policy); 3]);
    }

    #[test]
    fn fair_source_stage_stamps_like_the_template() {
        let ctx = BuildContext { worker: 0, workers: 1, ports: vec![0, 1] };
        let r = Registry::<Vec<u8>>::builtin();
        let t: toml::Table = toml::from_str(
            "channels = [{ prefix = \"10.2.0.0/16\", k_sd = \"0f0e0d0c0b0a09080706050403020100\", \
             m = 2, cir_bps = 1000000000, cbs_bytes = 100000 }]",
        )
        .unwrap();
        let mut st = r.build_stage("fair-source", &ctx, &t).unwrap();
        let want = frames("m = 2");
        let mut b = Batch::new();
        for i in 0..3u32 {
            let plain = crate::templates::ipv4_udp_frame(
                &want[0][want[0].len() - 158..],
                std::net::Ipv4Addr::new(10, 1, 0, 1 + i as u8),
                std::net::Ipv4Addr::new(10, 2, 0, 1),
                1024 + i as u16,
                5000,
            );
            b.push(plain, 0).unwrap();
        }
        st.process(&mut b, Now::from_unix_ns(crate::synthetic::VIRTUAL_UNIX_START_NS));
        let mut out = Vec::new();
        b.drain(|buf, _| out.push(buf));
        assert_eq!(out, want, "same header, timestamp, sequence numbers and ICVs");
        let two = BuildContext { worker: 0, workers: 2, ports: vec![0] };
        assert!(r.build_stage("fair-source", &two, &t).is_err());
    }

    #[test]
    fn params_are_validated() {
        let ctx = BuildContext { worker: 0, workers: 1, ports: vec![0] };
        let r = Registry::<Vec<u8>>::builtin();
        let key = |extra: &str| {
            let t: toml::Table = toml::from_str(&format!("{STAGE}\n{extra}")).unwrap();
            r.build_stage("fair-transit", &ctx, &t).err().unwrap().key
        };
        assert_eq!(key("key_period_s = 4"), "key_period_s");
        assert_eq!(key("binding = \"loose\""), "binding");
        let t: toml::Table =
            toml::from_str(&STAGE.replace("keys_until = 1767312000", "keys_until = 1")).unwrap();
        assert_eq!(r.build_stage("fair-transit", &ctx, &t).err().unwrap().key, "keys_until");
    }
}
