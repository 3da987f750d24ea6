//! The user context the kernel saves for an activation handler (`Dcb::saved`) and loads on
//! `resume`: one type per architecture, with the same methods, and [`SavedContext`] naming the
//! target's (the RISC-V one on riscv64, the x86_64 one elsewhere, hosts included).
//!
//! Each is a plain array of 64-bit words (`#[repr(C)]`), so the kernel copies it from user
//! memory as [`SavedContext::WORDS`] words.

/// RISC-V (riscv64gc): the 32 integer registers and the program counter.
pub mod riscv64 {
    /// `regs[i]` is `x{i}` (`regs[0]` unused), then the program counter.
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct SavedContext {
        /// `x0..x31`.
        pub regs: [u64; 32],
        /// The program counter.
        pub pc: u64,
    }

    impl SavedContext {
        /// Its size in 64-bit words.
        pub const WORDS: usize = 33;

        /// The program counter.
        pub fn pc(&self) -> u64 {
            self.pc
        }

        /// The stack pointer (`x2`).
        pub fn sp(&self) -> u64 {
            self.regs[2]
        }

        /// The first two integer argument and result registers (`a0`, `a1`).
        pub fn results(&self) -> [u64; 2] {
            [self.regs[10], self.regs[11]]
        }

        /// The context as words, in the order the kernel copies them.
        pub fn to_words(&self) -> [u64; Self::WORDS] {
            let mut w = [0; Self::WORDS];
            w[..32].copy_from_slice(&self.regs);
            w[32] = self.pc;
            w
        }

        /// The context from its words.
        pub fn from_words(w: &[u64; Self::WORDS]) -> Self {
            let mut regs = [0; 32];
            regs.copy_from_slice(&w[..32]);
            SavedContext { regs, pc: w[32] }
        }
    }
}

/// x86_64: the 16 integer registers, the instruction pointer and the flags.
pub mod x86_64 {
    /// The integer registers in their encoding order, then `rip` and `rflags`.
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct SavedContext {
        /// `rax`.
        pub rax: u64,
        /// `rcx`.
        pub rcx: u64,
        /// `rdx`.
        pub rdx: u64,
        /// `rbx`.
        pub rbx: u64,
        /// `rsp`.
        pub rsp: u64,
        /// `rbp`.
        pub rbp: u64,
        /// `rsi`.
        pub rsi: u64,
        /// `rdi`.
        pub rdi: u64,
        /// `r8`.
        pub r8: u64,
        /// `r9`.
        pub r9: u64,
        /// `r10`.
        pub r10: u64,
        /// `r11`.
        pub r11: u64,
        /// `r12`.
        pub r12: u64,
        /// `r13`.
        pub r13: u64,
        /// `r14`.
        pub r14: u64,
        /// `r15`.
        pub r15: u64,
        /// The instruction pointer.
        pub rip: u64,
        /// The flags (the kernel keeps the interrupt flag and the privileged bits its own).
        pub rflags: u64,
    }

    impl SavedContext {
        /// Its size in 64-bit words.
        pub const WORDS: usize = 18;

        /// The program counter (`rip`).
        pub fn pc(&self) -> u64 {
            self.rip
        }

        /// The stack pointer (`rsp`).
        pub fn sp(&self) -> u64 {
            self.rsp
        }

        /// The system-call result registers (`rax`: status, `rdx`: value).
        pub fn results(&self) -> [u64; 2] {
            [self.rax, self.rdx]
        }

        /// The context as words, in the order the kernel copies them.
        pub fn to_words(&self) -> [u64; Self::WORDS] {
            [
                self.rax,
                self.rcx,
                self.rdx,
                self.rbx,
                self.rsp,
                self.rbp,
                self.rsi,
                self.rdi,
                self.r8,
                self.r9,
                self.r10,
                self.r11,
                self.r12,
                self.r13,
                self.r14,
                self.r15,
                self.rip,
                self.rflags,
            ]
        }

        /// The context from its words.
        pub fn from_words(w: &[u64; Self::WORDS]) -> Self {
            let [
                rax,
                rcx,
                rdx,
                rbx,
                rsp,
                rbp,
                rsi,
                rdi,
                r8,
                r9,
                r10,
                r11,
                r12,
                r13,
                r14,
                r15,
                rip,
                rflags,
            ] = *w;
            SavedContext {
                rax,
                rcx,
                rdx,
                rbx,
                rsp,
                rbp,
                rsi,
                rdi,
                r8,
                r9,
                r10,
                r11,
                r12,
                r13,
                r14,
                r15,
                rip,
                rflags,
            }
        }
    }
}

/// The target's saved context.
#[cfg(target_arch = "riscv64")]
pub use riscv64::SavedContext;
/// The target's saved context.
#[cfg(not(target_arch = "riscv64"))]
pub use x86_64::SavedContext;

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
