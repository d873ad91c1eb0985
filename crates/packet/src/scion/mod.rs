//! SCION: common and address header, and the paths the data planes ride on.
//!
//! * [`header`]: [`ScionHeader`] view over a whole packet (common header,
//!   address header with raw host bytes for every DT/DL combination) and
//!   [`AddrHdrRepr`].
//! * [`path`]: the standard SCION path (PathType 1) with info and hop fields.
//! * [`sibra`]: the SIBRA path (PathType 200).
//! * [`epic_hp`]: the EPIC-HP path (PathType 3).
//! * [`epic`]: the EPIC-Z path (PathType 201).
//! * [`epic_common`]: what both EPIC paths share: packet ID, timestamp
//!   arithmetic, HVF inputs.
//! * [`fields`]: [`Fields`], the borrowed lists of hop fields and HVFs that
//!   keep the representations small.
//! * [`packet`]: [`parse`] walks common -> address -> path by type and locates
//!   the payload and L4 header; [`ScionRepr`] decodes and emits a whole
//!   SCION header.
//!
//! Every `new_checked` validates all lengths against its buffer, so a view it
//! returns can be read without panics; hop-field MACs are *not* computed here.

pub mod epic;
pub mod epic_common;
pub mod epic_hp;
pub mod fields;
pub mod header;
pub mod packet;
pub mod path;
pub mod sibra;

pub use epic::{epic_fields, epic_fields_memo, EpicFields, EpicPath, EpicPathRepr, EpicShape};
pub use epic_common::{EpicClock, EpicHpInput, HvfOrigin, PktId};
pub use epic_hp::{EpicHpPath, EpicHpPathRepr};
pub use fields::{Fields, FieldsIter, WireField};
pub use header::{next_hdr, AddrHdrRepr, PathType, RawHostAddr, ScionHeader};
pub use packet::{parse, parse_path, Path, PathRepr, ScionPacket, ScionRepr, SibraPathRef};
pub use path::{
    curr_segment_bounds, hop_expiry_unix_ns, hop_expiry_unix_secs, meta_word_valid, path_len_of,
    HopField, HopFieldRepr, InfoField, InfoFieldRepr, ScionPath, ScionPathRepr,
};
pub use sibra::{sibra_fields, SibraFields, SibraHop};
pub use sibra::{
    BlockRepr, PathIds, RequestRepr, ResvInfo, ResvInfoRepr, SibraPath, SibraPathRepr, Sof, SofRepr,
};
