//! The panic handler: prints the message and location, then exits with
//! [`EXIT_PANIC`](crate::EXIT_PANIC). A panic while printing exits at once.

use core::panic::PanicInfo;
use core::sync::atomic::{AtomicBool, Ordering};

use crate::{EXIT_PANIC, exit, println};

/// Set by the first panic; a second one (from formatting the first) must not recurse.
static PANICKING: AtomicBool = AtomicBool::new(false);

#[panic_handler]
fn panic(info: &PanicInfo<'_>) -> ! {
    if PANICKING.swap(true, Ordering::Relaxed) {
        exit(EXIT_PANIC)
    }
    match info.location() {
        Some(at) => {
            println!("panicked at {}:{}:{}: {}", at.file(), at.line(), at.column(), info.message())
        }
        None => println!("panicked: {}", info.message()),
    }
    exit(EXIT_PANIC)
}
