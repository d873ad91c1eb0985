//! FlowPolice shim view and repr on arbitrary bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use packet::flowpolice::{FlowPolice, FlowPoliceRepr};

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = FlowPolice::new_checked(data) {
        let _ = (p.next_header(), p.packet_type(), p.flags(), p.p_id(), p.flow_id(), p.ts());
        let _ = (p.mac(), p.mac_block(), p.reserved(), p.puzzle_epoch(), p.puzzle_level());
        let _ = (p.puzzle_nonce(), p.header().len(), p.payload().len());
    }
    if let Ok(r) = FlowPoliceRepr::parse(&FlowPolice::new_unchecked(data)) {
        let mut buf = [0u8; 44];
        let n = r.buffer_len();
        r.emit(&mut FlowPolice::new_unchecked(&mut buf[..n])).expect("emit");
        let back = FlowPoliceRepr::parse(&FlowPolice::new_checked(&buf[..n]).expect("check"))
            .expect("reparse");
        assert_eq!(back, r);
    }
});
