//! RISC-V (riscv64gc): the saved context is the 32 integer registers and the program counter;
//! a domain's entry point and activation handler find their arguments in `a0..a3`.

/// Where a domain's entry point and activation handler find their arguments: `a0..a3` (see
/// `abi::ENTRY_ARGUMENTS`).
pub const ENTRY_ARGUMENTS: [&str; 4] = ["a0", "a1", "a2", "a3"];

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
