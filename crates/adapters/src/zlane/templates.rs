//! The `epic-z` template: EPIC-Z packets with host-level HVFs (what a
//! sending host makes, `zlane::host::epic_packet`), optionally through the
//! source AS's gateway (Q set, AS-level HVFs: eligible for class G).

use serde::Deserialize;

use ::scion::build::ScionPathBuf;
use packet::Ia;
use runtime::config::typed;
use runtime::templates::{TemplateCtx, Templates};
use runtime::ConfigError;
use zlane::gateway::GatewayOutcome;
use zlane::keys::{SvKeys, EPIC_Z_PROTOCOL};
use zlane::{Gateway, GatewayConfig};

use crate::scion::{build_flow, finish, payload_len, ScionTemplateParams};

/// `epic-z` parameters: the SCION path (see `scion`) plus the router's
/// DRKey secret value, from which the host derives its HVF keys.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EpicTemplateParams {
    /// The SCION part.
    #[serde(flatten)]
    pub scion: ScionTemplateParams,
    /// The router's DRKey secret value (as in `zlane-classify`), 32 hex digits.
    pub sv: mac::Key,
    /// The router's IA (as in `zlane-classify`), for `via_gateway`.
    #[serde(default = "d_local_ia")]
    pub local_ia: Ia,
    /// Compute the HVFs with a wrong key (forged EPIC-Z traffic).
    #[serde(default)]
    pub forge_hvf: bool,
    /// Send through the source AS's Z-Lane gateway (`zlane::Gateway`):
    /// sets Q and replaces the router's HVF by the AS-level one, which is
    /// what makes the packets eligible for the guaranteed class G.
    #[serde(default)]
    pub via_gateway: bool,
}

fn d_local_ia() -> Ia {
    Ia::new(1, 0xff00_0000_0110)
}

/// Registers the `epic-z` template.
pub fn templates(t: &mut Templates) {
    t.add("epic-z", epic_template);
}

/// `epic-z`: EPIC-Z packets with host-level HVFs, stamped with the
/// backend's start time (fresh for the 2 s freshness window; virtual pacing
/// keeps runs inside it).
pub fn epic_template(params: &toml::Table, ctx: &TemplateCtx) -> Result<Vec<Vec<u8>>, ConfigError> {
    // serde_path_to_error cannot see through `flatten`; deny unknown keys anyway.
    let p: EpicTemplateParams = typed(params)?;
    let sv = SvKeys::new(&p.sv, 0, u64::MAX);
    let wrong = mac::Cmac::new(&mac::Key::from([0x5a; 16]));
    let mut out = Vec::with_capacity(ctx.flows as usize);
    for i in 0..ctx.flows {
        let b = build_flow(&p.scion, ctx.unix_s, i)?;
        let k = sv
            .derive(b.src_ia)
            .try_host_cmac(EPIC_Z_PROTOCOL, &b.hdr.src_host)
            .ok_or_else(|| ConfigError::at("src_host", "no DRKey for this host type"))?;
        let keys = vec![if p.forge_hvf { &wrong } else { &k }; b.path.num_hf()];
        let packet = |payload: &[u8]| {
            zlane::host::epic_packet(&b.hdr, &b.path, &keys, 0, 0, i, payload)
                .ok_or_else(|| ConfigError::at("", "cannot build EPIC-Z packet"))
        };
        let payload = vec![0u8; payload_len(p.scion.size, packet(&[])?.len())?];
        let mut pkt = packet(&payload)?;
        if p.via_gateway {
            through_gateway(&p, &sv, (b.src_ia, &b.path), &mut pkt, ctx.unix_s)?;
        }
        out.push(finish(&p.scion, pkt, &ctx.tag, i));
    }
    Ok(out)
}

