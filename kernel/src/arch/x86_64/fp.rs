//! Domains' floating-point and vector state (x87, MMX, SSE: the FXSAVE area), restored
//! lazily through CR0.TS and the device-not-available exception (#NM).
//!
//! The FP registers hold one domain's state at a time: the *holder*'s (the
//! loaded block of [`HOLDER`], a [`FpHolder`] shared by the architectures).
//! When the portable kernel switches to a domain ([`restore`], behind `arch::restore_fp`):
//! - if the domain is the holder, CR0.TS is cleared: it resumes with its registers in place;
//! - otherwise CR0.TS is set and nothing is loaded. Its first FP or SSE instruction then
//!   raises #NM; [`on_first_use`] clears TS, loads its state (`fxrstor64`), makes it the holder
//!   and returns to the same instruction, which now runs.
//!
//! When a domain stops running with TS clear while it is the holder (it may have changed its
//! registers), [`save`] (behind `arch::save_fp`) stores them at once (`fxsave64`), so the holder's state is always
//! saved before another domain's can be loaded over it: [`on_first_use`] never has anything to
//! save first. A domain that never touches the FP unit costs a switch neither loads nor
//! stores. The kernel itself never uses these registers (its target is soft-float), so TS may
//! stay set while it runs.
//!
//! [`init`] sets CR0.MP (with TS, `wait` raises #NM too), clears CR0.EM (no emulation: SSE
//! instructions run) and sets CR4.OSFXSR and CR4.OSXMMEXCPT (`fxsave` covers the XMM
//! registers; SIMD exceptions are #XM). The AVX state (XSAVE) is not managed: XCR0 stays as
//! the firmware left it and CR4.OSXSAVE is off, so AVX instructions raise #UD in domains.
//!
//! A domain's saved state lives in its own heap block ([`FpState`] owns it), so it keeps its
//! address while the portable kernel moves the `FpState` around; [`HOLDER`] names blocks by
//! address, and a block's owner makes it forget the block when it is dropped.

use alloc::boxed::Box;

use crate::arch::fp_holder::FpHolder;

use ::x86_64::registers::control::{Cr0, Cr0Flags, Cr4, Cr4Flags};

/// The FXSAVE area: 512 bytes, 16-byte aligned.
#[repr(C, align(16))]
#[derive(Clone)]
struct Area([u8; 512]);

/// The initial x87 control word (all exceptions masked, extended precision), at offset 0.
const FCW_INITIAL: u16 = 0x037f;
/// The initial MXCSR (all SIMD exceptions masked, round to nearest), at offset 24.
pub const MXCSR_INITIAL: u32 = 0x1f80;

impl Default for Area {
    fn default() -> Self {
        let mut a = [0u8; 512];
        a[0..2].copy_from_slice(&FCW_INITIAL.to_le_bytes());
        a[24..28].copy_from_slice(&MXCSR_INITIAL.to_le_bytes());
        Area(a)
    }
}

/// A domain's x87, MMX and SSE registers (with MXCSR), saved while they are not in the FP
/// unit. A new one holds zeros with the initial control words; a clone has its own block, so
/// it is never the holder.
#[derive(Clone, Default)]
pub struct FpState(Box<Area>);

impl Drop for FpState {
    fn drop(&mut self) {
        HOLDER.forget(self.block());
    }
}

impl FpState {
    fn block(&self) -> *mut Area {
        &*self.0 as *const Area as *mut Area
    }

    /// The saved MXCSR.
    pub fn mxcsr(&self) -> u32 {
        u32::from_le_bytes([self.0.0[24], self.0.0[25], self.0.0[26], self.0.0[27]])
    }

    /// The low 64 bits of the saved `xmm{n}` (`n` < 16).
    pub fn xmm_low(&self, n: usize) -> u64 {
        let at = 160 + 16 * n;
        u64::from_le_bytes(self.0.0[at..at + 8].try_into().expect("8 bytes"))
    }
}

