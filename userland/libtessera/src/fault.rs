//! A deliberate fault, for tests of what a domain's peers see when it is killed (a client of
//! a driver, or the driver itself).

/// Stores to an address no stretch holds: the kernel terminates the domain.
pub fn now() -> ! {
    // SAFETY: not memory safety but its opposite, on purpose: address 16 lies in no stretch of
    // any domain, so the store faults and the kernel ends this domain before it completes.
    unsafe { (16 as *mut u64).write_volatile(0) };
    unreachable!("the kernel terminates a domain that stores to an unmapped address")
}
