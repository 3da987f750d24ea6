//! Little-endian fields of fixed-size messages. Offsets are the protocol's fixed layout; each
//! accessor takes the message as an array so that a layout that does not fit fails to build
//! rather than at run time (the bounds are checked once more by slicing, which cannot fail for
//! a layout that fits).

/// The little-endian `u64` at `at` in `b`.
#[inline]
pub fn u64_at<const N: usize>(b: &[u8; N], at: usize) -> u64 {
    let mut w = [0; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// The little-endian `u32` at `at` in `b`.
#[inline]
pub fn u32_at<const N: usize>(b: &[u8; N], at: usize) -> u32 {
    let mut w = [0; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w)
}

/// The little-endian `u16` at `at` in `b`.
#[inline]
pub fn u16_at<const N: usize>(b: &[u8; N], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

/// Writes `v` little-endian at `at` in `b`.
#[inline]
pub fn put_u64<const N: usize>(b: &mut [u8; N], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// Writes `v` little-endian at `at` in `b`.
#[inline]
pub fn put_u32<const N: usize>(b: &mut [u8; N], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

/// Writes `v` little-endian at `at` in `b`.
#[inline]
pub fn put_u16<const N: usize>(b: &mut [u8; N], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}

/// Whether every byte of `b` is zero (a reserved field, a field the message's kind does not
/// use).
#[inline]
pub fn is_zero(b: &[u8]) -> bool {
    b.iter().all(|&x| x == 0)
}

/// The id of a message that may not decode: its first 8 bytes, little-endian, or 0 if it is
/// shorter, so that an error response can still name it.
#[inline]
pub fn leading_id(msg: &[u8]) -> u64 {
    msg.get(..8).and_then(|b| b.try_into().ok()).map_or(0, u64::from_le_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_little_endian() {
        let mut b = [0u8; 16];
        put_u64(&mut b, 0, 0x0102_0304_0506_0708);
        put_u32(&mut b, 8, 0x0a0b_0c0d);
        put_u16(&mut b, 12, 0xeeff);
        assert_eq!(b[..8], [8, 7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(b[8..14], [0x0d, 0x0c, 0x0b, 0x0a, 0xff, 0xee]);
        assert_eq!(u64_at(&b, 0), 0x0102_0304_0506_0708);
        assert_eq!(u32_at(&b, 8), 0x0a0b_0c0d);
        assert_eq!(u16_at(&b, 12), 0xeeff);
        assert!(is_zero(&b[14..]));
        assert!(!is_zero(&b[13..]));
    }

    #[test]
    fn leading_id_of_short_messages_is_zero() {
        assert_eq!(leading_id(&[1, 2, 3]), 0);
        assert_eq!(leading_id(&[]), 0);
        assert_eq!(leading_id(&[9, 0, 0, 0, 0, 0, 0, 0, 0xff]), 9);
    }
}
