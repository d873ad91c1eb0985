//! EPIC-Z path (PathType 201): every accessor, Q/HVF setters, repr round trip
//! (with and without the NumHVF byte).
#![no_main]

use std::sync::OnceLock;

use fuzz::template_input as input;
use libfuzzer_sys::fuzz_target;
use packet::scion::{EpicPath, EpicPathRepr, HopFieldRepr, ScionPathRepr};

fn templates() -> &'static [Vec<u8>] {
    static T: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    T.get_or_init(|| {
        [([2u8, 3, 0], 1u8, 3u8), ([1, 0, 0], 0, 0), ([3, 3, 3], 2, 8)]
            .iter()
            .map(|&(seg_lens, curr_inf, curr_hf)| {
                let n: usize = seg_lens.iter().map(|&s| usize::from(s)).sum();
                let hops = vec![HopFieldRepr::default(); n];
                let hvfs = vec![[0u8; 4]; n];
                let path = ScionPathRepr {
                    curr_inf,
                    curr_hf,
                    seg_lens,
                    hop_fields: (&hops[..]).into(),
                    ..Default::default()
                };
                let r =
                    EpicPathRepr { path, q: true, hvfs: (&hvfs[..]).into(), ..Default::default() };
                let mut b = vec![0u8; r.buffer_len()];
                r.emit(&mut EpicPath::new_unchecked(&mut b[..])).expect("template");
                b
            })
            .collect()
    })
}

fuzz_target!(|raw: &[u8]| {
    let owned = input(raw, templates());
    let data = &owned[..];
    let _ = EpicPath::new_unchecked(data).num_hvf();
    let Ok(p) = EpicPath::new_checked(data) else { return };
    let _ = (p.ts_rel(), p.core_id(), p.counter(), p.pkt_id(), p.flags(), p.q(), p.rsv());
    let _ = p.num_hvf_field();
    let _ = (p.hvfs().len(), p.path_offset());
    for i in 0..=p.num_hvf() {
        let _ = p.hvf(i);
    }
    assert!(p.current_hvf().is_some());
    let s = p.scion_path();
    let _ = (s.current_info().timestamp(), s.current_hop().mac());

    let mut buf = data.to_vec();
    let mut m = EpicPath::new_checked(&mut buf[..]).expect("same bytes");
    m.set_q(!p.q());
    m.set_hvf(0, [1, 2, 3, 4]).expect("at least one hop");
    assert!(m.set_hvf(m.num_hvf(), [0; 4]).is_err());
    assert_eq!(m.hvf(0), Some([1, 2, 3, 4]));
    assert_eq!(m.q(), !p.q());

    let r = EpicPathRepr::parse(&p).expect("checked view parses");
    let mut out = vec![0u8; r.buffer_len()];
    // Emit always writes NumHVF (byte 9), so every checked path re-emits and
    // reads back identically, whether the input carried the count or not.
    r.emit(&mut EpicPath::new_unchecked(&mut out[..])).expect("valid path emits");
    assert_eq!(usize::from(out[9]), r.path.num_hf());
    let back =
        EpicPathRepr::parse(&EpicPath::new_checked(&out[..]).expect("check")).expect("reparse");
    assert_eq!(back, r);
});
