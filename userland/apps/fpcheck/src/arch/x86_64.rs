//! x86_64: the 16 vector registers `xmm0..xmm15`, two words each. Nothing else in a domain uses
//! them (the target compiles floating point to integer code), so this is the only code that
//! makes the kernel load and keep this domain's vector registers.

/// Loads `values` into `xmm0..xmm15` (words `2i` and `2i + 1` into `xmm{i}`), makes the
/// `yield` system call, and returns what the registers hold afterwards.
pub fn load_yield_store(values: &[u64; 32]) -> [u64; 32] {
    let mut out = [0u64; 32];
    let src = values.as_ptr() as usize;
    let dst = out.as_mut_ptr() as usize;
    // SAFETY: reads 32 words from `values` and writes 32 words to `out`, both live arrays of
    // that size (`movdqu` needs no alignment); every vector register and the registers of the
    // system call (`rax`, `rdx`, and `rcx`, `r11` which the instruction overwrites) are
    // declared clobbered; the `yield` call changes no memory of this domain.
    unsafe {
        core::arch::asm!(
            "movdqu xmm0, [{s}]", "movdqu xmm1, [{s} + 16]", "movdqu xmm2, [{s} + 32]",
            "movdqu xmm3, [{s} + 48]", "movdqu xmm4, [{s} + 64]", "movdqu xmm5, [{s} + 80]",
            "movdqu xmm6, [{s} + 96]", "movdqu xmm7, [{s} + 112]", "movdqu xmm8, [{s} + 128]",
            "movdqu xmm9, [{s} + 144]", "movdqu xmm10, [{s} + 160]", "movdqu xmm11, [{s} + 176]",
            "movdqu xmm12, [{s} + 192]", "movdqu xmm13, [{s} + 208]", "movdqu xmm14, [{s} + 224]",
            "movdqu xmm15, [{s} + 240]",
            "mov eax, {call}",
            "syscall",
            "movdqu [{d}], xmm0", "movdqu [{d} + 16], xmm1", "movdqu [{d} + 32], xmm2",
            "movdqu [{d} + 48], xmm3", "movdqu [{d} + 64], xmm4", "movdqu [{d} + 80], xmm5",
            "movdqu [{d} + 96], xmm6", "movdqu [{d} + 112], xmm7", "movdqu [{d} + 128], xmm8",
            "movdqu [{d} + 144], xmm9", "movdqu [{d} + 160], xmm10", "movdqu [{d} + 176], xmm11",
            "movdqu [{d} + 192], xmm12", "movdqu [{d} + 208], xmm13", "movdqu [{d} + 224], xmm14",
            "movdqu [{d} + 240], xmm15",
            s = in(reg) src,
            d = in(reg) dst,
            call = const abi::Call::Yield as usize,
            out("rax") _, out("rdx") _, out("rcx") _, out("r11") _,
            out("xmm0") _, out("xmm1") _, out("xmm2") _, out("xmm3") _, out("xmm4") _,
            out("xmm5") _, out("xmm6") _, out("xmm7") _, out("xmm8") _, out("xmm9") _,
            out("xmm10") _, out("xmm11") _, out("xmm12") _, out("xmm13") _, out("xmm14") _,
            out("xmm15") _,
        );
    }
    out
}
