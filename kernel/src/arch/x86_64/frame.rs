//! What a trap leaves for its handlers: the [`TrapFrame`] the IDT's common entry path builds
//! on the stack, the page-fault error-code bits, and the names of the CPU's exceptions.
//!
//! A leaf: it imports nothing from its siblings, so the trap dispatch ([`super::trap`]), the
//! probes' fix-up ([`super::probe`]) and the user-mode trap path ([`super::user`]) all build on
//! it without importing one another in a circle.

/// What the entry path saves: the general registers, the vector and error code, and the frame
/// the CPU pushed.
#[repr(C)]
#[derive(Clone, Debug, Default)]
pub struct TrapFrame {
    /// The general registers, as the common path pushed them (r15 last, at the lowest
    /// address).
    pub r15: u64,
    /// r14.
    pub r14: u64,
    /// r13.
    pub r13: u64,
    /// r12.
    pub r12: u64,
    /// r11.
    pub r11: u64,
    /// r10.
    pub r10: u64,
    /// r9.
    pub r9: u64,
    /// r8.
    pub r8: u64,
    /// The frame pointer (the start of the backtrace).
    pub rbp: u64,
    /// rdi.
    pub rdi: u64,
    /// rsi.
    pub rsi: u64,
    /// rdx.
    pub rdx: u64,
    /// rcx.
    pub rcx: u64,
    /// rbx.
    pub rbx: u64,
    /// rax.
    pub rax: u64,
    /// The vector (pushed by the stub).
    pub vector: u64,
    /// The CPU's error code, or 0 for vectors that have none (pushed by the stub).
    pub error: u64,
    /// Pushed by the CPU: the interrupted (or faulting) instruction.
    pub rip: u64,
    /// The interrupted code segment (its low two bits are the privilege level).
    pub cs: u64,
    /// The interrupted RFLAGS.
    pub rflags: u64,
    /// The interrupted stack pointer.
    pub rsp: u64,
    /// The interrupted stack segment.
    pub ss: u64,
}

// The common path pushes 15 registers below the vector and error code; 22 words keep the stack
// 16-byte aligned at the call (the CPU aligns it before pushing its frame).
const _: () = assert!(core::mem::size_of::<TrapFrame>() == 22 * 8);

/// Page-fault error code: the page was present (a protection fault).
pub const PF_PRESENT: u64 = 1 << 0;
/// Page-fault error code: a write.
pub const PF_WRITE: u64 = 1 << 1;
/// Page-fault error code: an access from user mode.
pub const PF_USER: u64 = 1 << 2;
/// Page-fault error code: an entry had a reserved bit set.
pub const PF_RESERVED: u64 = 1 << 3;
/// Page-fault error code: an instruction fetch.
pub const PF_INSTRUCTION: u64 = 1 << 4;

/// Exception names, by vector.
pub(super) fn exception_name(vector: u64, error: u64) -> &'static str {
    match vector {
        0 => "divide error (#DE)",
        1 => "debug exception (#DB)",
        2 => "non-maskable interrupt (NMI)",
        3 => "breakpoint (#BP)",
        4 => "overflow (#OF)",
        5 => "bound range exceeded (#BR)",
        6 => "illegal instruction (#UD)",
        7 => "device not available (#NM)",
        8 => "double fault (#DF)",
        10 => "invalid TSS (#TS)",
        11 => "segment not present (#NP)",
        12 => "stack-segment fault (#SS)",
        13 => "general protection fault (#GP)",
        14 if error & PF_INSTRUCTION != 0 => "instruction page fault (#PF)",
        14 if error & PF_WRITE != 0 => "store page fault (#PF)",
        14 => "load page fault (#PF)",
        16 => "x87 floating-point error (#MF)",
        17 => "alignment check (#AC)",
        18 => "machine check (#MC)",
        19 => "SIMD floating-point exception (#XM)",
        20 => "virtualization exception (#VE)",
        21 => "control protection exception (#CP)",
        28 => "hypervisor injection exception (#HV)",
        29 => "VMM communication exception (#VC)",
        30 => "security exception (#SX)",
        _ => "reserved exception",
    }
}
