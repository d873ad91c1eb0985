//! IPv4 view and repr (options, fragments, checksum) on arbitrary bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use packet::ipv4::{Ipv4, Ipv4Repr};

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = Ipv4::new_checked(data) {
        let _ = (p.version(), p.dscp(), p.ecn(), p.ident(), p.ttl(), p.protocol(), p.checksum());
        let _ = (p.src_addr(), p.dst_addr(), p.dont_frag(), p.more_frags(), p.frag_offset_bytes());
        let _ = (p.is_fragment(), p.verify_checksum());
        assert!(p.header_len() <= p.total_len() as usize && p.total_len() as usize <= data.len());
        let _ = (p.options().len(), p.payload().len());
    }
    let _ = Ipv4Repr::parse(&Ipv4::new_unchecked(data));
    if let Ok(r) = Ipv4Repr::parse_no_checksum(&Ipv4::new_unchecked(data)) {
        let mut buf = vec![0u8; r.buffer_len() + r.payload_len as usize];
        r.emit(&mut Ipv4::new_unchecked(&mut buf[..])).expect("emit");
        let back = Ipv4Repr::parse(&Ipv4::new_checked(&buf[..]).expect("check")).expect("reparse");
        assert_eq!(back, r);
    }
});
