//! The platform-level interrupt controller (PLIC): where devices' interrupts enter on RISC-V
//! `virt`, found in the device tree ([`super::device_tree`]).
//!
//! At boot every source's priority is 0 (never delivered) and none is enabled in this hart's
//! supervisor context, so that no device interrupts the kernel; the context's threshold is 0,
//! so a source given a priority and enabled later ([`enable`], when a driver domain is
//! granted its device) is delivered. The kernel claims a source when it interrupts
//! ([`claim`]) and completes it when the driver domain acknowledges it ([`complete`]): until
//! then the PLIC does not deliver it again.
//!
//! QEMU `virt` numbers the PLIC's contexts two per hart, machine mode then supervisor mode:
//! hart `h`'s supervisor context is `2h + 1`.

use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use crate::boot_info::BootInfo;

/// Source `s`'s priority: a word at `4s`.
const PRIORITY: usize = 0x0;
/// Context `c`'s enable bits: one per source, from `0x2000 + 0x80c`.
const ENABLE: usize = 0x2000;
/// Context `c`'s priority threshold: a word at `0x20_0000 + 0x1000c`.
const THRESHOLD: usize = 0x20_0000;
/// Claim (read) and complete (write), the word after the context's threshold.
const CLAIM: usize = 4;

/// The hart the kernel runs on (set at entry).
static HART: AtomicUsize = AtomicUsize::new(0);

/// The PLIC's registers in the direct map (0 until [`init`] found one).
static BASE: AtomicUsize = AtomicUsize::new(0);

/// How many sources it has.
static SOURCES: AtomicU32 = AtomicU32::new(0);

/// The PLIC the kernel uses (the first in the device tree), if [`init`] found one.
fn the_plic() -> Option<Plic> {
    let base = BASE.load(Ordering::Relaxed);
    (base != 0).then(|| Plic { base, context: 2 * HART.load(Ordering::Relaxed) + 1 })
}

/// Lets source `s` interrupt this hart's supervisor context (priority 1, enabled); false if
/// there is no such source.
pub fn enable(s: u32) -> bool {
    let Some(plic) = the_plic().filter(|_| (1..=SOURCES.load(Ordering::Relaxed)).contains(&s))
    else {
        return false;
    };
    plic.write(PRIORITY + 4 * s as usize, 1);
    let word = plic.enable_word(s);
    plic.write(word, plic.read(word) | 1 << (s % 32));
    true
}

/// Stops source `s` from interrupting (disabled, priority 0).
pub fn disable(s: u32) {
    let Some(plic) = the_plic().filter(|_| (1..=SOURCES.load(Ordering::Relaxed)).contains(&s))
    else {
        return;
    };
    let word = plic.enable_word(s);
    plic.write(word, plic.read(word) & !(1 << (s % 32)));
    plic.write(PRIORITY + 4 * s as usize, 0);
}

/// The highest-priority pending source, now claimed (`None`: nothing pending).
pub fn claim() -> Option<u32> {
    let plic = the_plic()?;
    let s = plic.read(THRESHOLD + 0x1000 * plic.context + CLAIM);
    (s != 0).then_some(s)
}

/// Completes source `s`: the PLIC may deliver it again (ignored if it is not claimed).
pub fn complete(s: u32) {
    if let Some(plic) = the_plic() {
        plic.write(THRESHOLD + 0x1000 * plic.context + CLAIM, s);
    }
}

/// Records the hart the kernel runs on, whose supervisor context the kernel uses.
pub fn set_hart(hart: usize) {
    HART.store(hart, Ordering::Relaxed);
}

/// One PLIC, through the kernel's direct map (which covers `virt`'s devices below RAM).
struct Plic {
    base: usize,
    context: usize,
}

impl Plic {
    fn word(&self, offset: usize) -> *mut u32 {
        (self.base + offset) as *mut u32
    }

    fn read(&self, offset: usize) -> u32 {
        // SAFETY: `offset` is a word-aligned register of the PLIC's window (priorities, this
        // context's enable bits or threshold), mapped by the direct map; reading it has no
        // effect.
        unsafe { self.word(offset).read_volatile() }
    }

    fn write(&self, offset: usize, value: u32) {
        // SAFETY: as for `read`; the registers written only decide which sources reach this
        // context.
        unsafe { self.word(offset).write_volatile(value) }
    }

    /// The offset of the enable word holding source `s`'s bit.
    fn enable_word(&self, s: u32) -> usize {
        ENABLE + 0x80 * self.context + 4 * (s as usize / 32)
    }
}

/// Masks every source of every PLIC in `boot` (priority 0, disabled in this hart's supervisor
/// context, threshold 0) and logs each, with whether all read back masked.
pub fn init(boot: &BootInfo) {
    let context = 2 * HART.load(Ordering::Relaxed) + 1;
    for c in boot.interrupt_controllers.iter() {
        if !super::device_tree::PLIC_COMPATIBLE.contains(&c.kind.as_str()) {
            continue;
        }
        let plic = Plic { base: super::phys_to_virt(c.regs.start), context };
        // `riscv,ndev` is required by the binding; without it, the most the PLIC can have.
        let sources = c.inputs.unwrap_or(1023).min(1023);
        for s in 1..=sources {
            plic.write(PRIORITY + 4 * s as usize, 0);
        }
        for word in (0..=sources).step_by(32) {
            plic.write(plic.enable_word(word), 0);
        }
        plic.write(THRESHOLD + 0x1000 * context, 0);
        let open = (1..=sources)
            .filter(|&s| {
                plic.read(PRIORITY + 4 * s as usize) != 0
                    || plic.read(plic.enable_word(s)) & (1 << (s % 32)) != 0
            })
            .count();
        c.report_masked(sources, open);
        if BASE.load(Ordering::Relaxed) == 0 {
            BASE.store(plic.base, Ordering::Relaxed);
            SOURCES.store(sources, Ordering::Relaxed);
        }
    }
}
