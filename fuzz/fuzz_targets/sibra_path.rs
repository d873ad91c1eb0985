//! SIBRA path (PathType 200): every accessor, repr round trip.
#![no_main]

use std::sync::OnceLock;

use fuzz::template_input as input;
use libfuzzer_sys::fuzz_target;
use packet::scion::sibra::{FLAG_ACCEPTED, FLAG_REQUEST, FLAG_SETUP, FLAG_STEADY};
use packet::scion::{BlockRepr, PathIds, RequestRepr, SibraPath, SibraPathRepr};

fn templates() -> &'static [Vec<u8>] {
    static T: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    T.get_or_init(|| {
        let setup = PathIds::EphemeralSetup { ephemeral: [1; 16], steady: [[2; 8]; 3] };
        [
            (FLAG_SETUP | FLAG_REQUEST | FLAG_ACCEPTED, setup, [2u8, 3, 0], true),
            (FLAG_STEADY, PathIds::Steady([3; 8]), [4, 0, 0], false),
            (0, PathIds::Ephemeral([4; 16]), [2, 2, 2], false),
        ]
        .iter()
        .map(|&(flags, ids, hops, req)| {
            let mut r = SibraPathRepr {
                flags,
                curr_hop: 1,
                ids,
                num_blocks: hops.iter().filter(|&&h| h != 0).count() as u8,
                blocks: [BlockRepr::default(); 3],
                request: req.then(RequestRepr::default),
            };
            for (b, h) in r.blocks.iter_mut().zip(hops) {
                b.hops = h;
            }
            let mut b = vec![0u8; r.buffer_len()];
            r.emit(&mut SibraPath::new_unchecked(&mut b[..])).expect("template");
            b
        })
        .collect()
    })
}

fuzz_target!(|raw: &[u8]| {
    let owned = input(raw, templates());
    let data = &owned[..];
    let Ok(p) = SibraPath::new_checked(data) else { return };
    let _ = (p.setup(), p.request(), p.accepted(), p.error(), p.steady(), p.forward());
    let _ = (p.version(), p.curr_hop(), p.num_blocks(), p.total_hops(), p.ids_len(), p.path_len());
    let _ = (p.path_ids().len(), p.steady_id(), p.ephemeral_id(), p.active_block());
    let a = p.active_sof().expect("checked path has an active SOF");
    let _ = (a.ingress(), a.egress(), a.mac(), a.bytes());
    for k in 0..4 {
        let _ = (p.setup_steady_id(k), p.block_ids(k));
        if let Some(r) = p.block_info(k) {
            let _ = (
                r.exp_tick(),
                r.bw_fwd(),
                r.bw_rev(),
                r.index(),
                r.fwd(),
                r.fail_hop(),
                r.mac_input(),
            );
        }
        for j in 0..=usize::from(p.block_hops(k)) {
            let _ = p.block_sof(k, j).map(|s| s.bytes());
        }
    }
    for i in 0..=p.total_hops() {
        let _ = (p.sof(i), p.locate(i), p.request_slot(i), p.request_sof(i), p.request_offer(i));
    }
    let _ = p.request_info().map(|r| r.mac_input());
    let r = SibraPathRepr::parse(&p).expect("checked view parses");
    let mut out = vec![0u8; r.buffer_len()];
    r.emit(&mut SibraPath::new_unchecked(&mut out[..])).expect("emit");
    let back =
        SibraPathRepr::parse(&SibraPath::new_checked(&out[..]).expect("check")).expect("reparse");
    assert_eq!(back, r);
});
