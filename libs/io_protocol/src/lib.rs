//! The mechanics that Tessera's IO-channel protocols (the block path's `blk_interface`, the
//! network path's `net_interface`) share, so that each protocol states only its own layout:
//!
//! - [`wire_codes!`]: an enum whose variants have stable numeric codes on the wire (errors,
//!   ops), with `ALL`, `code`, `from_code`, `name` and `Display` generated from one list;
//! - [`le`]: reading and writing little-endian fields of fixed-size messages, checking that
//!   reserved bytes are zero, and the id of a message that does not decode;
//! - [`published`]: words a driver publishes in memory its client may read at any time (a
//!   stream's accounts), under a sequence number that is odd while the driver writes, and
//!   their reader, which retries a bounded number of times.
//!
//! # Invariants
//! - Nothing here panics on any input: field accessors take offsets that the protocol's
//!   fixed layout makes in bounds (checked by the message's array type), decoders return
//!   `None` for unknown codes.
//! - A reader of [`published`] words never returns a torn copy: it returns the words only if
//!   the sequence number was even and unchanged around its reads.
//!
//! The crate is `no_std`, has no `unsafe` code and no system calls.

#![no_std]
#![forbid(unsafe_code)]

pub mod le;
pub mod published;

/// Declares an enum whose variants carry stable wire codes, and generates from the one list:
/// `ALL` (every variant, in declaration order), `code` (the variant's code), `from_code` (the
/// variant with a code, if any), `name` (the variant's name, as in the source) and a
/// `Display` of `Name (code)`. The enum derives `Clone, Copy, Debug, PartialEq, Eq, Hash`.
///
/// ```
/// io_protocol::wire_codes! {
///     /// Why it failed.
///     pub enum Failure: u16 {
///         /// Bad bytes.
///         Malformed = 1,
///         /// Gone.
///         Closed = 2,
///     }
/// }
/// assert_eq!(Failure::from_code(2), Some(Failure::Closed));
/// assert_eq!(Failure::Malformed.code(), 1);
/// assert_eq!(Failure::ALL, [Failure::Malformed, Failure::Closed]);
/// assert_eq!(format!("{}", Failure::Closed), "Closed (2)");
/// ```
#[macro_export]
macro_rules! wire_codes {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident : $repr:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $code:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr($repr)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant = $code, )+
        }

        impl $name {
            /// Every variant, in code order.
            pub const ALL: [$name; [$(stringify!($variant)),+].len()] = [$($name::$variant),+];

            /// The variant's stable wire code.
            #[inline]
            pub const fn code(self) -> $repr {
                self as $repr
            }

            /// The variant with wire code `code`, if any.
            #[inline]
            pub const fn from_code(code: $repr) -> ::core::option::Option<$name> {
                match code {
                    $( $code => ::core::option::Option::Some($name::$variant), )+
                    _ => ::core::option::Option::None,
                }
            }

            /// The variant's name, as in the source (for logs).
            pub const fn name(self) -> &'static str {
                match self {
                    $( $name::$variant => stringify!($variant), )+
                }
            }
        }

        impl ::core::fmt::Display for $name {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                ::core::write!(f, "{} ({})", self.name(), self.code())
            }
        }
    };
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::format;

    wire_codes! {
        /// Test codes with a gap.
        enum Codes: u8 {
            /// One.
            One = 1,
            /// Two.
            Two = 2,
            /// Seven.
            Seven = 7,
        }
    }

    #[test]
    fn codes_round_trip_and_unknown_codes_are_none() {
        assert_eq!(Codes::ALL, [Codes::One, Codes::Two, Codes::Seven]);
        for c in Codes::ALL {
            assert_eq!(Codes::from_code(c.code()), Some(c));
        }
        for code in [0, 3, 6, 8, 255] {
            assert_eq!(Codes::from_code(code), None);
        }
        assert_eq!(Codes::Seven.code(), 7);
        assert_eq!(Codes::Two.name(), "Two");
        assert_eq!(format!("{}", Codes::Seven), "Seven (7)");
    }
}
