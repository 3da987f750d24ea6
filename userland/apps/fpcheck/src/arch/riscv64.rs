//! RISC-V: all 32 floating-point registers `f0..f31`, a word each.

/// Loads `values` into `f0..f31`, makes the `yield` system call, and returns what the registers
/// hold afterwards.
pub fn load_yield_store(values: &[u64; 32]) -> [u64; 32] {
    let mut out = [0u64; 32];
    let src = values.as_ptr() as usize;
    let dst = out.as_mut_ptr() as usize;
    // SAFETY: reads 32 words from `values` and writes 32 words to `out`, both live arrays of
    // that size; every floating-point register and the registers of the system call are
    // declared clobbered; the `yield` call changes no memory of this domain.
    unsafe {
        core::arch::asm!(
            "fld f0, 0({s})", "fld f1, 8({s})", "fld f2, 16({s})", "fld f3, 24({s})",
            "fld f4, 32({s})", "fld f5, 40({s})", "fld f6, 48({s})", "fld f7, 56({s})",
            "fld f8, 64({s})", "fld f9, 72({s})", "fld f10, 80({s})", "fld f11, 88({s})",
            "fld f12, 96({s})", "fld f13, 104({s})", "fld f14, 112({s})", "fld f15, 120({s})",
            "fld f16, 128({s})", "fld f17, 136({s})", "fld f18, 144({s})", "fld f19, 152({s})",
            "fld f20, 160({s})", "fld f21, 168({s})", "fld f22, 176({s})", "fld f23, 184({s})",
            "fld f24, 192({s})", "fld f25, 200({s})", "fld f26, 208({s})", "fld f27, 216({s})",
            "fld f28, 224({s})", "fld f29, 232({s})", "fld f30, 240({s})", "fld f31, 248({s})",
            "li a7, {call}",
            "ecall",
            "fsd f0, 0({d})", "fsd f1, 8({d})", "fsd f2, 16({d})", "fsd f3, 24({d})",
            "fsd f4, 32({d})", "fsd f5, 40({d})", "fsd f6, 48({d})", "fsd f7, 56({d})",
            "fsd f8, 64({d})", "fsd f9, 72({d})", "fsd f10, 80({d})", "fsd f11, 88({d})",
            "fsd f12, 96({d})", "fsd f13, 104({d})", "fsd f14, 112({d})", "fsd f15, 120({d})",
            "fsd f16, 128({d})", "fsd f17, 136({d})", "fsd f18, 144({d})", "fsd f19, 152({d})",
            "fsd f20, 160({d})", "fsd f21, 168({d})", "fsd f22, 176({d})", "fsd f23, 184({d})",
            "fsd f24, 192({d})", "fsd f25, 200({d})", "fsd f26, 208({d})", "fsd f27, 216({d})",
            "fsd f28, 224({d})", "fsd f29, 232({d})", "fsd f30, 240({d})", "fsd f31, 248({d})",
            s = in(reg) src,
            d = in(reg) dst,
            call = const abi::Call::Yield as usize,
            out("a0") _, out("a1") _, out("a7") _,
            out("f0") _, out("f1") _, out("f2") _, out("f3") _, out("f4") _, out("f5") _,
            out("f6") _, out("f7") _, out("f8") _, out("f9") _, out("f10") _, out("f11") _,
            out("f12") _, out("f13") _, out("f14") _, out("f15") _, out("f16") _, out("f17") _,
            out("f18") _, out("f19") _, out("f20") _, out("f21") _, out("f22") _, out("f23") _,
            out("f24") _, out("f25") _, out("f26") _, out("f27") _, out("f28") _, out("f29") _,
            out("f30") _, out("f31") _,
        );
    }
    out
}
