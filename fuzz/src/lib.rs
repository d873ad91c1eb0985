//! Helpers shared by the fuzz targets.

use packet::scion::{AddrHdrRepr, RawHostAddr};
use packet::HostAddr;

/// Builds the input: raw bytes, or (when the first byte says so) a valid
/// template with the rest of the input applied as (offset, value) overwrites
/// and an optional cut, so the fuzzer starts deep inside the parser.
pub fn template_input(data: &[u8], templates: &[Vec<u8>]) -> Vec<u8> {
    let Some((&sel, rest)) = data.split_first() else { return Vec::new() };
    let pick = usize::from(sel) % (templates.len() + 1);
    if pick == templates.len() {
        return rest.to_vec();
    }
    let mut b = templates[pick].clone();
    let mut it = rest.chunks_exact(2);
    for c in &mut it {
        let at = usize::from(c[0]) * b.len() / 256;
        b[at] = c[1];
    }
    if let [cut] = it.remainder() {
        b.truncate(usize::from(*cut) * b.len() / 255);
    }
    b
}

/// Builds the packet of a stage target from its input: byte 0 is left to the
/// target (e.g. the arrival port); byte 1 bit 0 selects raw mode (the bytes
/// after the first two are the packet) or template mode (they are XORed over
/// the valid packet `template` builds, which gets byte 1 to pick among
/// several), so the fuzzer reaches the MAC and state code behind the checks.
/// `None` for an input shorter than two bytes.
pub fn raw_or_xored(data: &[u8], template: impl FnOnce(u8) -> Vec<u8>) -> Option<Vec<u8>> {
    let (&[_, sel], rest) = data.split_first_chunk::<2>()?;
    if sel & 1 == 0 {
        return Some(rest.to_vec());
    }
    let mut t = template(sel);
    for (b, x) in t.iter_mut().zip(rest) {
        *b ^= x;
    }
    Some(t)
}

/// The SCION address header of the stage targets' templates: next header
/// UDP, flow 1, from and to host 10.0.0.1 in the given ASes.
pub fn udp_hdr(src_ia: packet::Ia, dst_ia: packet::Ia, payload_len: u16) -> AddrHdrRepr {
    let host = RawHostAddr::from(HostAddr::V4([10, 0, 0, 1]));
    AddrHdrRepr {
        qos: 0,
        flow_id: 1,
        next_hdr: 17,
        payload_len,
        dst_ia,
        src_ia,
        dst_host: host,
        src_host: host,
    }
}
