//! x86_64: the saved context is the 16 integer registers, the instruction pointer and the
//! flags; a domain's entry point and activation handler find their arguments in `rdi`, `rsi`,
//! `rdx`, `rcx`.

/// Where a domain's entry point and activation handler find their arguments: `rdi`, `rsi`,
/// `rdx`, `rcx` (see `abi::ENTRY_ARGUMENTS`).
pub const ENTRY_ARGUMENTS: [&str; 4] = ["rdi", "rsi", "rdx", "rcx"];

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
