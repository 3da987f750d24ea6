//! COM1, the 16550 UART at I/O port 0x3f8: 115200 baud, 8N1, polled, no interrupts.

use core::sync::atomic::{AtomicBool, Ordering};

use ::x86_64::instructions::port::Port;

/// COM1's first register.
pub(super) const BASE: u16 = 0x3f8;
/// One past COM1's last register.
pub(super) const END: u16 = BASE + 8;

/// Line status register: bit 5 says the transmit holding register is empty.
const LSR: u16 = BASE + 5;
const LSR_THR_EMPTY: u8 = 1 << 5;

static READY: AtomicBool = AtomicBool::new(false);

/// Programs the UART for 115200 baud, 8 data bits, no parity, one stop bit, FIFOs on, no
/// interrupts. Idempotent; `write` calls it on first use.
pub(super) fn init() {
    let regs: [(u16, u8); 7] = [
        (BASE + 1, 0x00), // IER: no interrupts
        (BASE + 3, 0x80), // LCR: DLAB on, to reach the divisor
        (BASE, 0x01),     // DLL: divisor 1 = 115200 baud
        (BASE + 1, 0x00), // DLM
        (BASE + 3, 0x03), // LCR: 8N1, DLAB off
        (BASE + 2, 0xc7), // FCR: FIFOs on and cleared, 14-byte trigger
        (BASE + 4, 0x03), // MCR: DTR and RTS, OUT2 off (no IRQ)
    ];
    for (port, value) in regs {
        // SAFETY: COM1's registers are at 0x3f8..0x400 on every PC platform QEMU offers, and
        // only this module touches them; these writes configure the line and move no memory.
        unsafe { Port::<u8>::new(port).write(value) };
    }
    READY.store(true, Ordering::Release);
}

/// Writes `bytes` as they are, waiting for room in the transmitter before each one.
pub(super) fn write(bytes: &[u8]) {
    if !READY.load(Ordering::Acquire) {
        init();
    }
    let mut lsr = Port::<u8>::new(LSR);
    let mut thr = Port::<u8>::new(BASE);
    for &b in bytes {
        // SAFETY: reading COM1's line status register has no side effect besides clearing
        // error bits this driver does not use.
        while unsafe { lsr.read() } & LSR_THR_EMPTY == 0 {
            core::hint::spin_loop();
        }
        // SAFETY: writing the transmit holding register of COM1 sends one byte; callers
        // serialise (the logger holds interrupts off while it writes a frame).
        unsafe { thr.write(b) };
    }
}
