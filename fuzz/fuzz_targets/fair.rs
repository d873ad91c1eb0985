//! FAIR header (both carriers) and its IPv6/IPv4 locators on arbitrary
//! bytes (fair.md §9.4 F-1, F-2): no panic, a found header lies within the
//! packet, parse is idempotent, emit/re-parse round trips.
#![no_main]

use libfuzzer_sys::fuzz_target;
use packet::fair::{locate_ipv4, locate_ipv6, Carrier, Fair, FairRepr, Slot};

fn round_trip(r: &FairRepr) {
    let mut buf = [0u8; 136];
    let n = r.buffer_len();
    r.emit(&mut Fair::new_unchecked(&mut buf[..n], r.carrier)).expect("emit");
    let back =
        FairRepr::parse(&Fair::new_checked(&buf[..n], r.carrier).expect("check")).expect("reparse");
    assert_eq!(&back, r);
}

fuzz_target!(|data: &[u8]| {
    for c in [Carrier::Ipv6, Carrier::Ipv4] {
        if let Ok(f) = Fair::new_checked(data, c) {
            let _ = (f.next_header(), f.timestamp(), f.seqno(), f.icv(), f.sb(), f.ptr());
            let _ = (f.body().len(), f.payload().len());
            for i in 0..=f.n_slots() {
                let _ = f.slot(i);
            }
            let r = FairRepr::parse(&f).expect("checked view parses");
            round_trip(&r);
        }
    }
    if data.is_empty() {
        return;
    }
    let (nh, pkt) = (data[0], &data[1..]);
    let l6 = locate_ipv6(pkt, nh);
    let l4 = locate_ipv4(pkt, nh);
    for loc in [l6, l4].into_iter().flatten().flatten() {
        assert!(loc.offset + loc.len <= pkt.len());
        let r = FairRepr::parse(&loc.view(pkt)).expect("located header parses");
        assert_eq!(FairRepr::parse(&loc.view(pkt)).expect("idempotent"), r);
        round_trip(&r);
        // Marking changes at most slots[ptr] and next_as.
        let mut m = pkt.to_vec();
        let ok = loc.view_mut(&mut m).push_mark(Slot(0x5a)).is_ok();
        let diff = m.iter().zip(pkt).filter(|(a, b)| a != b).count();
        assert!(diff <= if ok { 2 } else { 0 });
    }
});
