//! A stream's accounts, read from the words where the driver publishes them after the data
//! area (`net_interface::protocol::StreamAccounts`): without a message, like the CPU accounts
//! in the control block.

use core::sync::atomic::AtomicU64;

use net_interface::StreamAccounts;

/// A consistent copy of the accounts in `words` (a sequence number, odd while the driver
/// writes, then the accounts' words: `io_protocol::published`); `None` if `words` is too
/// short or no consistent copy was seen in a few tries.
pub fn read(words: &[AtomicU64]) -> Option<StreamAccounts> {
    io_protocol::published::read(words).map(StreamAccounts::from_words)
}
