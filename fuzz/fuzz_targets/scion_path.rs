//! Standard SCION path (PathType 1): every accessor, setters, repr round trip.
#![no_main]

use std::sync::OnceLock;

use fuzz::template_input as input;
use libfuzzer_sys::fuzz_target;
use packet::scion::{HopFieldRepr, ScionPath, ScionPathRepr};

fn templates() -> &'static [Vec<u8>] {
    static T: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    T.get_or_init(|| {
        [([2u8, 3, 0], 1u8, 3u8), ([1, 1, 1], 2, 2), ([21, 21, 21], 0, 20)]
            .iter()
            .map(|&(seg_lens, curr_inf, curr_hf)| {
                let hops =
                    vec![HopFieldRepr::default(); seg_lens.iter().map(|&s| usize::from(s)).sum()];
                let r = ScionPathRepr {
                    curr_inf,
                    curr_hf,
                    seg_lens,
                    hop_fields: (&hops[..]).into(),
                    ..Default::default()
                };
                let mut b = vec![0u8; r.buffer_len()];
                r.emit(&mut ScionPath::new_unchecked(&mut b[..])).expect("template");
                b
            })
            .collect()
    })
}

fuzz_target!(|raw: &[u8]| {
    let owned = input(raw, templates());
    let data = &owned[..];
    let Ok(p) = ScionPath::new_checked(data) else { return };
    let _ = (p.meta_raw(), p.meta_rsv(), p.seg_lens(), p.path_len(), p.is_last_hop());
    let ci = p.current_info();
    let _ = (ci.peering(), ci.cons_dir(), ci.seg_id(), ci.timestamp());
    let h = p.current_hop();
    let _ = (h.ingress_alert(), h.egress_alert(), h.cons_ingress(), h.cons_egress(), h.mac());
    let _ = h.expiry_unix_ns(ci.timestamp());
    for i in 0..=p.num_hf() {
        let _ = (p.hop_field(i).map(|f| f.exp_time()), p.segment_of(i));
    }
    for i in 0..=3 {
        let _ = (p.info_field(i).map(|f| f.flags()), p.seg_len(i));
    }
    // Walking to the end keeps the path valid at every step.
    let mut buf = data.to_vec();
    let mut m = ScionPath::new_checked(&mut buf[..]).expect("same bytes");
    while m.advance().is_ok() {
        m.current_info_mut().set_seg_id(0x5555);
    }
    assert!(m.is_last_hop());
    ScionPath::new_checked(&buf[..]).expect("advanced path still valid");

    let r = ScionPathRepr::parse(&p).expect("checked view parses");
    let mut out = vec![0u8; r.buffer_len()];
    r.emit(&mut ScionPath::new_unchecked(&mut out[..])).expect("emit");
    let back =
        ScionPathRepr::parse(&ScionPath::new_checked(&out[..]).expect("check")).expect("reparse");
    assert_eq!(back, r);
});
