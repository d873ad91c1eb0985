//! The `sibra` template: SIBRA data packets on one ephemeral reservation per
//! flow, verifiable by a `sibra-transit` stage with the same SOF key; or
//! steady or ephemeral setup requests for `sibra-control`.

use serde::Deserialize;

use runtime::config::typed;
use runtime::templates::TemplateCtx;
use runtime::ConfigError;
use sibra::token::SofKeys;
use sibra::{BwClass, EphemeralId, ResvIdx, ResvInfo, Tick, EPHEMERAL_HORIZON};

use crate::params::config_err;
use crate::scion::{finish, ia, payload_len, ScionTemplateParams};

fn d_class() -> u8 {
    24
}

fn d_steady_suffix() -> u16 {
    1
}

/// `sibra` template parameters: the SCION addressing of `scion` (its
/// `fwd_key` is unused: SIBRA paths carry SOFs, not hop fields) plus the
/// router's SOF key.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SibraTemplateParams {
    /// Addresses, interfaces, size (as `scion`; set `fwd_key` to anything).
    #[serde(flatten)]
    pub scion: ScionTemplateParams,
    /// The router's SOF key (as in its `sibra-transit` stage), 32 hex digits.
    pub sof_key: mac::Key,
    /// Bandwidth class of each flow's reservation, both ways (24 ≈ 46 Mbit/s).
    #[serde(default = "d_class")]
    pub bw_class: u8,
    /// Corrupt the router's SOF MAC (forged token).
    #[serde(default)]
    pub forge_sof: bool,
    /// What to send: `data` (the default), `steady-setup` requests (one
    /// steady reservation `(src AS, flow + 1)` per flow, at the router's hop,
    /// for admission by `sibra-control`) or `ephemeral-setup` requests (one
    /// ephemeral reservation per flow over the steady path
    /// `(src AS, steady_suffix)`, for its request channel and admission).
    #[serde(default)]
    pub kind: SibraPacketKind,
    /// The steady path `ephemeral-setup` requests travel over: its suffix
    /// (default 1, the first `steady-setup` flow's); its block has class
    /// `bw_class` and a SOF under `sof_key` at the router's hop.
    #[serde(default = "d_steady_suffix")]
    pub steady_suffix: u16,
}

/// The packets of a `sibra` traffic group.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SibraPacketKind {
    /// Data packets on ephemeral reservations.
    #[default]
    Data,
    /// Steady reservation setup requests.
    SteadySetup,
    /// Ephemeral reservation setup requests over one steady path.
    EphemeralSetup,
}

/// `sibra`: data packets on one ephemeral reservation per flow over a
/// three-hop block `(0,1) (ingress,egress) (4,0)`, positioned at the router
/// (hop 1), SOFs issued with `sibra::token::issue_chain` (the router's hop
/// with `sof_key`) and the path built by `sibra::host::ephemeral_data`.
/// Reservations expire `EPHEMERAL_HORIZON` ticks (16 s) after the backend's
/// start time. Setup requests (`kind`) take the same hops: steady ones
/// (`sibra::host::steady_setup`) ask for 40 ticks, ephemeral ones
/// (`sibra::host::ephemeral_setup`) for `EPHEMERAL_HORIZON` over a steady
/// block valid for 40 ticks.
pub fn sibra_template(
    params: &toml::Table,
    ctx: &TemplateCtx,
) -> Result<Vec<Vec<u8>>, ConfigError> {
    let p: SibraTemplateParams = typed(params)?;
    let s = &p.scion;
    let router = SofKeys::new(&p.sof_key);
    // The neighbours' keys do not matter to this router: only its own SOF is checked.
    let (up, down) =
        (SofKeys::new(&mac::Key::from([0x11; 16])), SofKeys::new(&mac::Key::from([0x33; 16])));
    let class = BwClass::new(p.bw_class).map_err(|e| config_err("bw_class", e))?;
    let info = ResvInfo {
        exp_tick: Tick::from_unix_secs(ctx.unix_s).plus(EPHEMERAL_HORIZON),
        bw_fwd: class,
        bw_rev: class,
        index: ResvIdx::from_low_bits(0),
        fwd: false,
        fail_hop: 0,
    };
    let hops = [(0, 1), (s.ingress, s.egress), (4, 0)];
    let (src, dst) = (ia("src_ia", &s.src_ia)?, ia("dst_ia", &s.dst_ia)?);
    // Flow `i`'s packet on `path`, as it reaches the router: the first hop
    // has been traversed.
    let at_router =
        |path: &packet::scion::sibra::SibraPathRepr, i: u32| -> Result<Vec<u8>, ConfigError> {
            let host = u32::from_be_bytes(s.src_host.octets()).wrapping_add(i).to_be_bytes();
            let build = |payload: &[u8]| {
                sibra::host::packet(src, host, dst, [10, 9, 0, 1], path, payload)
                    .map_err(|e| config_err("", e))
            };
            let hdr_len = build(&[])?.len();
            let mut pkt = build(&vec![0u8; payload_len(s.size, hdr_len)?])?;
            sibra::host::sibra_path_mut(&mut pkt)
                .and_then(|mut sp| sp.set_curr_hop(1).map_err(Into::into))
                .map_err(|e| config_err("", e))?;
            Ok(finish(s, pkt, &ctx.tag, i))
        };
    let mut out = Vec::with_capacity(ctx.flows as usize);
    for i in 0..ctx.flows {
        let path = match p.kind {
            SibraPacketKind::SteadySetup => {
                let req =
                    sibra::host::request_info(Tick::from_unix_secs(ctx.unix_s), 40, class, class);
                let sid = sibra::SteadyId::new(src.asn(), (i % 0xffff + 1) as u16);
                sibra::host::steady_setup(sid, &hops, &req)
            }
            SibraPacketKind::EphemeralSetup => {
                let start = Tick::from_unix_secs(ctx.unix_s);
                let sid = sibra::SteadyId::new(src.asn(), p.steady_suffix);
                let sinfo =
                    ResvInfo { fwd: false, ..sibra::host::request_info(start, 40, class, class) };
                let sofs = sibra::token::issue_chain(&[&up, &router, &down], &hops, &sinfo, &sid.0);
                let block = sibra::host::ActiveBlock { info: sinfo, sofs };
                let req = sibra::host::request_info(start, EPHEMERAL_HORIZON, class, class);
                let mut rnd = [0u8; 10];
                rnd[6..].copy_from_slice(&i.to_be_bytes());
                let eid = EphemeralId::new(src.asn(), rnd);
                sibra::host::ephemeral_setup(eid, &[(sid, &block)], &req)
            }
            SibraPacketKind::Data => {
                let mut rnd = [0u8; 10];
                rnd[6..].copy_from_slice(&i.to_be_bytes());
                let eid = EphemeralId::new(src.asn(), rnd);
                let mut sofs =
                    sibra::token::issue_chain(&[&up, &router, &down], &hops, &info, &eid.0);
                if p.forge_sof {
                    sofs[1].mac[0] ^= 0x5a;
                }
                sibra::host::ephemeral_data(eid, &sibra::host::ActiveBlock { info, sofs })
            }
        };
        out.push(at_router(&path.map_err(|e| config_err("", e))?, i)?);
    }
    Ok(out)
}
