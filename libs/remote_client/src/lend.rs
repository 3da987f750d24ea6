//! Pages written from the frame they are in: the first transmission of a page write goes as
//! one SendLoan (`net_interface::protocol`) naming the page's frame, lent to the network
//! driver for its device to read, instead of three datagrams copied through the data area and
//! the driver's buffers. The datagrams are the same bytes: a data packet is RPP's header and
//! the data body's fixed part ([`HEAD`] bytes, written to the data area) followed by its chunk
//! of the page, which the NIC gathers from the frame. The CRC-32 in each header covers the
//! chunk as the transfer encoded it from its copy of the page, equal to the frame's bytes (the
//! page is read-only while lent), so the server checks every byte end to end.
//!
//! Anything else goes the usual way: a retransmission (from the transfer's copy), a page that
//! cannot be lent (not page-aligned, not in a stretch the domain manages, lent already to the
//! mirror's transfer), a driver that refuses (its queue full, the server's hardware address
//! not known yet): the packets then go through the data area, as before. A driver that takes
//! no loans at all ([`NetError::BadLoan`]) is not asked again.
//!
//! Before the write returns, the client waits until the driver is done with its loans (its
//! published accounts), so that the pager may change the page at once.

use alloc::vec::Vec;

use net_client::{Session, Transport};
use net_interface::{Endpoint, LoanSend, NetError};
use pager::PAGE_SIZE;
use rpp::wire::{DATA_FIXED, HEADER};

/// Bytes of a data packet before its chunk: RPP's header and the data body's fixed part.
pub const HEAD: usize = HEADER + DATA_FIXED;

/// How many times a write waits (a pause each) for the driver to be done with its loans:
/// about 20 ms at 20 us a pause.
const WAIT_PAUSES: u32 = 1000;

/// What the client has lent.
#[derive(Clone, Copy, Debug)]
pub struct Lending {
    /// Whether the driver takes loans (until it says it does not).
    pub on: bool,
    /// SendLoans the driver accepted.
    pub sent: u64,
    /// Pages that went by copy instead (not lendable, or refused).
    pub copied: u64,
}

impl Default for Lending {
    fn default() -> Lending {
        Lending { on: true, sent: 0, copied: 0 }
    }
}

impl Lending {
    /// Sends `packets`, a page write's first transmission (its data packets in order, `chunk`
    /// bytes of the page each but the last), to `to` from the frame of the page at `va`:
    /// whether it went (else the caller sends the packets the usual way).
    pub fn send_page<T: Transport>(
        &mut self,
        session: &mut Session<T>,
        to: Endpoint,
        packets: &[(u8, Vec<u8>)],
        va: usize,
        chunk: usize,
    ) -> Result<bool, NetError> {
        if !self.on || !va.is_multiple_of(PAGE_SIZE) || chunk == 0 || chunk > u16::MAX as usize {
            return Ok(false);
        }
        let lent = LoanSend { loan: 0, at: 0, head: HEAD as u16, chunk: chunk as u16 };
        let len = PAGE_SIZE as u32;
        // Exactly the page's chunks, in order, each behind its head.
        let n = lent.datagrams(len) as usize;
        let fits = packets.len() == n
            && packets
                .iter()
                .enumerate()
                .all(|(i, (_, p))| p.len() == HEAD + lent.piece(len, i as u32).1 as usize);
        if !fits {
            self.copied += 1;
            return Ok(false);
        }
        let Some(loan) = session.transport().lend(va) else {
            self.copied += 1;
            return Ok(false);
        };
        let heads: Vec<u8> = packets.iter().flat_map(|(_, p)| p[..HEAD].iter().copied()).collect();
        match session.send_lent(to, &heads, len, LoanSend { loan, ..lent }) {
            Ok(()) => {
                self.sent += 1;
                Ok(true)
            }
            Err(NetError::Closed) => Err(NetError::Closed),
            Err(e) => {
                // Refused: the driver returned the loan before it answered, or never took it.
                session.transport().take_back(loan);
                self.on = e != NetError::BadLoan;
                self.copied += 1;
                Ok(false)
            }
        }
    }

    /// Waits until the driver is done with every loan of this client's (see the
    /// [module](self)); whether it is.
    pub fn settle<T: Transport>(&self, session: &mut Session<T>) -> bool {
        self.sent == 0 || session.wait_loans_done(self.sent, WAIT_PAUSES)
    }
}
