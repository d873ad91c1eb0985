//! The part every header view shares, written once: [`view!`].
//!
//! A header view is a struct `Xxx<T: AsRef<[u8]>>` holding the buffer
//! (see the crate docs). Its field accessors, its `check_len` and its `Repr`
//! are its own; what every view repeats is the struct itself and its
//! constructors, and that is what [`view!`] generates.

/// Defines a header view: the struct and its constructors.
///
/// ```text
/// view! {
///     /// A zero-copy view of an IPv4 packet.        // the struct's own attributes
///     #[derive(Debug, Clone)]
///     pub struct Ipv4<T: AsRef<[u8]>> {
///         buffer: T,                                 // may carry a visibility (`pub(super) buffer: T`)
///     }                                              // and further fields after it (`carrier: Carrier`)
///     #[inline]                                      // the attributes of `new_checked`
///     new_checked => check_len;
/// }
/// ```
///
/// generates the struct as written and, in `impl<T: AsRef<[u8]>>`:
///
/// * `pub const fn new_unchecked(buffer: T, <further fields>) -> Self`
///   (`#[inline]`);
/// * `pub fn new_checked(buffer: T, <further fields>) -> Result<Self>`,
///   with the attributes given before `new_checked`, which wraps the buffer
///   and then either
///   * `=> check_len`: calls the view's own `check_len(&self) -> Result<()>`
///     (written next to the view) and returns its error, or
///   * `=> at_least(LEN)`: requires `LEN` bytes ([`Error::Truncated`]
///     otherwise): the fixed-size fields inside a path;
/// * with `=> check_len` only, `pub fn into_inner(self) -> T` (`#[inline]`).
///   The fixed-size fields are handed out by their path view and have none.
///
/// `new_checked` carries exactly the attributes written before it, because
/// its inlining is part of the per-packet cost (the SCION header's is
/// `#[inline(always)]`, the SIBRA path's has none).
///
/// [`Error::Truncated`]: crate::Error::Truncated
macro_rules! view {
    (@struct $(#[$attr:meta])* $vis:vis $name:ident $bvis:vis $(, $field:ident: $fty:ty)*) => {
        $(#[$attr])*
        $vis struct $name<T: AsRef<[u8]>> {
            $bvis buffer: T,
            $($field: $fty,)*
        }
    };
    (@new_unchecked $name:ident $(, $field:ident: $fty:ty)*) => {
        /// Wraps a buffer without checking it (for emitting into a fresh
        /// buffer, or for bytes checked before); accessors may panic on a short
        /// or inconsistent buffer. Use [`new_checked`](Self::new_checked) on
        /// untrusted input.
        #[inline]
        pub const fn new_unchecked(buffer: T $(, $field: $fty)*) -> Self {
            $name { buffer $(, $field)* }
        }
    };
    (
        $(#[$attr:meta])*
        $vis:vis struct $name:ident<T: AsRef<[u8]>> {
            $bvis:vis buffer: T $(, $field:ident: $fty:ty)* $(,)?
        }
        $(#[$checked:meta])*
        new_checked => check_len;
    ) => {
        $crate::view::view!(@struct $(#[$attr])* $vis $name $bvis $(, $field: $fty)*);

        impl<T: AsRef<[u8]>> $name<T> {
            $crate::view::view!(@new_unchecked $name $(, $field: $fty)*);

            /// Wraps a buffer after [`check_len`](Self::check_len) accepted it.
            $(#[$checked])*
            pub fn new_checked(buffer: T $(, $field: $fty)*) -> $crate::Result<Self> {
                let v = Self::new_unchecked(buffer $(, $field)*);
                v.check_len()?;
                Ok(v)
            }

            /// Consumes the view and returns the buffer.
            #[inline]
            pub fn into_inner(self) -> T {
                self.buffer
            }
        }
    };
    (
        $(#[$attr:meta])*
        $vis:vis struct $name:ident<T: AsRef<[u8]>> {
            $bvis:vis buffer: T $(,)?
        }
        $(#[$checked:meta])*
        new_checked => at_least($len:expr);
    ) => {
        $crate::view::view!(@struct $(#[$attr])* $vis $name $bvis);

        impl<T: AsRef<[u8]>> $name<T> {
            $crate::view::view!(@new_unchecked $name);

            #[doc = concat!(
                "Wraps a buffer of at least [`", stringify!($len), "`] bytes ",
                "([`Error::Truncated`](crate::Error::Truncated) otherwise)."
            )]
            $(#[$checked])*
            pub fn new_checked(buffer: T) -> $crate::Result<Self> {
                if buffer.as_ref().len() < $len {
                    return Err($crate::Error::Truncated);
                }
                Ok($name { buffer })
            }
        }
    };
}

pub(crate) use view;
