//! The argument block the kernel passes to a domain, and an iterator over its strings.
//!
//! Format: `u32 argc`, then `argc` times `u32 len` followed by `len` bytes of UTF-8; all
//! little-endian, packed (no padding). A zero-length block means no arguments.

use core::fmt;

/// The domain's arguments: an iterator over `&'static str`, validated when created.
#[derive(Clone, Debug)]
pub struct Args {
    /// The encoded arguments not yet returned (after `argc`).
    rest: &'static [u8],
    /// How many arguments are left in `rest`.
    remaining: u32,
}

/// Why an argument block is malformed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgsError {
    /// The block is non-empty but shorter than its 4-byte `argc`.
    NoCount,
    /// Argument `index`'s length or bytes run past the end of the block.
    Truncated {
        /// Which argument (from 0).
        index: u32,
    },
    /// Argument `index` is not UTF-8.
    NotUtf8 {
        /// Which argument (from 0).
        index: u32,
    },
    /// Bytes follow the last argument.
    TrailingBytes {
        /// How many.
        extra: usize,
    },
}

impl fmt::Display for ArgsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ArgsError::NoCount => write!(f, "argument block shorter than its count"),
            ArgsError::Truncated { index } => write!(f, "argument {index} runs past the block"),
            ArgsError::NotUtf8 { index } => write!(f, "argument {index} is not UTF-8"),
            ArgsError::TrailingBytes { extra } => {
                write!(f, "{extra} stray bytes after the last argument")
            }
        }
    }
}

/// Splits a little-endian `u32` off the front of `bytes`.
fn take_u32(bytes: &[u8]) -> Option<(u32, &[u8])> {
    let (head, tail) = bytes.split_first_chunk::<4>()?;
    Some((u32::from_le_bytes(*head), tail))
}

/// Splits one encoded argument off the front of `bytes`.
fn take_arg(bytes: &[u8], index: u32) -> Result<(&str, &[u8]), ArgsError> {
    let (len, tail) = take_u32(bytes).ok_or(ArgsError::Truncated { index })?;
    let len = usize::try_from(len).map_err(|_| ArgsError::Truncated { index })?;
    if len > tail.len() {
        return Err(ArgsError::Truncated { index });
    }
    let (text, tail) = tail.split_at(len);
    let text = core::str::from_utf8(text).map_err(|_| ArgsError::NotUtf8 { index })?;
    Ok((text, tail))
}

impl Args {
    /// No arguments.
    pub const fn empty() -> Args {
        Args { rest: &[], remaining: 0 }
    }

    /// Validates an argument block: every length within the block, every argument UTF-8, no
    /// bytes left over.
    pub fn parse(block: &'static [u8]) -> Result<Args, ArgsError> {
        if block.is_empty() {
            return Ok(Args::empty());
        }
        let (argc, rest) = take_u32(block).ok_or(ArgsError::NoCount)?;
        let mut tail = rest;
        for index in 0..argc {
            tail = take_arg(tail, index)?.1;
        }
        if !tail.is_empty() {
            return Err(ArgsError::TrailingBytes { extra: tail.len() });
        }
        Ok(Args { rest, remaining: argc })
    }
}

impl Iterator for Args {
    type Item = &'static str;

    fn next(&mut self) -> Option<&'static str> {
        if self.remaining == 0 {
            return None;
        }
        // Validated by `parse`, so this cannot fail; if it did, the iteration just ends.
        let rest: &'static [u8] = self.rest;
        let (arg, tail) = take_arg(rest, 0).ok()?;
        self.rest = tail;
        self.remaining -= 1;
        Some(arg)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.remaining as usize;
        (n, Some(n))
    }
}

impl ExactSizeIterator for Args {}

#[cfg(test)]
mod tests {
    use std::vec::Vec;

    use super::*;

    fn block(args: &[&str]) -> Vec<u8> {
        let mut b = (args.len() as u32).to_le_bytes().to_vec();
        for a in args {
            b.extend_from_slice(&(a.len() as u32).to_le_bytes());
            b.extend_from_slice(a.as_bytes());
        }
        b
    }

    fn leak(b: Vec<u8>) -> &'static [u8] {
        b.leak()
    }

    #[test]
    fn parses_and_iterates() {
        let args = Args::parse(leak(block(&["--rounds", "3", "", "ünï"]))).unwrap();
        assert_eq!(args.len(), 4);
        assert_eq!(args.collect::<Vec<_>>(), ["--rounds", "3", "", "ünï"]);
        assert_eq!(Args::parse(leak(block(&[]))).unwrap().count(), 0);
        assert_eq!(Args::parse(&[]).unwrap().count(), 0);
        assert_eq!(Args::empty().next(), None);
    }

    #[test]
    fn rejects_malformed_blocks() {
        let good = block(&["abc", "de"]);
        for len in 1..good.len() {
            let err = Args::parse(leak(good[..len].to_vec())).unwrap_err();
            if len < 4 {
                assert_eq!(err, ArgsError::NoCount, "prefix {len}");
            } else {
                assert!(matches!(err, ArgsError::Truncated { .. }), "prefix {len}: {err:?}");
            }
        }
        let mut extra = good.clone();
        extra.push(0);
        assert_eq!(Args::parse(leak(extra)).unwrap_err(), ArgsError::TrailingBytes { extra: 1 });
        let mut bad_utf8 = good.clone();
        bad_utf8[8] = 0xff;
        assert_eq!(Args::parse(leak(bad_utf8)).unwrap_err(), ArgsError::NotUtf8 { index: 0 });
        let mut huge_len = good.clone();
        huge_len[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(Args::parse(leak(huge_len)).unwrap_err(), ArgsError::Truncated { index: 0 });
        let mut huge_count = good;
        huge_count[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(Args::parse(leak(huge_count)).unwrap_err(), ArgsError::Truncated { index: 2 });
    }

    #[test]
    fn errors_display() {
        use std::string::ToString;
        assert_eq!(ArgsError::NotUtf8 { index: 2 }.to_string(), "argument 2 is not UTF-8");
    }
}
