//! The variable-length parts of a path representation (hop fields, HVFs):
//! a list of fixed-size fields that is either the checked bytes of a parsed
//! packet or values the caller built, without copying either.
//!
//! This is what keeps the SCION representations small: a decoded path holds
//! a slice of the packet, not a 64-entry array, so a full decode touches
//! only the bytes the path has, and moving a representation copies a few
//! dozen bytes whatever the hop count.

use core::fmt;
use core::slice::{ChunksExact, Iter};

use crate::{Error, Result};

/// A fixed-size field of a path, as read from and written to the wire.
pub trait WireField: Copy {
    /// Length on the wire.
    const LEN: usize;

    /// Reads one field from the first [`LEN`](Self::LEN) bytes of `b`
    /// (callers pass exactly `LEN` bytes).
    fn read(b: &[u8]) -> Self;

    /// Writes one field into the first [`LEN`](Self::LEN) bytes of `b`
    /// (callers pass exactly `LEN` bytes).
    fn write(&self, b: &mut [u8]);
}

/// Raw byte fields (HVFs, SIBRA request slots): copied as they are.
impl<const N: usize> WireField for [u8; N] {
    const LEN: usize = N;

    #[inline]
    fn read(b: &[u8]) -> Self {
        crate::field::array(b, 0)
    }

    #[inline]
    fn write(&self, b: &mut [u8]) {
        b[..N].copy_from_slice(self);
    }
}

/// A list of fields of one kind, borrowed.
///
/// [`Wire`](Fields::Wire) is what parsing returns: the packet's bytes,
/// [`WireField::LEN`] per field, decoded when read. [`Decoded`](Fields::Decoded)
/// is what a caller building a packet passes: its own values. Both read the
/// same way ([`get`](Self::get), [`iter`](Self::iter)), compare by their
/// decoded values (reserved bits the field type ignores do not count), and
/// emit the same bytes.
///
/// Trailing bytes of a `Wire` slice that do not make a whole field are not
/// part of the list.
#[derive(Clone, Copy)]
pub enum Fields<'a, T> {
    /// Wire bytes from a parsed packet.
    Wire(&'a [u8]),
    /// Values built by the caller.
    Decoded(&'a [T]),
}

impl<T> Default for Fields<'_, T> {
    fn default() -> Self {
        Fields::Decoded(&[])
    }
}

impl<'a, T> From<&'a [T]> for Fields<'a, T> {
    fn from(v: &'a [T]) -> Self {
        Fields::Decoded(v)
    }
}

impl<'a, T, const N: usize> From<&'a [T; N]> for Fields<'a, T> {
    fn from(v: &'a [T; N]) -> Self {
        Fields::Decoded(v)
    }
}

impl<'a, T: WireField> Fields<'a, T> {
    /// Number of fields.
    #[inline]
    pub fn len(&self) -> usize {
        match self {
            Fields::Wire(b) => b.len() / T::LEN,
            Fields::Decoded(v) => v.len(),
        }
    }

    /// Whether the list is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Field `i`, if there is one.
    #[inline]
    pub fn get(&self, i: usize) -> Option<T> {
        match self {
            Fields::Wire(b) => {
                let at = i.checked_mul(T::LEN)?;
                b.get(at..at.checked_add(T::LEN)?).map(T::read)
            }
            Fields::Decoded(v) => v.get(i).copied(),
        }
    }

    /// The fields in order, by value.
    #[inline]
    pub fn iter(&self) -> FieldsIter<'a, T> {
        FieldsIter(match *self {
            Fields::Wire(b) => IterInner::Wire(b.chunks_exact(T::LEN)),
            Fields::Decoded(v) => IterInner::Decoded(v.iter()),
        })
    }

    /// Length of the emitted fields.
    #[inline]
    pub fn buffer_len(&self) -> usize {
        self.len() * T::LEN
    }

    /// Writes the fields into the start of `out`.
    pub fn emit(&self, out: &mut [u8]) -> Result<()> {
        let out = out.get_mut(..self.buffer_len()).ok_or(Error::BufferTooSmall)?;
        for (f, o) in self.iter().zip(out.chunks_exact_mut(T::LEN)) {
            f.write(o);
        }
        Ok(())
    }
}

impl<'a, 'b, T: WireField + PartialEq> PartialEq<Fields<'b, T>> for Fields<'a, T> {
    fn eq(&self, o: &Fields<'b, T>) -> bool {
        self.len() == o.len() && self.iter().eq(o.iter())
    }
}

impl<T: WireField + Eq> Eq for Fields<'_, T> {}

impl<T: WireField + fmt::Debug> fmt::Debug for Fields<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<'a, T: WireField> IntoIterator for Fields<'a, T> {
    type Item = T;
    type IntoIter = FieldsIter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<'a, T: WireField> IntoIterator for &Fields<'a, T> {
    type Item = T;
    type IntoIter = FieldsIter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// Iterator over [`Fields`], yielding values.
#[derive(Clone, Debug)]
pub struct FieldsIter<'a, T>(IterInner<'a, T>);

#[derive(Clone, Debug)]
enum IterInner<'a, T> {
    Wire(ChunksExact<'a, u8>),
    Decoded(Iter<'a, T>),
}

impl<T: WireField> Iterator for FieldsIter<'_, T> {
    type Item = T;

    #[inline]
    fn next(&mut self) -> Option<T> {
        match &mut self.0 {
            IterInner::Wire(c) => c.next().map(T::read),
            IterInner::Decoded(i) => i.next().copied(),
        }
    }

    #[inline]
    fn size_hint(&self) -> (usize, Option<usize>) {
        match &self.0 {
            IterInner::Wire(c) => c.size_hint(),
            IterInner::Decoded(i) => i.size_hint(),
        }
    }
}

impl<T: WireField> DoubleEndedIterator for FieldsIter<'_, T> {
    #[inline]
    fn next_back(&mut self) -> Option<T> {
        match &mut self.0 {
            IterInner::Wire(c) => c.next_back().map(T::read),
            IterInner::Decoded(i) => i.next_back().copied(),
        }
    }
}

impl<T: WireField> ExactSizeIterator for FieldsIter<'_, T> {}

impl<T: WireField> core::iter::FusedIterator for FieldsIter<'_, T> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_and_decoded_agree() {
        let bytes = [1u8, 2, 3, 4, 5, 6, 7, 8, 9];
        let w: Fields<'_, [u8; 4]> = Fields::Wire(&bytes);
        let vals = [[1, 2, 3, 4], [5, 6, 7, 8]];
        let d: Fields<'_, [u8; 4]> = (&vals).into();
        assert_eq!(w.len(), 2, "the partial trailing field is not part of the list");
        assert_eq!(w, d);
        assert_eq!(w.get(1), Some([5, 6, 7, 8]));
        assert_eq!(w.get(2), None);
        assert_eq!(w.get(usize::MAX), None);
        assert_eq!(w.iter().next_back(), Some([5, 6, 7, 8]));
        let mut out = [0u8; 8];
        d.emit(&mut out).unwrap();
        assert_eq!(out, bytes[..8]);
        assert_eq!(w.emit(&mut out[..7]), Err(Error::BufferTooSmall));
        assert_ne!(w, Fields::Decoded(&vals[..1]));
    }
}
