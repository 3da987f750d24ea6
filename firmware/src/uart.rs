//! The ns16550 UART of QEMU `virt` at `0x1000_0000`, polled. QEMU's model works without
//! programming a baud rate or line format, so the firmware only reads and writes bytes; bytes go
//! out unchanged (no `\n` to `\r\n` translation).

use core::fmt;

/// The UART's registers.
const BASE: usize = 0x1000_0000;
/// Transmit holding register (write) and receive buffer register (read).
const THR_RBR: *mut u8 = BASE as *mut u8;
/// Line status register.
const LSR: *const u8 = (BASE + 5) as *const u8;
/// `LSR`: a received byte waits in `RBR`.
const LSR_DATA_READY: u8 = 1 << 0;
/// `LSR`: `THR` can take a byte.
const LSR_THR_EMPTY: u8 = 1 << 5;

/// Reads the line status register.
fn line_status() -> u8 {
    // SAFETY: `LSR` is the UART's line status register, a byte-wide MMIO register; reading it has
    // no side effects that matter here (it clears overrun/error flags, which nothing uses).
    unsafe { LSR.read_volatile() }
}

/// Sends one byte, waiting until the transmitter can take it.
pub fn write_byte(byte: u8) {
    while line_status() & LSR_THR_EMPTY == 0 {
        core::hint::spin_loop();
    }
    // SAFETY: `THR` is the UART's transmit register and `LSR` says it is empty; writing a byte
    // there sends it and touches nothing else.
    unsafe { THR_RBR.write_volatile(byte) }
}

/// Sends `bytes` in order.
pub fn write(bytes: &[u8]) {
    bytes.iter().copied().for_each(write_byte);
}

/// Returns the next received byte, or `None` if none waits.
pub fn read_byte() -> Option<u8> {
    if line_status() & LSR_DATA_READY == 0 {
        return None;
    }
    // SAFETY: `RBR` is the UART's receive register and `LSR` says it holds a byte; reading it
    // consumes that byte, which is the point.
    Some(unsafe { THR_RBR.read_volatile() })
}

/// `core::fmt` output to the UART, for the firmware's own messages.
pub struct Writer;

impl fmt::Write for Writer {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        write(s.as_bytes());
        Ok(())
    }
}
