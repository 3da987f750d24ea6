//! Sizes in bytes: parsing `"256K"` and printing bytes the same way.

use core::fmt;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
const GIB: u64 = 1024 * MIB;

/// Why [`parse_size`] rejected a size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SizeError {
    /// The string is empty.
    Empty,
    /// It starts with `-`.
    Negative,
    /// It has a fractional part (`1.5M`).
    Fractional,
    /// It does not start with a decimal digit.
    NotANumber,
    /// The suffix after the digits is not `K`, `M` or `G`.
    BadUnit,
    /// The value does not fit in 64 bits.
    Overflow,
}

impl fmt::Display for SizeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Empty => "empty size",
            Self::Negative => "negative size",
            Self::Fractional => "fractional size (use a smaller unit, e.g. \"1536K\" for 1.5M)",
            Self::NotANumber => "not a number",
            Self::BadUnit => "unknown unit (use K, M or G, 1024-based, or no unit for bytes)",
            Self::Overflow => "size does not fit in 64 bits",
        })
    }
}

#[cfg(feature = "std")]
impl std::error::Error for SizeError {}

/// Parses a size: decimal digits, then an optional binary unit `K` (1024), `M` (1024²) or
/// `G` (1024³); no unit means bytes. No sign, fraction, spaces or other units.
///
/// ```
/// assert_eq!(manifest::parse_size("256K"), Ok(256 * 1024));
/// assert_eq!(manifest::parse_size("4096"), Ok(4096));
/// assert!(manifest::parse_size("1.5M").is_err());
/// ```
pub fn parse_size(s: &str) -> Result<u64, SizeError> {
    if s.is_empty() {
        return Err(SizeError::Empty);
    }
    if s.starts_with('-') {
        return Err(SizeError::Negative);
    }
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = s.split_at(digits);
    if number.is_empty() {
        return Err(SizeError::NotANumber);
    }
    if unit.starts_with('.') {
        return Err(SizeError::Fractional);
    }
    let scale = match unit {
        "" => 1,
        "K" => KIB,
        "M" => MIB,
        "G" => GIB,
        _ => return Err(SizeError::BadUnit),
    };
    let value: u64 = number.parse().map_err(|_| SizeError::Overflow)?;
    value.checked_mul(scale).ok_or(SizeError::Overflow)
}

/// Displays a number of bytes in the largest unit that divides it exactly: `256K`, `128M`,
/// `1G`, `0`, or `1000 bytes`. [`parse_size`] reads back everything but the `bytes` form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bytes(pub u64);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        match n {
            0 => write!(f, "0"),
            _ if n.is_multiple_of(GIB) => write!(f, "{}G", n / GIB),
            _ if n.is_multiple_of(MIB) => write!(f, "{}M", n / MIB),
            _ if n.is_multiple_of(KIB) => write!(f, "{}K", n / KIB),
            _ => write!(f, "{n} bytes"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn parses_units() {
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("12"), Ok(12));
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size("128M"), Ok(128 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("0004K"), Ok(4096));
    }

    #[test]
    fn rejects_bad_sizes() {
        assert_eq!(parse_size(""), Err(SizeError::Empty));
        assert_eq!(parse_size("-4K"), Err(SizeError::Negative));
        assert_eq!(parse_size("1.5M"), Err(SizeError::Fractional));
        assert_eq!(parse_size("12Q"), Err(SizeError::BadUnit));
        assert_eq!(parse_size("12k"), Err(SizeError::BadUnit));
        assert_eq!(parse_size("12 M"), Err(SizeError::BadUnit));
        assert_eq!(parse_size("12MiB"), Err(SizeError::BadUnit));
        assert_eq!(parse_size("M"), Err(SizeError::NotANumber));
        assert_eq!(parse_size("+4K"), Err(SizeError::NotANumber));
        assert_eq!(parse_size(" 4K"), Err(SizeError::NotANumber));
        assert_eq!(parse_size("18446744073709551616"), Err(SizeError::Overflow));
        assert_eq!(parse_size("17179869184G"), Err(SizeError::Overflow));
        assert_eq!(parse_size("18446744073709551615"), Ok(u64::MAX));
    }

    #[test]
    fn displays_bytes() {
        assert_eq!(Bytes(0).to_string(), "0");
        assert_eq!(Bytes(256 * 1024).to_string(), "256K");
        assert_eq!(Bytes(128 << 20).to_string(), "128M");
        assert_eq!(Bytes(3 << 30).to_string(), "3G");
        assert_eq!(Bytes(1000).to_string(), "1000 bytes");
        for n in [4096, 1 << 20, 5 << 30] {
            assert_eq!(parse_size(&Bytes(n).to_string()), Ok(n));
        }
    }
}
