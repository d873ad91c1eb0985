//! The exact PRF inputs of every derivation, as SCION's reference
//! implementation serializes them.
//!
//! | key | bytes (then zero padding to a multiple of 16) |
//! |---|---|
//! | level 1 (AS-AS) | `0x00` ‖ IA (8 bytes BE) |
//! | AS-host | `0x01` ‖ `0x0T` ‖ host |
//! | host-AS | `0x02` ‖ `0x0T` ‖ host |
//! | host-host | `0x03` ‖ `0x0T` ‖ host |
//! | generic AS-host | `0x01` ‖ protocol (2 bytes BE) ‖ `0x0T` ‖ host |
//! | generic host-AS | `0x02` ‖ protocol (2 bytes BE) ‖ `0x0T` ‖ host |
//!
//! `T` is the 4-bit host type/length code of the SCION common header
//! ([`HostAddr::type_len`]): `0x0` IPv4 (4 bytes), `0x3` IPv6 (16 bytes),
//! `0x4` service address (2-byte service number, 2 zero bytes). Inputs are
//! one block except IPv6 level 2/3 inputs, which take two.

use mac::{Block, BLOCK};
use packet::{HostAddr, Ia};

/// Protocol identifier of a secret value / generic derivation (2 bytes on the wire).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Protocol(pub u16);

impl Protocol {
    /// The generic protocol (`PROTOCOL_GENERIC_UNSPECIFIED` = 0).
    pub const GENERIC: Protocol = Protocol(0);
    /// SCMP (1).
    pub const SCMP: Protocol = Protocol(1);
}

/// The key type: the first byte of every derivation input.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum KeyType {
    /// Level 1, AS to AS.
    AsAs = 0,
    /// Level 2, AS to host.
    AsHost = 1,
    /// Level 2, host to AS.
    HostAs = 2,
    /// Level 3, host to host.
    HostHost = 3,
}

/// A serialized, zero-padded PRF input of one or two blocks.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Input {
    blocks: [Block; 2],
    n: usize,
}

impl Input {
    /// The padded input bytes (16 or 32).
    pub fn as_bytes(&self) -> &[u8] {
        &self.blocks.as_flattened()[..self.n * BLOCK]
    }

    /// The padded input as blocks (1 or 2).
    #[inline]
    pub fn blocks(&self) -> &[Block] {
        &self.blocks[..self.n]
    }
}

/// Level-1 input for the key towards `dst`.
#[inline]
pub fn level1(dst: Ia) -> Input {
    let mut b = [0u8; BLOCK];
    b[0] = KeyType::AsAs as u8;
    b[1..9].copy_from_slice(&dst.to_bytes());
    Input { blocks: [b, [0; BLOCK]], n: 1 }
}

/// Writes `prefix` ‖ type/len ‖ host address, zero-padded.
#[inline(always)]
fn with_host<const P: usize>(prefix: [u8; P], host: &HostAddr) -> Input {
    let mut blocks = [[0u8; BLOCK]; 2];
    blocks[0][..P].copy_from_slice(&prefix);
    blocks[0][P] = host.type_len() & 0x0f;
    let n = match host {
        // The common cases fit the first block and need no length arithmetic.
        HostAddr::V4(a) => {
            blocks[0][P + 1..P + 5].copy_from_slice(a);
            1
        }
        HostAddr::Svc(s) => {
            blocks[0][P + 1..P + 3].copy_from_slice(&s.to_be_bytes());
            1
        }
        HostAddr::V6(a) => {
            let (head, tail) = a.split_at(BLOCK - P - 1);
            blocks[0][P + 1..].copy_from_slice(head);
            blocks[1][..tail.len()].copy_from_slice(tail);
            2
        }
    };
    Input { blocks, n }
}

/// Protocol-specific level-2 input (`AsHost`/`HostAs`), also the level-3
/// input (`HostHost`, which has no protocol field in either variant).
#[inline]
pub fn level2(ty: KeyType, host: &HostAddr) -> Input {
    with_host([ty as u8], host)
}

/// Level-3 (host-host) input.
#[inline]
pub fn host_host(host: &HostAddr) -> Input {
    level2(KeyType::HostHost, host)
}

/// Generic-protocol level-2 input: the protocol id follows the type byte.
#[inline]
pub fn generic_level2(ty: KeyType, protocol: Protocol, host: &HostAddr) -> Input {
    let p = protocol.0.to_be_bytes();
    with_host([ty as u8, p[0], p[1]], host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_layouts() {
        let ia = Ia::new(1, 0xff00_0000_0111);
        assert_eq!(level1(ia).as_bytes(), hex::decode("000001ff000000011100000000000000").unwrap());
        let v4 = HostAddr::V4([10, 0, 0, 1]);
        assert_eq!(
            level2(KeyType::AsHost, &v4).as_bytes(),
            hex::decode("01000a00000100000000000000000000").unwrap()
        );
        assert_eq!(
            generic_level2(KeyType::HostAs, Protocol(0x1234), &v4).as_bytes(),
            hex::decode("021234000a0000010000000000000000").unwrap()
        );
        let mut v6 = [0u8; 16];
        v6[0] = 0xfd;
        v6[15] = 1;
        let v6 = HostAddr::V6(v6);
        assert_eq!(
            host_host(&v6).as_bytes(),
            hex::decode(
                "0303fd00000000000000000000000000 00010000000000000000000000000000"
                    .replace(' ', "")
            )
            .unwrap()
        );
        assert_eq!(
            generic_level2(KeyType::AsHost, Protocol(7), &v6).as_bytes(),
            hex::decode(
                "01000703fd0000000000000000000000 00000001000000000000000000000000"
                    .replace(' ', "")
            )
            .unwrap()
        );
        assert_eq!(
            level2(KeyType::HostAs, &HostAddr::Svc(0x0002)).as_bytes(),
            hex::decode("02040002000000000000000000000000").unwrap()
        );
    }
}
