//! The [`Transport`] of a client domain: the runtime's IO channels `NAME-req` and `NAME-resp`
//! that the manifest names, and the data area the driver granted at the Open (memory of the
//! driver domain, mapped read-write into the client for the session, with the page of
//! accounts after it).
#![allow(unsafe_code)]

use core::sync::atomic::AtomicU64;

use net_interface::protocol::ACCOUNT_WORDS;
use net_interface::{NetError, SessionInfo, StreamAccounts};
use tessera::channel::{self, Receiver, Sender};

use crate::session::Transport;

/// The longest channel name with its `-req` or `-resp` suffix.
pub const MAX_NAME: usize = 32;

/// A client domain's channels to the network driver domain.
pub struct ChannelTransport {
    tx: Sender,
    rx: Receiver,
}

impl ChannelTransport {
    /// Opens the channels `NAME-req` and `NAME-resp`; `None` if the manifest gives this
    /// domain no such pair (or the name is too long).
    pub fn connect(name: &str) -> Option<ChannelTransport> {
        let tx = channel::open_sender(&suffixed(name, "-req")?)?;
        let rx = channel::open_receiver(&suffixed(name, "-resp")?)?;
        Some(ChannelTransport { tx, rx })
    }
}

/// `name` with `suffix`, as the manifest names a session's channels.
fn suffixed(name: &str, suffix: &str) -> Option<heapless::String<MAX_NAME>> {
    let mut s = heapless::String::new();
    s.push_str(name).and_then(|()| s.push_str(suffix)).ok()?;
    Some(s)
}

/// Whether `[offset, offset + len)` lies inside the area `info` describes.
fn inside(info: &SessionInfo, offset: u64, len: usize) -> bool {
    offset.checked_add(len as u64).is_some_and(|end| end <= info.area_len)
}

impl Transport for ChannelTransport {
    fn send(&mut self, msg: &[u8]) -> Result<(), NetError> {
        self.tx.send(msg).map_err(|_| NetError::Closed)
    }

    fn recv(&mut self, buf: &mut [u8]) -> Result<usize, NetError> {
        self.rx.recv(buf).map_err(|_| NetError::Closed)
    }

    fn recv_until(&mut self, buf: &mut [u8], deadline_ns: u64) -> Result<Option<usize>, NetError> {
        self.rx.recv_until(buf, deadline_ns).map_err(|_| NetError::Closed)
    }

    fn write(&mut self, info: &SessionInfo, offset: u64, bytes: &[u8]) {
        assert!(inside(info, offset, bytes.len()), "outside the data area");
        let at = (info.area_base + offset) as usize as *mut u8;
        // SAFETY: the driver made the data area a stretch of its own memory and gave this
        // domain read-write rights on all `area_len` bytes for the session (the protocol:
        // `net_interface::protocol`); the range is inside it (checked above); the driver reads
        // the send bytes only while handling the Send that follows, which the session sends
        // after this copy.
        unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), at, bytes.len()) }
    }

    fn read<R>(
        &mut self,
        info: &SessionInfo,
        offset: u64,
        len: u32,
        read: impl FnOnce(&[u8]) -> R,
    ) -> R {
        assert!(inside(info, offset, len as usize), "outside the data area");
        // SAFETY: as in `write`, the range is inside the area granted to this domain; it is a
        // receive slot the driver filled before sending its Received message and does not
        // touch again until the session's Release, sent after `read` returns.
        let bytes = unsafe {
            core::slice::from_raw_parts(
                (info.area_base + offset) as usize as *const u8,
                len as usize,
            )
        };
        read(bytes)
    }

    fn accounts(&mut self, info: &SessionInfo) -> Option<StreamAccounts> {
        let base = info.area_base.checked_add(info.area_len)?;
        if !base.is_multiple_of(8) || info.area_len == 0 {
            return None;
        }
        // SAFETY: the driver made the data area and the page after it one stretch of its
        // memory and gave this domain read-write rights to all of it for the session; the
        // words are 8-byte aligned (checked above), read only as atomics, which may alias the
        // driver's writes, and no other reference to them is made.
        let words = unsafe {
            core::slice::from_raw_parts(base as usize as *const AtomicU64, ACCOUNT_WORDS)
        };
        crate::accounts::read(words)
    }

    fn lend(&mut self, va: usize) -> Option<u64> {
        let (driver, endpoint) = self.tx.peer();
        let access = abi::loan_access::DEVICE_READS;
        tessera::syscall::frame_lend(va, driver, endpoint, access).ok()
    }

    fn take_back(&mut self, loan: u64) {
        // A loan the driver returned already (or kept and will return) is NotFound or InUse
        // here: nothing to do.
        let _ = tessera::syscall::frame_return(loan);
    }

    fn pause(&mut self) {
        // 20 us, or less if an endpoint changes.
        let _ = tessera::syscall::block(tessera::clock::now_ns() + 20_000);
    }
}
