//! SCION forwarding: the `scion-forward` stage kind, whose configuration is
//! the protocol crate's [`ScionForwardConfig`] (the AS's hop-field key and
//! the interface → port bindings; both change in place on a running stage),
//! and the `scion` template (`templates.rs`), whose SCION half the `epic-z`
//! and `sibra` templates share.

use ::scion::{ScionForward, ScionForwardConfig};
use pipeline::{PacketBuf, Stage};
use runtime::templates::Templates;
use runtime::{BuildContext, ConfigError, Registry};

mod templates;

// The SCION half of the `epic-z` and `sibra` templates.
#[cfg_attr(not(any(feature = "zlane", feature = "sibra")), allow(unused_imports))]
pub(crate) use crate::params::ia;
#[cfg_attr(not(feature = "zlane"), allow(unused_imports))]
pub(crate) use templates::build_flow;
#[cfg_attr(not(any(feature = "zlane", feature = "sibra")), allow(unused_imports))]
pub(crate) use templates::{finish, payload_len};
pub use templates::{scion_template, ScionTemplateParams};

/// Registers `scion-forward`.
pub fn register<B: PacketBuf + Send + 'static>(r: &mut Registry<B>) {
    r.stage_checked("scion-forward", check_ports, build_forward);
}

/// Registers the `scion` template.
pub fn templates(t: &mut Templates) {
    t.add("scion", scion_template);
}

/// Checks that every port a `scion-forward` table binds is one of the router's.
fn check_ports(c: &ScionForwardConfig, ctx: &BuildContext) -> Result<(), ConfigError> {
    for (i, b) in c.interfaces.iter().enumerate() {
        ctx.check_port(&format!("interfaces[{i}].port"), b.port)?;
    }
    Ok(())
}

fn build_forward<B: PacketBuf>(
    c: &ScionForwardConfig,
    _ctx: &BuildContext,
) -> Result<Box<dyn Stage<B>>, ConfigError> {
    Ok(Box::new(ScionForward::from_config(c)))
}

#[cfg(test)]
mod tests {
    use pipeline::{Batch, Now, Pipeline, Reconfigured, Verdict};
    use runtime::templates::{tag_for, TemplateCtx};
    use runtime::Catalog;

    use super::*;

    const KEY: &str = "000102030405060708090a0b0c0d0e0f";

    fn ctx() -> BuildContext {
        BuildContext { worker: 0, workers: 1, ports: vec![0, 1, 2] }
    }

    fn registry() -> Registry<Vec<u8>> {
        Registry::with::<crate::All>()
    }

    fn table(text: &str) -> toml::Table {
        toml::from_str(text).unwrap()
    }

    fn forward_table(bindings: &str) -> toml::Table {
        table(&format!("key = \"{KEY}\"\ninterfaces = [{bindings}]"))
    }

    #[test]
    fn scion_forward_errors_name_their_key() {
        let r = registry();
        let ok = forward_table("{ ifid = 2, port = 0 }, { ifid = 3, port = 1 }");
        assert_eq!(r.build_stage("scion-forward", &ctx(), &ok).unwrap().name(), "scion-forward");
        for (t, key) in [
            (table("key = \"0011\"\ninterfaces = []"), "key"),
            (forward_table("{ ifid = 2, port = 3 }"), "interfaces[0].port"),
            (forward_table("{ ifid = 0, port = 0 }"), "interfaces[0].ifid"),
            (forward_table("{ ifid = 2, port = 0 }, { ifid = 2, port = 1 }"), "interfaces[1].ifid"),
            (forward_table("{ ifid = 2, port = 0 }, { ifid = 3, port = 0 }"), "interfaces[1].port"),
            (table(&format!("key = \"{KEY}\"")), "interfaces"),
        ] {
            let e = r.build_stage("scion-forward", &ctx(), &t).err().expect("refused");
            assert_eq!(e.key, key, "{e}");
        }
    }

    /// Template packets through `parse` + `scion-forward`; returns the verdicts.
    fn run(p: &mut Pipeline<Vec<u8>>, frames: &[Vec<u8>]) -> Vec<Verdict> {
        let mut b = Batch::new();
        for f in frames {
            b.push(f.clone(), 0).unwrap();
        }
        let unix_s = TemplateCtx::new(1, tag_for(0)).unix_s;
        p.run(&mut b, Now::from_unix_ns(unix_s * 1_000_000_000 + 1));
        let mut v = Vec::new();
        b.drain(|_, m| v.push(m.verdict));
        v
    }

    #[test]
    fn live_change_moves_the_egress_port_and_keeps_counters() {
        let r = registry();
        let frames = scion_template(
            &table(&format!("fwd_key = \"{KEY}\"\nsrc_ia = \"1-ff00:0:111\"")),
            &TemplateCtx::new(4, tag_for(0)),
        )
        .unwrap();
        let before = forward_table("{ ifid = 2, port = 0 }, { ifid = 3, port = 1 }");
        let mut p = Pipeline::new();
        p.push(r.build_stage("parse", &ctx(), &toml::Table::new()).unwrap());
        p.push(r.build_stage("scion-forward", &ctx(), &before).unwrap());
        let fwd = |port| Verdict::Forward { port, class: pipeline::Class(0) };
        assert_eq!(run(&mut p, &frames), vec![fwd(1); 4]);

        let now = Now::from_unix_ns(0);
        let stage = p.stage_mut(1).unwrap();
        let same = r.parse_stage("scion-forward", &ctx(), &before).unwrap();
        assert_eq!(stage.reconfigure(&*same, now), Ok(Reconfigured::Unchanged));
        let moved = forward_table("{ ifid = 2, port = 0 }, { ifid = 3, port = 2 }");
        let moved = r.parse_stage("scion-forward", &ctx(), &moved).unwrap();
        assert_eq!(stage.reconfigure(&*moved, now), Ok(Reconfigured::APPLIED));
        assert_eq!(run(&mut p, &frames), vec![fwd(2); 4]);
        // Interfaces swapped: arriving on port 0 now means interface 3, not
        // the ingress interface 2 the hop field names.
        let swapped = forward_table("{ ifid = 2, port = 1 }, { ifid = 3, port = 0 }");
        let swapped = r.parse_stage("scion-forward", &ctx(), &swapped).unwrap();
        let stage = p.stage_mut(1).unwrap();
        assert_eq!(stage.reconfigure(&*swapped, now), Ok(Reconfigured::APPLIED));
        assert_eq!(
            run(&mut p, &frames),
            vec![Verdict::Drop(pipeline::DropReason::WrongInterface); 4]
        );
        let mut forwarded = 0;
        p.stage_mut(1).unwrap().named_counters(&mut |n, v| {
            if n == "forwarded" {
                forwarded = v;
            }
        });
        assert_eq!(forwarded, 8, "counters survive the changes");
    }
}
