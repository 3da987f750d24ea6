//! A stream's accounts, read from the words where the driver publishes them after the data
//! area (`net_interface::protocol::StreamAccounts`): without a message, like the CPU accounts
//! in the control block.

use core::sync::atomic::{AtomicU64, Ordering};

use net_interface::StreamAccounts;
use net_interface::protocol::ACCOUNT_WORDS;

/// A consistent copy of the accounts in `words` (a sequence number, odd while the driver
/// writes, then the accounts' words); `None` if `words` is too short or no consistent copy
/// was seen in a few tries.
pub fn read(words: &[AtomicU64]) -> Option<StreamAccounts> {
    let words = words.get(..ACCOUNT_WORDS)?;
    for _ in 0..64 {
        let seq = words[0].load(Ordering::Acquire);
        if seq % 2 == 1 {
            core::hint::spin_loop();
            continue;
        }
        let mut w = [0u64; ACCOUNT_WORDS - 1];
        for (v, word) in w.iter_mut().zip(&words[1..]) {
            *v = word.load(Ordering::Relaxed);
        }
        if words[0].load(Ordering::Acquire) == seq {
            return Some(StreamAccounts::from_words(w));
        }
    }
    None
}
