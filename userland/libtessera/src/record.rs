//! Checksummed records: a fixed number of `u64` words followed by their 64-bit FNV-1a checksum,
//! all little-endian. Apps use them to check that messages arrive intact (`chanpipe`).
//!
//! A record of `n` words is `8 * (n + 1)` bytes ([`encoded_len`]); the checksum covers the
//! `8 * n` bytes of the words as encoded.

use core::fmt;

/// FNV-1a's 64-bit offset basis.
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
/// FNV-1a's 64-bit prime.
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// The 64-bit FNV-1a hash of `bytes`.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(FNV_OFFSET, |h, &b| (h ^ u64::from(b)).wrapping_mul(FNV_PRIME))
}

/// The encoded size of a record of `words` words.
pub const fn encoded_len(words: usize) -> usize {
    (words + 1) * 8
}

/// Why [`decode`] refused a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordError {
    /// The bytes are not exactly [`encoded_len`] of the expected number of words.
    WrongLength,
    /// The checksum does not match the words.
    BadChecksum,
}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordError::WrongLength => f.write_str("record of the wrong length"),
            RecordError::BadChecksum => f.write_str("record checksum mismatch"),
        }
    }
}

/// Encodes `words` and their checksum at the start of `out`; returns the length written, or
/// `None` if `out` is shorter than [`encoded_len`]`(words.len())`.
pub fn encode(words: &[u64], out: &mut [u8]) -> Option<usize> {
    let len = encoded_len(words.len());
    let out = out.get_mut(..len)?;
    let (body, sum) = out.split_at_mut(len - 8);
    for (chunk, word) in body.chunks_exact_mut(8).zip(words) {
        chunk.copy_from_slice(&word.to_le_bytes());
    }
    sum.copy_from_slice(&fnv1a64(body).to_le_bytes());
    Some(len)
}

/// Decodes a record of exactly `words.len()` words from `bytes` into `words`, checking its
/// length and checksum.
pub fn decode(bytes: &[u8], words: &mut [u64]) -> Result<(), RecordError> {
    if bytes.len() != encoded_len(words.len()) {
        return Err(RecordError::WrongLength);
    }
    let (body, sum) = bytes.split_at(bytes.len() - 8);
    let sum = u64::from_le_bytes(sum.try_into().map_err(|_| RecordError::WrongLength)?);
    if fnv1a64(body) != sum {
        return Err(RecordError::BadChecksum);
    }
    for (word, chunk) in words.iter_mut().zip(body.chunks_exact(8)) {
        let mut b = [0u8; 8];
        b.copy_from_slice(chunk);
        *word = u64::from_le_bytes(b);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_matches_the_reference_values() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn round_trips() {
        let words = [0, 1, u64::MAX, 0x0123_4567_89ab_cdef, 42, 7];
        let mut buf = [0u8; 64];
        assert_eq!(encode(&words, &mut buf), Some(56));
        assert_eq!(buf[..8], [0; 8]);
        assert_eq!(buf[24..32], 0x0123_4567_89ab_cdef_u64.to_le_bytes());
        assert_eq!(buf[48..56], fnv1a64(&buf[..48]).to_le_bytes());
        let mut back = [0u64; 6];
        assert_eq!(decode(&buf[..56], &mut back), Ok(()));
        assert_eq!(back, words);
        assert_eq!(encode(&words, &mut buf[..55]), None);
        assert_eq!(encode(&[], &mut buf), Some(8));
        assert_eq!(decode(&buf[..8], &mut []), Ok(()));
    }

    #[test]
    fn damage_is_detected() {
        let words = [3, 1, 4, 1, 5, 9];
        let mut buf = [0u8; 56];
        encode(&words, &mut buf).unwrap();
        let mut back = [0u64; 6];
        for byte in 0..56 {
            for bit in 0..8 {
                let mut bad = buf;
                bad[byte] ^= 1 << bit;
                assert_eq!(decode(&bad, &mut back), Err(RecordError::BadChecksum), "{byte}.{bit}");
            }
        }
        assert_eq!(decode(&buf[..48], &mut back), Err(RecordError::WrongLength));
        assert_eq!(decode(&buf, &mut [0u64; 5]), Err(RecordError::WrongLength));
    }
}
