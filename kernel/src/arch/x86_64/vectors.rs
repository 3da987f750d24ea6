//! The interrupt vectors the kernel assigns: the local APIC's timer, error and spurious
//! vectors, where the legacy PICs are moved, and the vector of the software interrupts tests
//! raise. (Vectors 0..32 are the CPU's exceptions, named in [`super::frame`].)
//!
//! A leaf: it imports nothing from its siblings, so the IDT's dispatch ([`super::trap`]), the
//! local APIC ([`super::apic`]), the unexpected-interrupt accounting ([`super::interrupts`]) and
//! the user-mode trap path ([`super::user`]) share one list without importing one another.

/// The local APIC timer's vector.
pub const TIMER_VECTOR: u8 = 0x40;
/// The local APIC's error vector.
pub const APIC_ERROR_VECTOR: u8 = 0xfe;
/// The local APIC's spurious-interrupt vector.
pub const SPURIOUS_VECTOR: u8 = 0xff;
/// The first of the 16 vectors the legacy PICs are moved to (they stay masked).
pub const PIC_VECTOR_BASE: u8 = 0x20;
/// The vector of the software interrupts `softint=` raises (self-IPIs, which the kernel does
/// not expect: see `crate::softint`).
pub const SOFTWARE_VECTOR: u8 = 0x51;
