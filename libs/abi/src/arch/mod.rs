//! What the ABI says per architecture, one module each with the same items, and the target's
//! re-exported here (the RISC-V ones on riscv64, the x86_64 ones elsewhere, hosts included):
//!
//! - `SavedContext`: the user context the kernel saves for an activation handler
//!   (`Dcb::saved`) and loads on `resume`, with the same methods on each architecture. Each is
//!   a plain array of 64-bit words (`#[repr(C)]`), so the kernel copies it from user memory as
//!   [`SavedContext::WORDS`] words.
//! - `ENTRY_ARGUMENTS`: the registers in which a domain's entry point and activation handler
//!   find their arguments.
//!
//! Both modules are compiled on every target (they are plain data), so the host tests check
//! both.

pub mod riscv64;
pub mod x86_64;

/// The target's saved context and entry-argument registers.
#[cfg(target_arch = "riscv64")]
pub use riscv64::{ENTRY_ARGUMENTS, SavedContext};
/// The target's saved context and entry-argument registers.
#[cfg(not(target_arch = "riscv64"))]
pub use x86_64::{ENTRY_ARGUMENTS, SavedContext};

const _: () =
    assert!(core::mem::size_of::<riscv64::SavedContext>() == riscv64::SavedContext::WORDS * 8);
const _: () =
    assert!(core::mem::size_of::<x86_64::SavedContext>() == x86_64::SavedContext::WORDS * 8);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip() {
        let mut r = riscv64::SavedContext::default();
        r.regs[2] = 0x1000;
        r.regs[10] = 7;
        r.pc = 0x4000;
        assert_eq!(riscv64::SavedContext::from_words(&r.to_words()), r);
        assert_eq!((r.sp(), r.pc(), r.results()[0]), (0x1000, 0x4000, 7));
        let x =
            x86_64::SavedContext { rsp: 0x2000, rip: 0x5000, rax: 3, rdx: 4, ..Default::default() };
        assert_eq!(x86_64::SavedContext::from_words(&x.to_words()), x);
        assert_eq!((x.sp(), x.pc(), x.results()), (0x2000, 0x5000, [3, 4]));
        // The words follow the field order: the kernel copies the struct as words.
        assert_eq!(x.to_words()[4], 0x2000);
        assert_eq!(x.to_words()[16], 0x5000);
    }
}
