//! The stream's disk-time accounts, as the driver publishes them in the words after the data
//! area (`blk_interface::protocol::StreamAccounts`): read without a message, like the CPU accounts in
//! the control block.
#![allow(unsafe_code)]

use core::sync::atomic::AtomicU64;

use blk_interface::protocol::{ACCOUNT_WORDS, SessionInfo, StreamAccounts};

/// The accounts of the session `info` describes, if a consistent copy could be read (the
/// driver bumps a sequence number, odd while it writes: `io_protocol::published`); `None` if
/// the session names no aligned place for them.
pub fn read(info: &SessionInfo) -> Option<StreamAccounts> {
    let base = info.area_base.checked_add(info.area_len)?;
    if !base.is_multiple_of(8) || info.area_len == 0 {
        return None;
    }
    // SAFETY: the driver made the data area and the page after it one stretch of its memory
    // and gave this domain read-write rights to all of it for the session (the block protocol:
    // `blk_interface::protocol`); the words are 8-byte aligned (checked above), read only as atomics,
    // which may alias the driver's writes, and no other reference to them is made.
    let words =
        unsafe { core::slice::from_raw_parts(base as usize as *const AtomicU64, ACCOUNT_WORDS) };
    io_protocol::published::read(words).map(StreamAccounts::from_words)
}
