//! The registers a trap saves: what the trap vector (`trap`) fills and the SBI handlers
//! (`sbi`) read and answer in. Its own module, so that the handlers depend on the frame and
//! not on the vector that calls them.

/// The registers of the interrupted code, `x0` to `x31` (`regs[0]` is unused, `regs[2]` is `sp`
/// for traps from S/U-mode and 0 for traps from M-mode).
#[repr(C)]
pub struct TrapFrame {
    /// `x0`..`x31` by number.
    pub regs: [usize; 32],
}

impl TrapFrame {
    /// Argument/result register `a<n>`.
    pub fn a(&self, n: usize) -> usize {
        self.regs[10 + n]
    }

    /// Sets argument/result register `a<n>`.
    pub fn set_a(&mut self, n: usize, value: usize) {
        self.regs[10 + n] = value;
    }
}
