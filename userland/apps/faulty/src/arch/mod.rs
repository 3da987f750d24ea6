//! The deliberate faults, in each architecture's instructions (`riscv64.rs`, `x86_64.rs`: the
//! same functions and `KERNEL_ADDRESS`). Each function (but `stack_pointer`) is meant to make
//! the kernel end this domain; if one returns, the fault did not happen and the caller says
//! so. The stack overflow is portable (`recurse` in `main.rs`).

#[cfg(target_arch = "riscv64")]
mod riscv64;
#[cfg(target_arch = "riscv64")]
pub use riscv64::*;

#[cfg(target_arch = "x86_64")]
mod x86_64;
#[cfg(target_arch = "x86_64")]
pub use x86_64::*;
