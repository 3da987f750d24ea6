//! The defmt global logger: frames go straight to the arch console (the UART), with interrupts
//! off while a frame is written so that frames never interleave.

use core::sync::atomic::{AtomicBool, Ordering};

use crate::arch;

#[defmt::global_logger]
struct Logger;

static TAKEN: AtomicBool = AtomicBool::new(false);
static INTERRUPTS_WERE_ON: AtomicBool = AtomicBool::new(false);
static ENCODER: spin::Mutex<defmt::Encoder> = spin::Mutex::new(defmt::Encoder::new());

defmt::timestamp!("{=u64:us}", arch::time::now_us());

// SAFETY: `acquire` disables interrupts and takes the `TAKEN` flag, so between `acquire` and
// `release` only the one CPU that holds the logger runs logger code; a nested acquire (a trap
// while logging) is detected and reported instead of corrupting the frame.
unsafe impl defmt::Logger for Logger {
    fn acquire() {
        let was_on = arch::interrupts::disable();
        if TAKEN.swap(true, Ordering::Acquire) {
            // A panic or trap while a frame is half written: end that frame so that the report
            // that follows decodes.
            arch::console::write(&[0]);
            // SAFETY: interrupts are off and the holder that locked the encoder was interrupted
            // by a synchronous trap on this same CPU; it will never run again to unlock it.
            unsafe { ENCODER.force_unlock() };
        }
        INTERRUPTS_WERE_ON.store(was_on, Ordering::Relaxed);
        // The lock is free here: only the logger holder touches it.
        let mut enc = ENCODER.lock();
        enc.start_frame(arch::console::write);
    }

    unsafe fn flush() {}

    unsafe fn release() {
        ENCODER.lock().end_frame(arch::console::write);
        TAKEN.store(false, Ordering::Release);
        arch::interrupts::restore(INTERRUPTS_WERE_ON.load(Ordering::Relaxed));
    }

    unsafe fn write(bytes: &[u8]) {
        ENCODER.lock().write(bytes, arch::console::write);
    }
}
