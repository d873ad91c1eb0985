//! Whole SCION packet: header, path by type, payload/L4 walk, repr round trip.
#![no_main]

use std::sync::OnceLock;

use fuzz::template_input as input;
use libfuzzer_sys::fuzz_target;
use packet::scion::sibra::{FLAG_ACCEPTED, FLAG_REQUEST, FLAG_SETUP};
use packet::scion::{
    parse, AddrHdrRepr, BlockRepr, EpicHpPathRepr, EpicPathRepr, HopFieldRepr, Path, PathIds,
    PathRepr, PktId, RawHostAddr, RequestRepr, ScionPathRepr, ScionRepr, SibraPathRepr,
};
use packet::{Error, HostAddr, Ia};

fn templates() -> &'static [Vec<u8>] {
    static T: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    T.get_or_init(|| {
        let hops: [HopFieldRepr; 5] = core::array::from_fn(|i| HopFieldRepr {
            cons_ingress: i as u16,
            mac: [i as u8; 6],
            ..Default::default()
        });
        let mut path = ScionPathRepr {
            curr_inf: 1,
            curr_hf: 3,
            seg_lens: [2, 3, 0],
            hop_fields: (&hops).into(),
            ..Default::default()
        };
        path.info_fields[1].cons_dir = true;
        let mut sibra = SibraPathRepr {
            flags: FLAG_SETUP | FLAG_REQUEST | FLAG_ACCEPTED,
            curr_hop: 2,
            ids: PathIds::EphemeralSetup { ephemeral: [1; 16], steady: [[2; 8]; 3] },
            num_blocks: 2,
            blocks: [BlockRepr::default(); 3],
            request: Some(RequestRepr::default()),
        };
        sibra.blocks[0].hops = 2;
        sibra.blocks[1].hops = 3;
        let epic = EpicPathRepr { path, hvfs: (&[[7; 4]; 5]).into(), ..Default::default() };
        let hp = EpicHpPathRepr {
            pkt_id: PktId { ts: 9, core_id: 1, counter: 2 },
            path,
            ..Default::default()
        };
        let mut out = Vec::new();
        for p in [
            PathRepr::Scion(path),
            PathRepr::Sibra((&sibra).into()),
            PathRepr::EpicZ(epic),
            PathRepr::EpicHp(hp),
            PathRepr::Empty,
        ] {
            let r = ScionRepr {
                hdr: AddrHdrRepr {
                    qos: 0,
                    flow_id: 1,
                    next_hdr: 200,
                    payload_len: 16,
                    dst_ia: Ia::new(1, 2),
                    src_ia: Ia::new(3, 4),
                    dst_host: RawHostAddr::from(HostAddr::V4([10, 0, 0, 1])),
                    src_host: RawHostAddr::from(HostAddr::V6([0xfd; 16])),
                },
                path: p,
            };
            let mut b = vec![0u8; r.buffer_len() + 16];
            r.emit(&mut b).expect("template");
            let n = r.buffer_len();
            b[n..n + 2].copy_from_slice(&[17, 0]); // HBH extension, 4 bytes, then UDP
            out.push(b);
        }
        out
    })
}

fuzz_target!(|raw: &[u8]| {
    let owned = input(raw, templates());
    let data = &owned[..];
    if let Ok(pkt) = parse(data) {
        let h = pkt.header;
        let _ = (h.version(), h.qos(), h.flow_id(), h.next_hdr(), h.rsv(), h.path_type());
        let _ = (h.dst_ia(), h.src_ia(), h.dst_host(), h.src_host(), h.dst_host_raw().decode());
        let _ = (h.src_host_raw().padded(), h.path().len(), pkt.payload().len(), pkt.l4());
        match pkt.path {
            Path::Scion(p) => {
                let _ = (p.current_info().seg_id(), p.current_hop().mac(), p.is_last_hop());
            }
            Path::Sibra(p) => assert!(p.active_sof().is_some()),
            Path::EpicZ(p) => {
                let _ = (p.pkt_id(), p.q(), p.scion_path().current_hop().cons_egress());
                assert!(p.current_hvf().is_some());
            }
            Path::EpicHp(p) => {
                let _ = (p.pkt_id(), p.current_hvf(), p.scion_path().current_hop().mac());
            }
            Path::Empty | Path::Other(..) => {}
        }
    }
    if let Ok(r) = ScionRepr::parse(data) {
        let n = r.buffer_len();
        let mut out = data.to_vec();
        out[..n].fill(0);
        if let Err(e) = r.emit(&mut out) {
            // Only the documented EPIC-Z ambiguity may refuse a parsed packet.
            assert_eq!(e, Error::malformed("EPIC-Z path would parse ambiguously"));
            return;
        }
        assert_eq!(ScionRepr::parse(&out).expect("reparse"), r);
    }
});
