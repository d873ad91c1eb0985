//! The `fair` template: IPv4/UDP packets stamped by the source AS.

use std::net::Ipv4Addr;
use std::sync::atomic::AtomicU32;
use std::sync::Arc;

use fair::source::{FairSource, SourceChannel, SourceConfig};
use pipeline::{Batch, Now, Stage, Verdict};
use runtime::config::typed;
use runtime::templates::{TemplateCtx, TAG_LEN};
use runtime::ConfigError;
use serde::Deserialize;

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
    /// The source-destination key K_SD, 32 hex digits (only the destination checks it).
    pub k_sd: mac::Key,
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

/// `fair`: IPv4/UDP packets stamped by a [`FairSource`] of the source AS
/// (FAIR header with `m` slots, timestamp and ICV under `k_sd`) at the
/// backend's start time (minus `age_s`).
pub fn fair_template(params: &toml::Table, ctx: &TemplateCtx) -> Result<Vec<Vec<u8>>, ConfigError> {
    let p: FairTemplateParams = typed(params)?;
    let min = 42 + TAG_LEN;
    // The FAIR header comes on top of `size`; the frame must still fit 1514.
    if p.size < min || p.size > 1514 {
        return Err(ConfigError::at("size", format!("must be in {min}..=1514")));
    }
    let unix_ns = ctx.unix_s.saturating_sub(p.age_s).saturating_mul(1_000_000_000);
    let now = Now { mono_ns: 0, unix_ns };
    // One channel for every destination, never out of tokens.
    let mut src_stage = FairSource::new(SourceConfig::default());
    let seq = Arc::new(AtomicU32::new(0));
    let (cir, cbs) = (u64::MAX / 4, u64::MAX / 4);
    let ch = SourceChannel::new(0, p.dst_asn, &p.k_sd, p.m, cir, cbs, 0, seq);
    let ch = src_stage.add_channel(ch);
    src_stage.route(std::net::IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0, ch);
    let mut payload = vec![0u8; p.size - 42];
    let n = payload.len();
    payload[n - TAG_LEN..].copy_from_slice(&ctx.tag);
    let mut out = Vec::with_capacity(ctx.flows as usize);
    for i in 0..ctx.flows {
        let src = Ipv4Addr::from(u32::from(p.src).wrapping_add(i));
        let port = 1024 + (i % 60000) as u16;
        let frame = runtime::templates::ipv4_udp_frame(&payload, src, p.dst, port, 5000);
        let mut b: Batch<Vec<u8>> = Batch::new();
        b.push(frame, 0).map_err(|_| ConfigError::at("", "batch full"))?;
        src_stage.process(&mut b, now);
        if let Verdict::Drop(r) = b.meta(0).verdict {
            return Err(ConfigError::at("", format!("FAIR source dropped the packet: {r:?}")));
        }
        let mut f = Vec::new();
        b.drain(|buf, _| f = buf);
        if f.len() > 1514 {
            return Err(ConfigError::at(
                "size",
                format!("with the FAIR header the frame is {} bytes (max 1514)", f.len()),
            ));
        }
        out.push(f);
    }
    Ok(out)
}
