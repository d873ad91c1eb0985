//! A packet-at-a-time model of SCION's processing of a standard path, the
//! reference the burst tests compare the `ScionForward` stage with: locate,
//! check the path, MAC the current hop, verify it, chain the SegID, check
//! the ingress interface, cross over at a segment end, decide the exit,
//! advance. It reads the packet again at every step and uses only the
//! per-hop building blocks (`process_hop`, `current_input`,
//! `ScionPath::advance`).

use packet::scion::{PathType, ScionHeader, ScionPath};
use packet::Ia;
use pipeline::{Class, DropReason, Verdict};
use scion::{current_input, locate, process_hop, Exit, Forwarder, INTERNAL_IF};

/// What the model decides for one packet, and how it leaves the path.
pub fn model(fwd: &Forwarder, pkt: &mut [u8], port: u16, now: u64) -> Option<Verdict> {
    let loc = match locate(pkt, 0) {
        Ok(l) => l,
        Err(r) => return Some(Verdict::Drop(r)),
    };
    if !matches!(loc.path_type, PathType::SCION | PathType::EPIC_Z | PathType::EPIC_HP) {
        return None;
    }
    let h = ScionHeader::new_unchecked(&pkt[..]);
    let (src, dst) = (h.src_ia(), h.dst_ia());
    let ingress_if = fwd.interfaces().ingress_if(port);
    let path = &mut pkt[loc.scion.clone()];
    let verdict = match model_path(fwd, path, ingress_if, now, src, dst) {
        Ok(exit) => Verdict::Forward { port: exit.port(), class: Class::default() },
        Err(r) => Verdict::Drop(r),
    };
    Some(verdict)
}

/// The per-hop rules on the path bytes, one step at a time.
pub fn model_path(
    fwd: &Forwarder,
    path: &mut [u8],
    ingress_if: u16,
    now: u64,
    src: Ia,
    dst: Ia,
) -> Result<Exit, DropReason> {
    let cfg = fwd.config();
    let len = path.len();
    let mut p = ScionPath::new_checked(&mut path[..])?;
    if p.path_len() != len {
        return Err(DropReason::Malformed);
    }
    let mac = fwd.key().mac(&current_input(&p));
    let dst_local = match cfg.local_ia {
        Some(local) => {
            let (src_local, dst_local) = (src == local, dst == local);
            if ingress_if == INTERNAL_IF {
                if dst_local {
                    return Err(DropReason::NoRoute);
                }
                if p.curr_hf() == 0 && !src_local {
                    return Err(DropReason::Policy);
                }
            } else {
                if src_local {
                    return Err(DropReason::Policy);
                }
                if p.is_last_hop() != dst_local {
                    return Err(DropReason::NoRoute);
                }
            }
            Some(dst_local)
        }
        None => None,
    };
    let mut out = process_hop(&mut p, &mac, now)?;
    if cfg.check_ingress && ingress_if != INTERNAL_IF && out.ingress_if != ingress_if {
        return Err(DropReason::WrongInterface);
    }
    let lens = p.seg_lens();
    let seg_end: usize =
        lens[..=usize::from(p.curr_inf()).min(2)].iter().map(|&l| usize::from(l)).sum();
    if !p.is_last_hop() && !out.peering && usize::from(p.curr_hf()) + 1 == seg_end {
        p.advance()?;
        let mac = fwd.key().mac(&current_input(&p));
        out = process_hop(&mut p, &mac, now)?;
    }
    let local = dst_local.unwrap_or(out.egress_if == INTERNAL_IF);
    if local {
        if !p.is_last_hop() {
            return Err(DropReason::NoRoute);
        }
        Ok(Exit::Local { port: cfg.local_port })
    } else {
        if p.is_last_hop() {
            return Err(DropReason::NoRoute);
        }
        let port = fwd.interfaces().port(out.egress_if).ok_or(DropReason::NoRoute)?;
        p.advance()?;
        Ok(Exit::Interface { ifid: out.egress_if, port })
    }
}
