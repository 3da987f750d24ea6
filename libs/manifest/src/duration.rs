//! Durations in nanoseconds: parsing `"10ms"` and printing nanoseconds the same way.

use core::fmt;

const US: u64 = 1_000;
const MS: u64 = 1_000_000;
const S: u64 = 1_000_000_000;

/// Why [`parse_duration`] rejected a duration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DurationError {
    /// The string is empty.
    Empty,
    /// It starts with `-`.
    Negative,
    /// It has a fractional part (`1.5ms`).
    Fractional,
    /// It does not start with a decimal digit.
    NotANumber,
    /// Digits without a unit (`"10"`).
    MissingUnit,
    /// The suffix after the digits is not `ns`, `us`, `µs`, `ms` or `s`.
    BadUnit,
    /// The value in nanoseconds does not fit in 64 bits.
    Overflow,
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Empty => "empty duration",
            Self::Negative => "negative duration",
            Self::Fractional => {
                "fractional duration (use a smaller unit, e.g. \"1500us\" for 1.5ms)"
            }
            Self::NotANumber => "not a number",
            Self::MissingUnit => "a duration needs a unit: ns, us, ms or s",
            Self::BadUnit => "unknown unit (use ns, us, ms or s)",
            Self::Overflow => "duration does not fit in 64 bits of nanoseconds",
        })
    }
}

#[cfg(feature = "std")]
impl std::error::Error for DurationError {}

/// The part of a duration after its leading decimal digits: its unit as written, e.g. `"min"`
/// in `"10min"` (what [`DurationError::BadUnit`] is about).
pub(crate) fn unit_of(s: &str) -> &str {
    s.trim_start_matches(|c: char| c.is_ascii_digit())
}

/// Parses a duration into nanoseconds: decimal digits, then a unit `ns`, `us` (or `µs`), `ms`
/// or `s`. The unit is required; no sign, fraction, spaces or other units.
///
/// ```
/// assert_eq!(manifest::parse_duration("10ms"), Ok(10_000_000));
/// assert_eq!(manifest::parse_duration("500us"), Ok(500_000));
/// assert!(manifest::parse_duration("1.5ms").is_err());
/// assert!(manifest::parse_duration("10").is_err());
/// ```
pub fn parse_duration(s: &str) -> Result<u64, DurationError> {
    if s.is_empty() {
        return Err(DurationError::Empty);
    }
    if s.starts_with('-') {
        return Err(DurationError::Negative);
    }
    let unit = unit_of(s);
    let number = &s[..s.len() - unit.len()];
    if number.is_empty() {
        return Err(DurationError::NotANumber);
    }
    if unit.starts_with('.') {
        return Err(DurationError::Fractional);
    }
    let scale = match unit {
        "" => return Err(DurationError::MissingUnit),
        "ns" => 1,
        // The micro sign (U+00B5) and the Greek small letter mu (U+03BC) look alike.
        "us" | "\u{b5}s" | "\u{3bc}s" => US,
        "ms" => MS,
        "s" => S,
        _ => return Err(DurationError::BadUnit),
    };
    let value: u64 = number.parse().map_err(|_| DurationError::Overflow)?;
    value.checked_mul(scale).ok_or(DurationError::Overflow)
}

/// Displays a number of nanoseconds in the largest unit that divides it exactly: `10ms`,
/// `500us`, `2s`, `7ns` (zero is `0s`). [`parse_duration`] reads every form back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Time(pub u64);

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        match n {
            _ if n.is_multiple_of(S) => write!(f, "{}s", n / S),
            _ if n.is_multiple_of(MS) => write!(f, "{}ms", n / MS),
            _ if n.is_multiple_of(US) => write!(f, "{}us", n / US),
            _ => write!(f, "{n}ns"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn parses_units() {
        assert_eq!(parse_duration("0ns"), Ok(0));
        assert_eq!(parse_duration("0s"), Ok(0));
        assert_eq!(parse_duration("7ns"), Ok(7));
        assert_eq!(parse_duration("500us"), Ok(500_000));
        assert_eq!(parse_duration("500µs"), Ok(500_000));
        assert_eq!(parse_duration("500μs"), Ok(500_000));
        assert_eq!(parse_duration("10ms"), Ok(10_000_000));
        assert_eq!(parse_duration("2s"), Ok(2_000_000_000));
        assert_eq!(parse_duration("0010ms"), Ok(10_000_000));
    }

    #[test]
    fn rejects_bad_durations() {
        assert_eq!(parse_duration(""), Err(DurationError::Empty));
        assert_eq!(parse_duration("-1ms"), Err(DurationError::Negative));
        assert_eq!(parse_duration("-0s"), Err(DurationError::Negative));
        assert_eq!(parse_duration("1.5ms"), Err(DurationError::Fractional));
        assert_eq!(parse_duration("1."), Err(DurationError::Fractional));
        assert_eq!(parse_duration("10"), Err(DurationError::MissingUnit));
        assert_eq!(parse_duration("0"), Err(DurationError::MissingUnit));
        assert_eq!(parse_duration("10min"), Err(DurationError::BadUnit));
        assert_eq!(parse_duration("10MS"), Err(DurationError::BadUnit));
        assert_eq!(parse_duration("10 ms"), Err(DurationError::BadUnit));
        assert_eq!(parse_duration("10ms "), Err(DurationError::BadUnit));
        assert_eq!(parse_duration("10m"), Err(DurationError::BadUnit));
        assert_eq!(parse_duration("10µ"), Err(DurationError::BadUnit));
        assert_eq!(parse_duration("ms"), Err(DurationError::NotANumber));
        assert_eq!(parse_duration(".5ms"), Err(DurationError::NotANumber));
        assert_eq!(parse_duration("+1ms"), Err(DurationError::NotANumber));
        assert_eq!(parse_duration(" 1ms"), Err(DurationError::NotANumber));
    }

    #[test]
    fn overflow_at_the_edge() {
        assert_eq!(parse_duration("18446744073709551615ns"), Ok(u64::MAX));
        assert_eq!(parse_duration("18446744073709551616ns"), Err(DurationError::Overflow));
        assert_eq!(parse_duration("18446744073s"), Ok(18_446_744_073 * S));
        assert_eq!(parse_duration("18446744074s"), Err(DurationError::Overflow));
        assert_eq!(parse_duration("18446744073709552us"), Err(DurationError::Overflow));
        assert_eq!(parse_duration("99999999999999999999999s"), Err(DurationError::Overflow));
    }

    #[test]
    fn unit_of_names_what_follows_the_digits() {
        assert_eq!(unit_of("10min"), "min");
        assert_eq!(unit_of("10 ms"), " ms");
        assert_eq!(unit_of("10"), "");
        assert_eq!(unit_of("ms"), "ms");
    }

    #[test]
    fn displays_time() {
        assert_eq!(Time(0).to_string(), "0s");
        assert_eq!(Time(7).to_string(), "7ns");
        assert_eq!(Time(1_500).to_string(), "1500ns");
        assert_eq!(Time(500_000).to_string(), "500us");
        assert_eq!(Time(1_500_000).to_string(), "1500us");
        assert_eq!(Time(10_000_000).to_string(), "10ms");
        assert_eq!(Time(3_000_000_000).to_string(), "3s");
        for n in [0, 1, 999, 1_000, 2_500_000, 10 * S, u64::MAX] {
            assert_eq!(parse_duration(&Time(n).to_string()), Ok(n));
        }
    }
}
