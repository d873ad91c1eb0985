//! SCION: common and address header, and the paths the data planes ride on.
//!
//! * [`header`]: [`ScionHeader`] view over a whole packet (common header,
//!   address header with raw host bytes for every DT/DL combination) and
//!   [`AddrHdrRepr`].
//! * [`path`]: the standard SCION path (PathType 1) with info and hop fields.
//! * [`sibra`]: the SIBRA path (PathType 200).
//! * [`epic`]: the EPIC-Z path (PathType 201).
//! * [`packet`]: [`parse`] walks common -> address -> path by type and locates
//!   the payload and L4 header; [`ScionRepr`] emits a whole SCION header.
//!
//! Every `new_checked` validates all lengths against its buffer, so a view it
//! returns can be read without panics; hop-field MACs are *not* computed here.

pub mod epic;
pub mod header;
pub mod packet;
pub mod path;
pub mod sibra;

pub use epic::{epic_fields, epic_fields_memo, EpicFields, EpicPath, EpicPathRepr, EpicShape};
pub use header::{next_hdr, AddrHdrRepr, PathType, RawHostAddr, ScionHeader};
pub use packet::{parse, parse_path, Path, PathRepr, ScionPacket, ScionRepr};
pub use path::{
    hop_expiry_unix_ns, hop_expiry_unix_secs, HopField, HopFieldRepr, InfoField, InfoFieldRepr,
    ScionPath, ScionPathRepr,
};
pub use sibra::{sibra_fields, SibraFields, SibraHop};
pub use sibra::{
    BlockRepr, PathIds, RequestRepr, ResvInfo, ResvInfoRepr, SibraPath, SibraPathRepr, Sof, SofRepr,
};
