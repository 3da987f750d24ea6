//! Words a driver publishes in memory that its client may read at any time, without a
//! message: word 0 is a sequence number, odd while the driver writes the words after it.
//! Only the driver writes; a reader takes a copy only if the sequence number was even and
//! unchanged around its reads, and gives up after [`READ_TRIES`] tries (a driver that died
//! while writing leaves the number odd for ever).

use core::sync::atomic::{AtomicU64, Ordering};

/// How many times [`read`] tries for a consistent copy.
pub const READ_TRIES: usize = 64;

/// Publishes `values` in the words after the sequence number in `words` (as many as both
/// have), with the sequence number odd while they are written. The driver is the only writer.
#[inline]
pub fn publish(words: &[AtomicU64], values: &[u64]) {
    let Some((seq, rest)) = words.split_first() else { return };
    let s = seq.load(Ordering::Relaxed);
    seq.store(s.wrapping_add(1), Ordering::Release);
    for (w, &v) in rest.iter().zip(values) {
        w.store(v, Ordering::Relaxed);
    }
    seq.store(s.wrapping_add(2), Ordering::Release);
}

/// A consistent copy of the `N` words after the sequence number in `words`; `None` if `words`
/// has fewer than `N + 1` words or no consistent copy was seen in [`READ_TRIES`] tries.
#[inline]
pub fn read<const N: usize>(words: &[AtomicU64]) -> Option<[u64; N]> {
    let (seq, rest) = words.split_first()?;
    let rest = rest.get(..N)?;
    for _ in 0..READ_TRIES {
        let s = seq.load(Ordering::Acquire);
        if s % 2 == 1 {
            core::hint::spin_loop();
            continue;
        }
        let mut w = [0u64; N];
        for (v, word) in w.iter_mut().zip(rest) {
            *v = word.load(Ordering::Relaxed);
        }
        if seq.load(Ordering::Acquire) == s {
            return Some(w);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words<const M: usize>() -> [AtomicU64; M] {
        core::array::from_fn(|_| AtomicU64::new(0))
    }

    #[test]
    fn published_words_read_back_and_the_sequence_number_moves_by_two() {
        let w = words::<4>();
        publish(&w, &[7, 8, 9]);
        assert_eq!(read::<3>(&w), Some([7, 8, 9]));
        assert_eq!(w[0].load(Ordering::Relaxed), 2);
        publish(&w, &[1, 2, 3, 4, 5]);
        assert_eq!(read::<3>(&w), Some([1, 2, 3]));
        assert_eq!(w[0].load(Ordering::Relaxed), 4);
    }

    #[test]
    fn a_write_in_progress_or_too_few_words_reads_none() {
        let w = words::<4>();
        publish(&w, &[7, 8, 9]);
        assert_eq!(read::<4>(&w), None);
        assert_eq!(read::<3>(&w[..3]), None);
        assert_eq!(read::<0>(&[]), None);
        w[0].store(5, Ordering::Relaxed);
        assert_eq!(read::<3>(&w), None);
    }

    #[test]
    fn the_sequence_number_wraps() {
        let w = words::<2>();
        w[0].store(u64::MAX - 1, Ordering::Relaxed);
        publish(&w, &[3]);
        assert_eq!(w[0].load(Ordering::Relaxed), 0);
        assert_eq!(read::<1>(&w), Some([3]));
    }
}
