//! The platform bundle: everything the kernel core needs from the machine it runs on, as one
//! trait of associated types and functions.
//!
//! The kernel binary implements [`Platform`] for each architecture over its arch modules (the
//! real clock, timer, interrupt controller, page tables, trap frames and the physical memory's
//! direct map); the host tests implement it over a model (`mock`). Everything is static
//! dispatch: the core is generic over `P: Platform` and the kernel instantiates it once, so the
//! calls compile to what calling the arch modules directly did.

use core::ops::Range;
use core::ptr::NonNull;

use allocator_api2::alloc::Allocator;
use frame_allocator::{Frame, FrameAllocator};

use crate::contract::{AddressSpaceOps, UserContextOps};
use crate::loose::LooseFrames;

/// How a run ends when the core ends it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Every domain has ended (or the `stop=` instant passed).
    Success,
    /// The boot image or its manifest is corrupt.
    BootImageRejected,
}

/// A range of physical addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PhysRange {
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
}

impl PhysRange {
    /// The range's length in bytes.
    pub fn len(&self) -> u64 {
        self.end - self.start
    }

    /// Whether the range holds no byte.
    pub fn is_empty(&self) -> bool {
        self.end <= self.start
    }
}

/// How a PCI function's message-signalled interrupt was routed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Routed {
    /// Through MSI-X, whose table is in this BAR.
    MsiX {
        /// The BAR of the MSI-X table.
        bar: u8,
    },
    /// Through MSI.
    Msi,
}

/// A device found for a grant: its register windows (physical), where its configuration space
/// is (PCI), and how it interrupts.
pub struct Found<F> {
    /// Its slot in the control block, as far as finding it fills it in.
    pub slot: abi::DeviceSlot,
    /// (index, physical range) of each register window to map.
    pub windows: heapless::Vec<(u64, PhysRange), { abi::MAX_WINDOWS }>,
    /// The function's configuration space, to map read-only (PCI).
    pub config: Option<PhysRange>,
    /// A fixed line of the platform's interrupt controller (a device-tree node's).
    pub line: Option<u32>,
    /// The PCI function, whose message-signalled interrupt is routed once a line is chosen.
    pub function: Option<F>,
}

/// A vector in a domain's arena ([`KernelArena`]): the kernel objects it holds.
pub type ArenaVec<T, A> = allocator_api2::vec::Vec<T, A>;

/// The allocator of one domain's kernel objects: an arena of frames charged to the domain (see
/// [`crate::kmem`]), of which the core asks how many frames it holds and wants.
pub trait KernelArena: Allocator + Copy {
    /// A new empty arena for domain `owner`, kept for the rest of the run.
    fn new_arena(owner: u32) -> Self;
    /// Frames the arena asks for to serve `layout`.
    fn frames_needed(layout: core::alloc::Layout) -> u64;
    /// The last allocation refused for want of frames, taken.
    fn take_refused(&self) -> Option<core::alloc::Layout>;
    /// Lets the arena take `frames` more frames.
    fn allow(&self, frames: u64);
    /// Ends the allowance: the arena takes no frame more.
    fn end_allowance(&self);
    /// Frames the arena may still take.
    fn allowance(&self) -> u64;
    /// Frames the arena holds.
    fn frames(&self) -> u64;
    /// Gives every frame back; `Err(bytes)` if objects of that many bytes are still allocated.
    fn release(&self) -> Result<u64, usize>;
}