/// What the gateway of the source AS sends: it knows K_{router AS → source
/// AS} and the router's hop field; one packet per host is within its rate.
fn through_gateway(
    p: &EpicTemplateParams,
    sv: &SvKeys,
    (src_ia, path): (Ia, &ScionPathBuf),
    pkt: &mut [u8],
    unix_s: u64,
) -> Result<(), ConfigError> {
    let mut gw = Gateway::new(GatewayConfig { host_capacity: 16, ..Default::default() })?;
    gw.set_as_key(p.local_ia, &mac::Key::from(sv.derive_key(src_ia)));
    // Every hop of the generated path carries the router's MAC key.
    for h in path.hops() {
        gw.register_hop(h.mac, p.local_ia);
    }
    let now = pipeline::Now::from_unix_ns(unix_s.saturating_mul(1_000_000_000));
    match gw.process(pkt, now) {
        Ok(GatewayOutcome::Authorized) => Ok(()),
        Ok(out) => Err(ConfigError::at("via_gateway", format!("gateway: {out:?}"))),
        Err(r) => Err(ConfigError::at("via_gateway", format!("gateway dropped the packet: {r:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipeline::{Batch, DropReason, Now, Verdict};
    use runtime::registry::BuildContext;
    use runtime::templates::tag_for;
    use runtime::Registry;

    const FWD_KEY: &str = "000102030405060708090a0b0c0d0e0f";
    const SV: &str = "f0e0d0c0b0a090807060504030201000";

    /// σ of the hops of the `epic-z` template's path at the virtual start
    /// time, and the router AS's K_{110,111}.
    fn material() -> (Vec<[u8; 6]>, mac::Key) {
        let t: toml::Table =
            toml::from_str(&format!("fwd_key = \"{FWD_KEY}\"\nsrc_ia = \"1-ff00:0:111\"")).unwrap();
        let p: ScionTemplateParams = typed(&t).unwrap();
        let unix_s = runtime::synthetic::VIRTUAL_UNIX_START_NS / 1_000_000_000;
        let b = build_flow(&p, unix_s, 0).unwrap();
        let macs = b.path.hops().iter().map(|h| h.mac).collect();
        let sv = SvKeys::new(&mac::Key::from_hex(SV).unwrap(), 0, u64::MAX);
        (macs, mac::Key::from(sv.derive_key(b.src_ia)))
    }

    fn config_stage() -> toml::Table {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/zlane-gateway.toml");
        let cfg = runtime::config::load_file(std::path::Path::new(path)).unwrap();
        let s = cfg.pipeline.iter().find(|s| s.kind == "zlane-gateway").unwrap();
        s.params.clone()
    }

    #[test]
    fn example_config_holds_the_templates_key_material() {
        let (macs, key) = material();
        let c: GatewayConfig = typed(&config_stage()).unwrap();
        assert_eq!(c.as_keys[0].key, key);
        assert_eq!(c.hops.iter().map(|h| h.mac).collect::<Vec<_>>(), macs);
    }

    #[test]
    fn gateway_output_is_what_the_source_as_gateway_would_send() {
        let tpl = |extra: &str| {
            let t: toml::Table = toml::from_str(&format!(
                "src_ia = \"1-ff00:0:111\"\nsrc_host = \"10.0.0.1\"\nfwd_key = \"{FWD_KEY}\"\nsv = \"{SV}\"\n{extra}"
            ))
            .unwrap();
            Templates::with::<crate::All>()
                .build("epic-z", &t, &TemplateCtx::new(4, tag_for(0)))
                .unwrap()
        };
        let host = tpl("");
        let want = tpl("via_gateway = true");
        let ctx = BuildContext { worker: 0, workers: 1, ports: vec![0, 1] };
        let r = Registry::<Vec<u8>>::with::<crate::All>();
        let mut parse = r.build_stage("parse", &ctx, &toml::Table::new()).unwrap();
        let mut gw = r.build_stage("zlane-gateway", &ctx, &config_stage()).unwrap();
        let mut b = Batch::new();
        for f in &host {
            b.push(f.clone(), 0).unwrap();
        }
        // 28 more from host 10.0.0.1 at once (29 × 158 B): over its 3000-byte burst.
        for _ in 0..28 {
            b.push(host[0].clone(), 0).unwrap();
        }
        let now = Now::from_unix_ns(runtime::synthetic::VIRTUAL_UNIX_START_NS);
        parse.process(&mut b, now);
        gw.process(&mut b, now);
        let mut out = Vec::new();
        let verdicts: Vec<Verdict> = (0..b.len()).map(|i| b.meta(i).verdict).collect();
        b.drain(|buf, _| out.push(buf));
        // Q set and AS-level HVFs: the frame is byte for byte what the epic-z
        // template's gateway makes; the stage patched the underlay UDP
        // checksum incrementally to the value the template recomputes.
        for (o, w) in out[..4].iter().zip(&want) {
            assert_eq!(o, w);
        }
        assert_ne!(host[0], want[0]);
        assert!(verdicts.contains(&Verdict::Drop(DropReason::OverRate)));
    }
}
