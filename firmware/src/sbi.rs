//! The SBI: rustsbi's dispatcher over this machine's console, timer and reset, plus the legacy
//! v0.1 calls rustsbi 0.4 does not have.

use crate::frame::TrapFrame;
use crate::{clint, csr, phys_mem, sifive_test, uart};
use rustsbi::spec::srst;
use rustsbi::{Physical, RustSBI, SbiRet};

/// The SBI implementation: each field provides the extension its name selects (Base comes
/// from rustsbi, with the machine IDs read from the CSRs).
#[derive(RustSBI)]
struct Firmware {
    /// `DBCN` over the UART.
    console: Console,
    /// `TIME` over the CLINT.
    timer: Timer,
    /// `SRST` over the `sifive_test` device.
    reset: Reset,
}

/// The one instance the trap handler calls.
static SBI: Firmware = Firmware { console: Console, timer: Timer, reset: Reset };

/// The debug console: the ns16550 UART, bytes unchanged.
struct Console;

/// The SBI timer: the hart's CLINT `mtimecmp`, forwarded as the supervisor timer interrupt.
struct Timer;

/// System reset: the `sifive_test` device.
struct Reset;

/// `SRST` reset types and reasons from this value up are vendor-specific; for a vendor reason
/// the low bits are the exit status (see the crate documentation).
const VENDOR_REASON: u32 = 0xF000_0000;

/// Legacy (v0.1) extension IDs, each a single call (the `sbi-spec` names).
mod legacy {
    /// `sbi_set_timer(stime_value)`.
    pub const LEGACY_SET_TIMER: usize = 0x00;
    /// `sbi_console_putchar(ch)`.
    pub const LEGACY_CONSOLE_PUTCHAR: usize = 0x01;
    /// `sbi_console_getchar()`: the byte, or -1 when none waits.
    pub const LEGACY_CONSOLE_GETCHAR: usize = 0x02;
    /// `sbi_shutdown()`.
    pub const LEGACY_SHUTDOWN: usize = 0x08;
    /// The first ID that is not a legacy extension (the Base extension's).
    pub const END: usize = 0x10;
}

/// Legacy calls return `SBI_ERR_NOT_SUPPORTED` for what they do not implement.
const NOT_SUPPORTED: usize = -2_isize as usize;

/// Handles an `ecall` from S-mode: the extension ID is in `a7`, the function ID in `a6`, the
/// arguments in `a0`..`a5`. SBI v0.2+ calls return the error in `a0` and the value in `a1`;
/// legacy calls (extension IDs below 0x10) return in `a0` only and leave `a1` alone, as
/// supervisors' legacy call sequences expect.
pub fn handle_ecall(frame: &mut TrapFrame) {
    let extension = frame.a(7);
    if extension < legacy::END {
        let result = legacy_call(extension, frame.a(0));
        frame.set_a(0, result);
        return;
    }
    let args = [frame.a(0), frame.a(1), frame.a(2), frame.a(3), frame.a(4), frame.a(5)];
    let ret = SBI.handle_ecall(extension, frame.a(6), args);
    frame.set_a(0, ret.error);
    frame.set_a(1, ret.value);
}

/// The SBI v0.1 calls; returns what goes into `a0`.
fn legacy_call(extension: usize, arg0: usize) -> usize {
    match extension {
        legacy::LEGACY_SET_TIMER => {
            set_timer(arg0 as u64);
            0
        }
        legacy::LEGACY_CONSOLE_PUTCHAR => {
            uart::write_byte(arg0 as u8);
            0
        }
        legacy::LEGACY_CONSOLE_GETCHAR => uart::read_byte().map_or(usize::MAX, usize::from),
        legacy::LEGACY_SHUTDOWN => sifive_test::exit(0),
        _ => NOT_SUPPORTED,
    }
}

/// Arms the supervisor's timer: withdraws a pending supervisor timer interrupt and has the
/// machine timer raise it again at `deadline` (in `time` ticks). `u64::MAX` (never) stops the
/// machine timer instead ([`clint::disarm`]).
fn set_timer(deadline: u64) {
    csr::clear_stip();
    if deadline == u64::MAX {
        clint::disarm(csr::mhartid());
    } else {
        clint::set_deadline(csr::mhartid(), deadline);
        csr::set_mtie(true);
    }
}

impl rustsbi::Console for Console {
    fn write(&self, bytes: Physical<&[u8]>) -> SbiRet {
        if bytes.phys_addr_hi() != 0 {
            return SbiRet::invalid_param();
        }
        phys_mem::with_bytes(bytes.phys_addr_lo(), bytes.num_bytes(), |buf| {
            uart::write(buf);
            SbiRet::success(buf.len())
        })
        .unwrap_or_else(SbiRet::invalid_param)
    }

    fn read(&self, bytes: Physical<&mut [u8]>) -> SbiRet {
        if bytes.phys_addr_hi() != 0 {
            return SbiRet::invalid_param();
        }
        phys_mem::with_bytes_mut(bytes.phys_addr_lo(), bytes.num_bytes(), |buf| {
            let mut count = 0;
            for slot in buf.iter_mut() {
                let Some(byte) = uart::read_byte() else { break };
                *slot = byte;
                count += 1;
            }
            SbiRet::success(count)
        })
        .unwrap_or_else(SbiRet::invalid_param)
    }

    fn write_byte(&self, byte: u8) -> SbiRet {
        uart::write_byte(byte);
        SbiRet::success(0)
    }
}

impl rustsbi::Timer for Timer {
    fn set_timer(&self, stime_value: u64) {
        set_timer(stime_value);
    }
}

impl rustsbi::Reset for Reset {
    fn system_reset(&self, reset_type: u32, reset_reason: u32) -> SbiRet {
        let status = match reset_reason {
            srst::RESET_REASON_NO_REASON => 0,
            srst::RESET_REASON_SYSTEM_FAILURE => 1,
            VENDOR_REASON.. => match u8::try_from(reset_reason - VENDOR_REASON) {
                Ok(code) => code,
                // The host would only see the low 8 bits of a larger code.
                Err(_) => return SbiRet::invalid_param(),
            },
            // Reserved (2..0xF000_0000) or SBI-implementation-specific reasons.
            _ => return SbiRet::invalid_param(),
        };
        match reset_type {
            srst::RESET_TYPE_SHUTDOWN => sifive_test::exit(status),
            srst::RESET_TYPE_COLD_REBOOT | srst::RESET_TYPE_WARM_REBOOT => sifive_test::reset(),
            // Vendor-specific reset types.
            VENDOR_REASON.. => SbiRet::not_supported(),
            _ => SbiRet::invalid_param(),
        }
    }
}
