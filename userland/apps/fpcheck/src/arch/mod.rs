//! Loads, yields and stores all the floating-point registers in one assembly block, with a
//! module per architecture: each has `load_yield_store`, which loads the 32 words of `values`
//! into the floating-point registers, makes the `yield` system call, and returns what the
//! registers hold afterwards.

#[cfg(target_arch = "riscv64")]
mod riscv64;
#[cfg(target_arch = "riscv64")]
pub use riscv64::load_yield_store;

#[cfg(target_arch = "x86_64")]
mod x86_64;
#[cfg(target_arch = "x86_64")]
pub use x86_64::load_yield_store;