/// Whose state the FP registers hold, and whose domain runs.
static HOLDER: FpHolder<Area> = FpHolder::new();

/// How many times a domain's state was loaded on first use (#NM) since boot.
pub fn loads() -> u64 {
    HOLDER.loads()
}

/// Sets up the FP unit for domains: CR0.MP set, CR0.EM clear, CR4.OSFXSR and CR4.OSXMMEXCPT
/// set. CR0.TS is left clear until [`restore`] first runs.
pub(super) fn init() {
    // SAFETY: these bits only say how the FP unit and SSE behave: SSE instructions are allowed
    // (the kernel, soft-float, uses none), `fxsave` covers the XMM registers, and with TS set
    // `wait` also raises #NM. Nothing relies on the previous values.
    unsafe {
        Cr0::update(|c| {
            c.remove(Cr0Flags::EMULATE_COPROCESSOR);
            c.insert(Cr0Flags::MONITOR_COPROCESSOR);
        });
        Cr4::update(|c| {
            c.insert(Cr4Flags::OSFXSR | Cr4Flags::OSXMMEXCPT_ENABLE);
        });
    }
}

/// Whether CR0.TS is set.
fn ts() -> bool {
    Cr0::read().contains(Cr0Flags::TASK_SWITCHED)
}

/// Sets or clears CR0.TS.
fn set_ts(on: bool) {
    if on {
        // SAFETY: with TS set the next FP or SSE instruction raises #NM, which the trap path
        // handles for domains; the kernel executes none.
        unsafe { Cr0::update(|c| c.insert(Cr0Flags::TASK_SWITCHED)) };
    } else {
        // SAFETY: `clts` only lets FP and SSE instructions run without #NM.
        unsafe { core::arch::asm!("clts", options(nomem, nostack, preserves_flags)) };
    }
}

/// Called when a domain stops running: saves its FP registers into `fp` if it may have changed
/// them since they were loaded (it is the holder and CR0.TS is clear). `fp` is the state
/// [`restore`] was last given for this domain.
#[inline]
pub fn save(fp: &mut FpState) {
    if !HOLDER.holds(fp.block()) || ts() {
        return;
    }
    let p = fp.block();
    // SAFETY: TS is clear, so `fxsave64` runs; `p` is a writable, 16-byte aligned 512-byte
    // block owned by `fp`.
    unsafe { core::arch::asm!("fxsave64 [{}]", in(reg) p, options(nostack, preserves_flags)) };
}

/// Called when the domain whose state is `fp` is about to resume: if the FP
/// registers hold `fp` already, the domain resumes with them (TS clear); otherwise with TS set,
/// and its state is loaded when it first uses the unit ([`on_first_use`]). Either way it sees
/// its own values, never another domain's.
#[inline]
pub fn restore(fp: &FpState) {
    set_ts(!HOLDER.switch_to(fp.block()));
}

/// For a #NM from ring 3: if a domain is current, loads its state, makes it the holder, clears
/// TS and returns `true`: the instruction runs again when the domain resumes. `false`: no
/// domain's state to load (the #NM is reported as a fault).
#[inline(never)]
pub fn on_first_use() -> bool {
    let Some(current) = HOLDER.current() else { return false };
    set_ts(false);
    if !HOLDER.holds(current) {
        // SAFETY: `current` is the block of the running domain's `FpState`, set by
        // `restore`; the `FpState` is alive (its drop would have forgotten it as current) and the
        // block, on the heap, is still at that address. It is 16-byte aligned and holds a
        // valid FXSAVE image (made by `Default` or by `fxsave64`). TS is clear.
        unsafe {
            core::arch::asm!(
                "fxrstor64 [{}]",
                in(reg) current,
                options(nostack, readonly, preserves_flags)
            )
        };
        HOLDER.loaded(current);
    }
    true
}
