//! Packet mutations for the property tests that hold the memoised
//! per-packet paths against their uncached references (test builds only).

use proptest::prelude::*;

/// At most one change to a valid packet.
#[derive(Clone, Debug)]
pub(crate) enum Mutation {
    None,
    /// XOR byte `pos % len` (anywhere: SCION header, key bytes, SOFs, payload).
    Xor(usize, u8),
    /// XOR one of the bytes a layout is keyed on or checked by per packet
    /// (the caller lists them).
    KeyByte(usize, u8),
    /// Drop the last `n` bytes.
    Truncate(usize),
    /// Append `n` bytes.
    Extend(usize),
}

/// Mutations, most of them none or one flipped byte.
pub(crate) fn arb_mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => Just(Mutation::None),
        3 => (any::<usize>(), 1u8..).prop_map(|(p, x)| Mutation::Xor(p, x)),
        3 => (any::<usize>(), 1u8..).prop_map(|(p, x)| Mutation::KeyByte(p, x)),
        1 => (0usize..80).prop_map(Mutation::Truncate),
        1 => (1usize..16).prop_map(Mutation::Extend),
    ]
}

/// `p` with `m` applied; `key_bytes` are the offsets `KeyByte` picks from.
pub(crate) fn apply(mut p: Vec<u8>, m: &Mutation, key_bytes: &[usize]) -> Vec<u8> {
    match *m {
        Mutation::None => {}
        Mutation::Xor(pos, x) => {
            let n = p.len();
            if n > 0 {
                p[pos % n] ^= x;
            }
        }
        Mutation::KeyByte(i, x) => {
            if let Some(b) = key_bytes.get(i % key_bytes.len().max(1)).and_then(|&at| p.get_mut(at))
            {
                *b ^= x;
            }
        }
        Mutation::Truncate(n) => p.truncate(p.len().saturating_sub(n)),
        Mutation::Extend(n) => p.extend(std::iter::repeat_n(0xa5, n)),
    }
    p
}
