//! What a driver domain that serves client domains does the same way whatever it drives (the
//! block and the network driver domains): finding its clients in the control block's channels
//! ([`clients`]) and giving each a data area ([`client_area`]).
//!
//! A client is a receiving end named `NAME-req` with the sending end `NAME-resp` (the
//! manifest connects both to the same client domain). Its data area is a DMA stretch of the
//! driver's own, of which the client's domain is given read-write rights, with the page after
//! it for the words where the driver publishes the client's accounts
//! (`io_protocol::published`).

use core::sync::atomic::AtomicU64;

use abi::{ChannelRole, ChannelSlot, Rights};

use crate::channel::{self, Receiver, Sender};
use crate::dma::{self, DmaRegion};
use crate::{PAGE_SIZE, SysError, syscall};

/// The suffix of a client's response channel.
const RESP: &str = "-resp";

/// A client found in the control block: its channels and its slot there (its domain, its
/// contract).
pub struct DriverClient {
    /// The request channel's name (`NAME-req`).
    pub name: &'static str,
    /// The request channel's slot in the control block.
    pub slot: &'static ChannelSlot,
    /// The receiving end of its requests.
    pub rx: Receiver,
    /// The sending end of its responses.
    pub tx: Sender,
}

/// The clients named by the control block's channels, in slot order: each receiving end
/// `NAME-req` whose `NAME-resp` sending end the domain also holds. Slots that name no such
/// pair are passed over.
pub fn clients() -> impl Iterator<Item = DriverClient> {
    crate::dcb().channels.iter().filter_map(|slot| {
        if slot.role != ChannelRole::Receiver as u16 {
            return None;
        }
        let len = slot.name.iter().position(|&b| b == 0).unwrap_or(slot.name.len());
        let name = core::str::from_utf8(&slot.name[..len]).ok()?;
        let base = name.strip_suffix("-req")?;
        let mut resp = [0u8; 32];
        let resp_len = base.len() + RESP.len();
        let buf = resp.get_mut(..resp_len)?;
        buf[..base.len()].copy_from_slice(base.as_bytes());
        buf[base.len()..].copy_from_slice(RESP.as_bytes());
        let rx = channel::open_receiver(name)?;
        let tx = channel::open_sender(core::str::from_utf8(buf).ok()?)?;
        Some(DriverClient { name, slot, rx, tx })
    })
}

/// A client's data area: its bytes, the DMA region they are in (followed by the accounts'
/// page), and the words where the client reads its accounts.
pub struct ClientArea {
    /// The area's `bytes` bytes (zeroed); the accounts' page is not among them.
    pub bytes: &'static mut [u8],
    /// The region: the area, then a page for the accounts.
    pub region: DmaRegion,
    /// The `account_words` words at the start of the page after the area.
    pub accounts: Option<&'static [AtomicU64]>,
}

/// A data area of `bytes` bytes (a multiple of 8) for the client in domain `peer`, with a page
/// after it for `account_words` words of accounts; the client's domain is given read-write
/// rights to all of it.
pub fn client_area(
    peer: usize,
    bytes: usize,
    account_words: usize,
) -> Result<ClientArea, SysError> {
    let (mem, region) = dma::alloc_buffer(bytes + PAGE_SIZE)?;
    syscall::stretch_rights(region.virt, peer, Rights::READ.union(Rights::WRITE))?;
    // The accounts' page is reached as atomics only: its bytes are not lent.
    let (bytes_, _) = mem.split_at_mut(bytes);
    Ok(ClientArea { bytes: bytes_, region, accounts: dma::words(&region, bytes, account_words) })
}
