//! The `flowpolice` traffic template: FlowPolice requests with solved
//! puzzles, or regular packets carrying a capability, for the synthetic
//! backend, `router gen` and `trafgen`.

use std::net::Ipv4Addr;

use serde::Deserialize;

use flowpolice::host::{ipv4_packet, Sender};
use flowpolice::puzzle::{PuzzlePolicy, SeedChain};
use runtime::config::typed;
use runtime::templates::{TemplateCtx, TAG_LEN};
use runtime::ConfigError;

/// Which FlowPolice packets a `flowpolice` template builds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FpKind {
    /// Requests with a puzzle solved at `level` (default).
    #[default]
    Request,
    /// Regular packets carrying a capability.
    Regular,
}

/// `flowpolice` template parameters. Flow `i` goes from `src + i` to
/// `dst + i` (flows are keyed by destination unless the server is protected).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FpTemplateParams {
    /// `request` (default) or `regular`.
    pub kind: FpKind,
    /// First source address (default 10.1.0.1).
    pub src: Ipv4Addr,
    /// First destination address (default 10.2.0.1).
    pub dst: Ipv4Addr,
    /// Frame length including Ethernet (default 200).
    pub size: usize,
    /// Requests: the router's seed chain (as in its stage).
    pub seeds: Option<SeedChain>,
    /// Requests: puzzle epoch length (as the stage's `puzzle.epoch_ms`).
    pub epoch_ms: Option<u64>,
    /// Requests: puzzle level solved (default 4).
    pub level: u8,
    /// Requests: send a wrong nonce instead of the solution.
    pub forge_puzzle: bool,
    /// Regular: the router's capability key (as in its stage), hex.
    pub capability_key: Option<mac::Key>,
    /// Regular: the capability's timestamp, i.e. the stage's clock in ms
    /// (mod 2^32) when the flow's request created it: monotonic ms by
    /// default (the synthetic backend's virtual clock starts at 0, so
    /// requests sent in the first millisecond give 0), Unix ms for a stage
    /// with `clock = "unix"`.
    pub cap_ts_ms: u32,
    /// Regular: the capability's packet id (1 = the first one issued).
    pub p_id: u16,
    /// Regular: corrupt the capability MAC (forged capability).
    pub forge_cap: bool,
}

impl Default for FpTemplateParams {
    fn default() -> Self {
        FpTemplateParams {
            kind: FpKind::Request,
            src: Ipv4Addr::new(10, 1, 0, 1),
            dst: Ipv4Addr::new(10, 2, 0, 1),
            size: 200,
            seeds: None,
            epoch_ms: None,
            level: 4,
            forge_puzzle: false,
            capability_key: None,
            cap_ts_ms: 0,
            p_id: 1,
            forge_cap: false,
        }
    }
}

fn ethernet(ip: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(14 + ip.len());
    f.extend_from_slice(&[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00]);
    f.extend_from_slice(ip);
    f
}

/// `flowpolice`: FlowPolice requests (puzzles solved with
/// `flowpolice::puzzle::solve` on the router's seed chain, shim from
/// `host::Sender::write_request`) or regular packets (a capability stamped
/// with the router's key, carried by `host::Sender::write_regular`), in
/// Ethernet/IPv4 (protocol 254) via `host::ipv4_packet`.
pub fn flowpolice_template(
    params: &toml::Table,
    ctx: &TemplateCtx,
) -> Result<Vec<Vec<u8>>, ConfigError> {
    let p: FpTemplateParams = typed(params)?;
    let shim_len = match p.kind {
        FpKind::Request => packet::flowpolice::REQUEST_LEN,
        FpKind::Regular => packet::flowpolice::REGULAR_LEN,
    };
    let min = 14 + 20 + shim_len + TAG_LEN;
    if p.size < min || p.size > 1514 {
        return Err(ConfigError::at("size", format!("must be in {min}..=1514")));
    }
    let mut payload = vec![0u8; p.size - 14 - 20 - shim_len];
    let n = payload.len();
    payload[n - TAG_LEN..].copy_from_slice(&ctx.tag);
    let mut out = Vec::with_capacity(ctx.flows as usize);
    for i in 0..ctx.flows {
        let src = Ipv4Addr::from(u32::from(p.src).wrapping_add(i));
        let dst = Ipv4Addr::from(u32::from(p.dst).wrapping_add(i));
        let mut shim = vec![0u8; shim_len];
        match p.kind {
            FpKind::Request => request(&p, ctx, src, dst, &mut shim)?,
            FpKind::Regular => regular(&p, dst, &mut shim)?,
        }
        out.push(ethernet(&ipv4_packet(src, dst, &shim, &payload)));
    }
    Ok(out)
}

/// A request's shim: the puzzle of the current epoch solved (or forged).
fn request(
    p: &FpTemplateParams,
    ctx: &TemplateCtx,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    shim: &mut [u8],
) -> Result<(), ConfigError> {
    let chain = p.seeds.as_ref().ok_or_else(|| ConfigError::at("seeds", "requests need it"))?;
    let policy = PuzzlePolicy {
        epoch_ms: p.epoch_ms.unwrap_or(PuzzlePolicy::default().epoch_ms).max(1),
        ..PuzzlePolicy::default()
    };
    let epoch = policy.epoch_at(ctx.unix_s.saturating_mul(1000));
    let seed = chain.seed(epoch).ok_or_else(|| {
        ConfigError::at("seeds", format!("the chain does not cover epoch {epoch}"))
    })?;
    if p.level > 24 {
        return Err(ConfigError::at("level", "templates solve levels up to 24"));
    }
    let (s, d) = (src.octets(), dst.octets());
    let mut nonce = flowpolice::puzzle::solve(seed, &s, &d, p.level, 0)
        .ok_or_else(|| ConfigError::at("level", "no solution"))?;
    if p.forge_puzzle {
        // The next nonce that does not solve it.
        nonce = (nonce + 1..)
            .find(|n| !flowpolice::puzzle::verify(seed, &s, &d, *n, p.level.max(1)))
            .unwrap_or(0);
    }
    let puzzle = flowpolice::Puzzle { epoch, level: p.level, nonce };
    Sender::write_request(shim, 17, puzzle)
        .ok_or_else(|| ConfigError::at("", "cannot write request"))?;
    Ok(())
}

/// A regular shim carrying the capability the router issued to the flow.
fn regular(p: &FpTemplateParams, dst: Ipv4Addr, shim: &mut [u8]) -> Result<(), ConfigError> {
    let key = p
        .capability_key
        .as_ref()
        .ok_or_else(|| ConfigError::at("capability_key", "regular packets need it"))?;
    // Flows of unprotected servers are keyed by destination.
    let mut cap =
        flowpolice::CapabilityKey::new(key).stamp(p.p_id, u64::from(u32::from(dst)), p.cap_ts_ms);
    if p.forge_cap {
        cap.mac[0] ^= 0x5a;
    }
    let mut sender = Sender::new();
    sender.on_returned(cap);
    sender
        .write_regular(shim, 17)
        .ok_or_else(|| ConfigError::at("", "cannot write regular shim"))?;
    Ok(())
}
