//! EPIC-HP path (PathType 3): every accessor, setters, repr round trip, and
//! the HVF input SCION's routers MAC (never panics, whatever the path).
#![no_main]

use std::sync::OnceLock;

use fuzz::template_input as input;
use libfuzzer_sys::fuzz_target;
use packet::scion::{
    EpicClock, EpicHpPath, EpicHpPathRepr, HopFieldRepr, HvfOrigin, PktId, ScionPathRepr,
};
use packet::Ia;

fn templates() -> &'static [Vec<u8>] {
    static T: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    T.get_or_init(|| {
        [([2u8, 3, 0], 1u8, 3u8), ([1, 0, 0], 0, 0), ([3, 3, 3], 2, 7)]
            .iter()
            .map(|&(seg_lens, curr_inf, curr_hf)| {
                let n: usize = seg_lens.iter().map(|&s| usize::from(s)).sum();
                let hops = vec![HopFieldRepr { exp_time: 63, ..Default::default() }; n];
                let path = ScionPathRepr {
                    curr_inf,
                    curr_hf,
                    seg_lens,
                    hop_fields: (&hops[..]).into(),
                    ..Default::default()
                };
                let r = EpicHpPathRepr {
                    pkt_id: PktId { ts: 1_000, core_id: 2, counter: 3 },
                    phvf: [1; 4],
                    lhvf: [2; 4],
                    path,
                };
                let mut b = vec![0u8; r.buffer_len()];
                r.emit(&mut EpicHpPath::new_unchecked(&mut b[..])).expect("template");
                b
            })
            .collect()
    })
}

fuzz_target!(|raw: &[u8]| {
    let owned = input(raw, templates());
    let data = &owned[..];
    let Ok(p) = EpicHpPath::new_checked(data) else { return };
    let _ = (p.epic_ts(), p.counter(), p.phvf(), p.lhvf(), p.path_len());
    let id = p.pkt_id();
    assert_eq!(id.to_bytes(), p.pkt_id_bytes());
    assert_eq!(PktId::from_counter_word(id.ts, id.counter_word()), id);
    let s = p.scion_path();
    let _ = (s.current_info().timestamp(), s.current_hop().mac(), p.current_hvf());
    let info0 = s.info_field(0).expect("a checked path has an info field").timestamp();
    let _ = EpicClock::EPIC_HP.packet_time_ns(info0, p.epic_ts());
    let origin = HvfOrigin {
        src_ia: Ia::from_u64(u64::from(id.counter_word())),
        src_type_len: data[0] & 0x0f,
        src_host: [data[1]; 16],
        payload_len: u16::from(data[2]),
    };
    let inp = origin.epic_hp_input(&p.pkt_id_bytes(), info0);
    assert!(matches!(inp.blocks().len(), 2 | 3));

    // Setters keep the path valid; walking to the end too.
    let mut buf = data.to_vec();
    let mut m = EpicHpPath::new_checked(&mut buf[..]).expect("same bytes");
    m.set_phvf(p.lhvf());
    m.set_lhvf(p.phvf());
    m.set_pkt_id(&PktId { ts: !id.ts, ..id });
    let mut sp = m.scion_path_mut();
    while sp.advance().is_ok() {}
    let after = EpicHpPath::new_checked(&buf[..]).expect("advanced path still valid");
    assert_eq!(after.current_hvf(), Some(p.phvf()), "the last hop checks the LHVF");

    let r = EpicHpPathRepr::parse(&p).expect("checked view parses");
    let mut out = vec![0u8; r.buffer_len()];
    r.emit(&mut EpicHpPath::new_unchecked(&mut out[..])).expect("emit");
    let back =
        EpicHpPathRepr::parse(&EpicHpPath::new_checked(&out[..]).expect("check")).expect("reparse");
    assert_eq!(back, r);
});
