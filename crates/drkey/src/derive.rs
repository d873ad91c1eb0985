//! Secret values and the key hierarchy.

use alloc::vec::Vec;

use mac::{Aes, Key};
use packet::{HostAddr, Ia};
use zeroize::Zeroizing;

use crate::epoch::Epoch;
use crate::input::{self, Input, KeyType, Protocol};
use crate::Error;

/// PBKDF2 salt of the SV derivation (fixed by the reference implementation).
pub const SV_SALT: &[u8] = b"Derive DRKey Key";
/// PBKDF2-HMAC-SHA256 iterations of the SV derivation.
pub const SV_ITERATIONS: u32 = 1000;

/// The DRKey PRF: AES-128 CBC-MAC with a zero IV over the padded input.
#[inline]
pub fn prf(key: &Aes, input: &Input) -> Key {
    // One cipher call for the whole (one- or two-block) chain.
    Key::from(key.cbc_mac_blocks(input.blocks()))
}

/// The level-1 key `K_{A→B}` towards `dst` from the raw 16-byte secret value
/// `SV_A` (as the control service hands it out) = PRF_SV(`0x00` ‖ IA(B)).
///
/// Level 1 depends on the SV bytes and `dst` only, not on the SV's protocol
/// or epoch: this equals [`SecretValue::level1_key`] of any `SecretValue`
/// holding `sv_key`. It expands the SV's AES key for this one derivation;
/// to derive many keys, keep a [`SecretValue`] or a
/// [`Level1Cache`](crate::Level1Cache). [`Level1::new`] expands the result
/// for level-2 derivations.
pub fn level1_from_sv_key(sv_key: &Key, dst: Ia) -> Key {
    prf(&Aes::new(sv_key), &input::level1(dst))
}

/// A level-0 secret value `SV_A` for one protocol and epoch, with its AES key
/// schedule expanded once. Zeroized on drop; `Debug` prints no key material.
#[derive(Clone)]
pub struct SecretValue {
    epoch: Epoch,
    protocol: Protocol,
    key: Key,
    aes: Aes,
}

impl SecretValue {
    /// Derives `SV` from the AS master secret:
    /// `PBKDF2-HMAC-SHA256(password, "Derive DRKey Key", 1000 iterations, 16 bytes)`
    /// with `password = len(secret) (u64 BE) ‖ secret ‖ protocol (u16 BE) ‖
    /// epoch begin (u32 BE) ‖ epoch end (u32 BE)`.
    ///
    /// Runs 2000 SHA-256 compressions (tens of microseconds): control path only.
    pub fn derive(master_secret: &[u8], protocol: Protocol, epoch: Epoch) -> Result<Self, Error> {
        if master_secret.is_empty() {
            return Err(Error::EmptySecret);
        }
        let mut pw = Zeroizing::new(Vec::with_capacity(master_secret.len() + 18));
        pw.extend_from_slice(&(master_secret.len() as u64).to_be_bytes());
        pw.extend_from_slice(master_secret);
        pw.extend_from_slice(&protocol.0.to_be_bytes());
        pw.extend_from_slice(&epoch.begin().to_be_bytes());
        pw.extend_from_slice(&epoch.end().to_be_bytes());
        let mut out = Zeroizing::new([0u8; 16]);
        pbkdf2::pbkdf2_hmac::<sha2::Sha256>(&pw, SV_SALT, SV_ITERATIONS, &mut out[..]);
        Ok(Self::from_key(Key::from(*out), protocol, epoch))
    }

    /// Wraps an SV obtained elsewhere (e.g. from the control service).
    pub fn from_key(key: Key, protocol: Protocol, epoch: Epoch) -> Self {
        let aes = Aes::new(&key);
        SecretValue { epoch, protocol, key, aes }
    }

    /// The epoch this SV is valid for.
    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// The protocol this SV belongs to ([`Protocol::GENERIC`] for the generic SV).
    pub fn protocol(&self) -> Protocol {
        self.protocol
    }

    /// The raw SV (to hand to other services of the same AS).
    pub fn key(&self) -> &Key {
        &self.key
    }

    /// The level-1 key `K_{A→B}` towards `dst` = PRF_SV(`0x00` ‖ IA(B)).
    #[inline]
    pub fn level1_key(&self, dst: Ia) -> Key {
        prf(&self.aes, &input::level1(dst))
    }

    /// The level-1 key towards `dst`, expanded for level-2 derivations.
    #[inline]
    pub fn level1(&self, dst: Ia) -> Level1 {
        Level1::new(&self.level1_key(dst))
    }
}

impl core::fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SecretValue")
            .field("epoch", &self.epoch)
            .field("protocol", &self.protocol)
            .finish_non_exhaustive()
    }
}

/// An expanded level-1 key `K_{A→B}` (AS-AS): the parent of the level-2 keys.
#[derive(Clone)]
pub struct Level1 {
    aes: Aes,
}

impl Level1 {
    /// Expands a level-1 key.
    #[inline]
    pub fn new(key: &Key) -> Self {
        Level1 { aes: Aes::new(key) }
    }

    /// The expanded key schedule.
    pub fn aes(&self) -> &Aes {
        &self.aes
    }

    /// Protocol-specific AS-host key `K_{A→B:H_B}` (type 1).
    #[inline]
    pub fn as_host(&self, host: &HostAddr) -> Key {
        prf(&self.aes, &input::level2(KeyType::AsHost, host))
    }

    /// Protocol-specific host-AS key `K_{A:H_A→B}` (type 2).
    #[inline]
    pub fn host_as(&self, host: &HostAddr) -> Key {
        prf(&self.aes, &input::level2(KeyType::HostAs, host))
    }

    /// Generic-protocol AS-host key (type 1, protocol id after the type byte).
    /// `self` must be derived from the generic SV.
    #[inline]
    pub fn generic_as_host(&self, protocol: Protocol, host: &HostAddr) -> Key {
        prf(&self.aes, &input::generic_level2(KeyType::AsHost, protocol, host))
    }

    /// Generic-protocol host-AS key (type 2, protocol id after the type byte).
    #[inline]
    pub fn generic_host_as(&self, protocol: Protocol, host: &HostAddr) -> Key {
        prf(&self.aes, &input::generic_level2(KeyType::HostAs, protocol, host))
    }
}

impl core::fmt::Debug for Level1 {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Level1(<redacted>)")
    }
}

/// An expanded host-AS key `K_{A:H_A→B}`: the parent of the level-3 keys.
#[derive(Clone)]
pub struct HostAs {
    aes: Aes,
}

impl HostAs {
    /// Expands a host-AS key (specific or generic).
    #[inline]
    pub fn new(key: &Key) -> Self {
        HostAs { aes: Aes::new(key) }
    }

    /// Host-host key `K_{A:H_A→B:H_B}` towards `host` = H_B (type 3). The
    /// reference implementation serializes level 3 identically for the specific
    /// and the generic variant (no protocol field).
    #[inline]
    pub fn host_host(&self, host: &HostAddr) -> Key {
        prf(&self.aes, &input::host_host(host))
    }
}

impl core::fmt::Debug for HostAs {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("HostAs(<redacted>)")
    }
}