/// The machine under the kernel core.
pub trait Platform: Sized + 'static {
    /// A protection domain.
    type Space: AddressSpaceOps;
    /// A domain's registers.
    type Context: UserContextOps;
    /// A domain's saved floating-point registers.
    type Fp: Default;
    /// The allocator of a domain's kernel objects.
    type Arena: KernelArena;
    /// What the boot code found on the machine (its devices).
    type Machine;
    /// A device found on the machine that the kernel stops when its driver domain dies (a PCI
    /// function, a virtio-mmio transport).
    type Function: Copy;

    /// Device interrupt lines free for message-signalled interrupts.
    const DEVICE_LINES: Range<u32>;

    /// The timer's count now.
    fn now_ticks() -> u64;
    /// The timer's ticks per second.
    fn frequency() -> u64;
    /// Arms the one-shot timer for the instant `ticks`.
    fn arm_timer(ticks: u64);
    /// Disarms the timer.
    fn disarm_timer();
    /// Disarms the timer for good (the run is idle for ever).
    fn quiesce_timer();
    /// Waits for an interrupt.
    fn wait_for_interrupt();

    /// Lets device interrupt line `line` through at its controller; `false` if it cannot.
    fn enable_line(line: u32) -> bool;
    /// Acknowledges line `line`: it may interrupt again.
    fn ack_line(line: u32);
    /// Acknowledges and masks line `line`.
    fn release_line(line: u32);
    /// The message (address, data) that raises line `line`, if the platform has them.
    fn msi_message(line: u32) -> Option<(u64, u32)>;

    /// Copies `dst.len()` bytes from the current domain's memory at `src`.
    fn copy_from_user(dst: &mut [u8], src: usize) -> Result<(), usize>;
    /// Copies `dst.len()` words from the current domain's memory at `src`.
    fn copy_words_from_user(dst: &mut [u64], src: usize) -> Result<(), usize>;
    /// Copies `src` to the current domain's memory at `dst`.
    fn copy_to_user(src: &[u8], dst: usize) -> Result<(), usize>;

    /// Saves the floating-point registers of a domain leaving the CPU.
    fn save_fp(ctx: &mut Self::Context, fp: &mut Self::Fp);
    /// Restores the floating-point registers of a domain coming to the CPU.
    fn restore_fp(ctx: &mut Self::Context, fp: &Self::Fp);
    /// Enters user mode in `ctx`.
    fn enter_user(ctx: NonNull<Self::Context>) -> !;
    /// Ends the run.
    fn exit(how: Exit) -> !;

    /// Runs `f` with the frame allocator.
    fn with_frames<R>(f: impl FnOnce(&mut FrameAllocator<'static>) -> R) -> R;
    /// Runs `f` with the table of loose frames (see [`crate::loose`]).
    fn with_loose<R>(f: impl FnOnce(&mut LooseFrames) -> R) -> R;
    /// Fills `frame` with zeroes.
    fn zero_frame(frame: Frame);
    /// Copies `data` to the start of `frame`.
    fn write_frame(frame: Frame, data: &[u8]);
    /// `len` bytes of physical memory at `pa`.
    fn bytes(pa: u64, len: usize) -> &'static [u8];
    /// The domain control block in `frame`.
    fn dcb(frame: Frame) -> &'static abi::Dcb;
    /// Writes `dcb` to `frame`.
    fn write_dcb(frame: Frame, dcb: &abi::Dcb);
    /// Writes the saved context of the control block in `frame`.
    fn write_saved_context(frame: Frame, ctx: &abi::SavedContext);
    /// Writes channel slot `index` of the control block in `frame`.
    fn write_channel_slot(frame: Frame, index: usize, slot: &abi::ChannelSlot);
    /// Writes device slot `index` of the control block in `frame`.
    fn write_device_slot(frame: Frame, index: usize, slot: &abi::DeviceSlot);
    /// Bytes of the kernel heap in use.
    fn heap_used() -> usize;

    /// The device `target` names on `machine`.
    fn find_device(
        target: manifest::DeviceTarget<'_>,
        machine: &Self::Machine,
    ) -> Option<Found<Self::Function>>;
    /// Routes `function`'s message-signalled interrupt to `message`.
    fn route_msi(function: &Self::Function, message: (u64, u32)) -> Option<Routed>;
    /// Stops `function`: it neither interrupts nor reaches memory any more (a PCI function at
    /// the bus; a virtio-mmio transport by a reset).
    fn quiesce_function(function: &Self::Function);
}
