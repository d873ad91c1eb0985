//! The protest request (policy, evidence records, window, protest id, the
//! destination's signature) and the evidence window of a violation.

use crate::crypto::{sha3, Digest32, Signer};
use crate::policy::PolicyPacket;
use crate::record::{Record, RECORD_LEN};

/// Round 1 request (destination → every cooperating AS).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtestRequest {
    /// The complete `SETUP_RESPONSE` policy packet.
    pub policy: Vec<u8>,
    /// Evidence records.
    pub records: Vec<Record>,
    /// Violation window start (informational).
    pub window_start: u64,
    /// Violation window end (informational).
    pub window_end: u64,
    /// The destination's clock.
    pub protest_time: u64,
    /// `H(policy_id ‖ u64 protest_time ‖ H(records))`.
    pub protest_id: Digest32,
    /// `Sign_n(protest_id)`.
    pub dest_sig: Vec<u8>,
}

/// Cap on records per protest (`max_protest_records`).
pub const MAX_PROTEST_RECORDS: usize = 10_000_000;

fn records_hash(records: &[Record]) -> Digest32 {
    use sha3::Digest;
    let mut h = sha3::Sha3_256::new();
    let mut b = [0u8; RECORD_LEN];
    for r in records {
        r.encode(&mut b);
        h.update(b);
    }
    h.finalize().into()
}

/// `protest_id` of §2.11 (records in their 64-byte encoding).
pub fn protest_id(policy_id: &Digest32, protest_time: u64, records: &[Record]) -> Digest32 {
    sha3(&[policy_id, &protest_time.to_be_bytes(), &records_hash(records)])
}

impl ProtestRequest {
    /// Builds and signs a protest (destination side, §5.7.4 selection is the caller's).
    pub fn build(
        policy: &PolicyPacket,
        records: Vec<Record>,
        window: (u64, u64),
        now: u64,
        signer: &Signer,
    ) -> Self {
        let id = protest_id(&policy.policy_id(), now, &records);
        ProtestRequest {
            policy: policy.encode(),
            records,
            window_start: window.0,
            window_end: window.1,
            protest_time: now,
            protest_id: id,
            dest_sig: signer.sign(&id).to_vec(),
        }
    }

    /// Wire encoding: `u32 len ‖ policy ‖ u32 n ‖ records ‖ 3×u64 ‖ id ‖ u16 len ‖ sig`.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.policy.len() + self.records.len() * RECORD_LEN + 128);
        v.extend_from_slice(&(self.policy.len() as u32).to_be_bytes());
        v.extend_from_slice(&self.policy);
        v.extend_from_slice(&(self.records.len() as u32).to_be_bytes());
        let mut b = [0u8; RECORD_LEN];
        for r in &self.records {
            r.encode(&mut b);
            v.extend_from_slice(&b);
        }
        for x in [self.window_start, self.window_end, self.protest_time] {
            v.extend_from_slice(&x.to_be_bytes());
        }
        v.extend_from_slice(&self.protest_id);
        v.extend_from_slice(&(self.dest_sig.len() as u16).to_be_bytes());
        v.extend_from_slice(&self.dest_sig);
        v
    }

    /// Decodes; records beyond `max_records` make the request malformed (bounded memory).
    pub fn decode(b: &[u8], max_records: usize) -> Option<Self> {
        let mut o = 0usize;
        let mut take = |n: usize| -> Option<&[u8]> {
            let s = b.get(o..o.checked_add(n)?)?;
            o += n;
            Some(s)
        };
        let pl = u32::from_be_bytes(take(4)?.try_into().ok()?) as usize;
        let policy = take(pl)?.to_vec();
        let n = u32::from_be_bytes(take(4)?.try_into().ok()?) as usize;
        if n > max_records {
            return None;
        }
        let raw = take(n.checked_mul(RECORD_LEN)?)?;
        let records = raw
            .chunks_exact(RECORD_LEN)
            .map(|c| Record::decode(c).ok())
            .collect::<Option<Vec<_>>>()?;
        let mut u = [0u64; 3];
        for x in &mut u {
            *x = u64::from_be_bytes(take(8)?.try_into().ok()?);
        }
        let protest_id = take(32)?.try_into().ok()?;
        let sl = u16::from_be_bytes(take(2)?.try_into().ok()?) as usize;
        let dest_sig = take(sl)?.to_vec();
        if o != b.len() {
            return None;
        }
        Some(ProtestRequest {
            policy,
            records,
            window_start: u[0],
            window_end: u[1],
            protest_time: u[2],
            protest_id,
            dest_sig,
        })
    }
}

/// §5.7.4: the stored records of the violation window `[window_start, second]`
/// (by unwrapped source timestamp; records must belong to one channel).
pub fn select_window(records: &[Record], v: &crate::conformance::Violation) -> Vec<Record> {
    records
        .iter()
        .filter(|r| {
            (v.window_start..=v.second).contains(&crate::time::unwrap_near(r.ts, r.arrival as u64))
        })
        .copied()
        .collect()
}
