//! The kernel core ([`kernel_core`]: domains, stretches, scheduling, the system calls) on this
//! machine: the platform it is instantiated with ([`Machine`], over the arch modules, the frame
//! allocator, the physical memory's direct map, the kernel arenas and PCI), the one world it
//! runs ([`WORLD`]), and the entries the boot code and the trap paths call.
//!
//! Everything here runs in trap handlers (interrupts off, one CPU) or at boot, under the one
//! [`WORLD`] lock.

use core::ptr::NonNull;

use frame_allocator::{Frame, FrameAllocator};
use kernel_core::loose::LooseFrames;
use kernel_core::{BootOptions, Exit, Found, KernelArena, Platform, Routed, World};
use spin::Mutex;

use crate::arch::{self, UserTrap};
use crate::arena::{Arena, ArenaAlloc};
use crate::boot_info::{BootInfo, PciHost};
use crate::{ExitCode, memory, pci, phys, virtio_mmio};

pub use kernel_core::raise_interrupt;

/// The machine under the kernel core: this architecture and this kernel's memory.
pub struct Machine;

/// A device granted to a driver domain that the kernel stops when the domain dies.
#[derive(Clone, Copy)]
pub enum Function {
    /// A PCI function, with the host bridge it is behind: stopped at the bus.
    Pci(PciHost, pci::Function),
    /// A virtio-mmio transport, by the physical base of its registers: reset.
    VirtioMmio(u64),
}

/// The kernel's domains and stretches.
pub static WORLD: Mutex<Option<World<Machine>>> = Mutex::new(None);

/// The table of loose frames (see [`kernel_core::loose`]), made on first use from the words
/// the frame allocator set aside for it.
static LOOSE: Mutex<Option<LooseFrames>> = Mutex::new(None);

impl KernelArena for ArenaAlloc {
    fn new_arena(owner: u32) -> Self {
        ArenaAlloc::new(alloc::boxed::Box::leak(alloc::boxed::Box::new(Arena::new(owner))))
    }
    fn frames_needed(layout: core::alloc::Layout) -> u64 {
        Arena::frames_needed(layout)
    }
    fn take_refused(&self) -> Option<core::alloc::Layout> {
        self.arena().take_refused()
    }
    fn allow(&self, frames: u64) {
        self.arena().allow(frames)
    }
    fn end_allowance(&self) {
        self.arena().end_allowance()
    }
    fn allowance(&self) -> u64 {
        self.arena().allowance()
    }
    fn frames(&self) -> u64 {
        self.arena().frames()
    }
    fn release(&self) -> Result<u64, usize> {
        self.arena().release()
    }
}

impl Platform for Machine {
    type Space = arch::AddressSpace;
    type Context = arch::UserContext;
    type Fp = arch::FpState;
    type Arena = ArenaAlloc;
    type Machine = BootInfo;
    type Function = Function;

    const DEVICE_LINES: core::ops::Range<u32> = arch::interrupts::DEVICE_LINES;

    #[inline(always)]
    fn now_ticks() -> u64 {
        arch::time::now_ticks()
    }
    #[inline(always)]
    fn frequency() -> u64 {
        arch::time::frequency()
    }
    #[inline(always)]
    fn arm_timer(ticks: u64) {
        arch::timer::arm(ticks)
    }
    #[inline(always)]
    fn disarm_timer() {
        arch::timer::disarm()
    }
    #[inline(always)]
    fn quiesce_timer() {
        arch::timer::quiesce()
    }
    #[inline(always)]
    fn wait_for_interrupt() {
        arch::wait_for_interrupt()
    }
    #[inline(always)]
    fn enable_line(line: u32) -> bool {
        arch::interrupts::enable_line(line)
    }
    #[inline(always)]
    fn ack_line(line: u32) {
        arch::interrupts::ack_line(line)
    }
    #[inline(always)]
    fn release_line(line: u32) {
        arch::interrupts::release_line(line)
    }
    #[inline(always)]
    fn msi_message(line: u32) -> Option<(u64, u32)> {
        arch::interrupts::msi_message(line)
    }
    #[inline(always)]
    fn copy_from_user(dst: &mut [u8], src: usize) -> Result<(), usize> {
        arch::copy_from_user(dst, src)
    }
    #[inline(always)]
    fn copy_words_from_user(dst: &mut [u64], src: usize) -> Result<(), usize> {
        arch::copy_words_from_user(dst, src)
    }
    #[inline(always)]
    fn copy_to_user(src: &[u8], dst: usize) -> Result<(), usize> {
        arch::copy_to_user(src, dst)
    }
    #[inline(always)]
    fn save_fp(ctx: &mut arch::UserContext, fp: &mut arch::FpState) {
        arch::save_fp(ctx, fp)
    }
    #[inline(always)]
    fn restore_fp(ctx: &mut arch::UserContext, fp: &arch::FpState) {
        arch::restore_fp(ctx, fp)
    }
    fn enter_user(ctx: NonNull<arch::UserContext>) -> ! {
        arch::enter_user(ctx)
    }
    fn exit(how: Exit) -> ! {
        crate::shutdown(match how {
            Exit::Success => ExitCode::Success,
            Exit::BootImageRejected => ExitCode::BootImageRejected,
        })
    }
    #[inline(always)]
    fn with_frames<R>(f: impl FnOnce(&mut FrameAllocator<'static>) -> R) -> R {
        memory::with_frames(f)
    }
    #[inline(always)]
    fn with_loose<R>(f: impl FnOnce(&mut LooseFrames) -> R) -> R {
        let mut table = LOOSE.lock();
        let table = table.get_or_insert_with(|| {
            let (base, words) = memory::take_frame_words();
            LooseFrames::new(base, words)
        });
        f(table)
    }
    #[inline(always)]
    fn zero_frame(frame: Frame) {
        phys::zero_frame(frame)
    }
    #[inline(always)]
    fn write_frame(frame: Frame, data: &[u8]) {
        phys::write_frame(frame, data)
    }
    #[inline(always)]
    fn bytes(pa: u64, len: usize) -> &'static [u8] {
        phys::bytes(pa, len)
    }
    #[inline(always)]
    fn dcb(frame: Frame) -> &'static abi::Dcb {
        phys::dcb(frame)
    }
    #[inline(always)]
    fn write_dcb(frame: Frame, dcb: &abi::Dcb) {
        phys::write_dcb(frame, dcb)
    }
    #[inline(always)]
    fn write_saved_context(frame: Frame, ctx: &abi::SavedContext) {
        phys::write_saved_context(frame, ctx)
    }
    #[inline(always)]
    fn write_channel_slot(frame: Frame, index: usize, slot: &abi::ChannelSlot) {
        phys::write_channel_slot(frame, index, slot)
    }
    #[inline(always)]
    fn write_device_slot(frame: Frame, index: usize, slot: &abi::DeviceSlot) {
        phys::write_device_slot(frame, index, slot)
    }
    fn heap_used() -> usize {
        crate::heap::used()
    }
    fn find_device(target: manifest::DeviceTarget<'_>, boot: &BootInfo) -> Option<Found<Function>> {
        find(target, boot)
    }
    fn route_msi(function: &Function, message: (u64, u32)) -> Option<Routed> {
        let Function::Pci(host, function) = function else { return None };
        match pci::route_msi(host, function, message)? {
            pci::Routed::MsiX { bar, .. } => Some(Routed::MsiX { bar }),
            pci::Routed::Msi => Some(Routed::Msi),
        }
    }
    fn quiesce_function(function: &Function) {
        match function {
            Function::Pci(host, function) => pci::quiesce(host, function),
            Function::VirtioMmio(base) => virtio_mmio::reset(*base),
        }
    }
}

/// Entry from the arch trap handler for every trap taken in U-mode (see
/// [`kernel_core::on_user_trap`]).
///
/// Hinted inline: x86_64 has one caller, and keeping the system-call path in it saves a call
/// and a frame on every system call.
#[inline]
pub fn on_user_trap(trap: UserTrap) -> arch::Resume {
    let mut guard = WORLD.lock();
    let w = guard.as_mut().expect("user trap without domains");
    kernel_core::on_user_trap(w, trap)
}

/// Creates every domain of the boot image and runs the first; returns only if there is no
/// boot image.
pub fn start_from_boot_image(boot: &BootInfo, args: &crate::cmdline::Args<'_>) {
    let Some(range) = boot.initrd else { return };
    let bytes = phys::bytes(range.start, range.len() as usize);
    let options = BootOptions { trace_sched: args.trace_sched, stop_ns: args.stop_ns };
    let mut guard = WORLD.lock();
    let w = guard.insert(World::new());
    kernel_core::start_from_boot_image(w, bytes, boot, options);
    let ctx = kernel_core::enter_first(w);
    drop(guard);
    arch::enter_user(ctx)
}

/// Kernel tests of the core on this machine (run with `test=domains::...`): the core's
/// [`kernel_core::checks`] over the real frames and page tables.
pub mod tests {
    use kernel_core::checks;

    use super::Machine;
    use crate::ktest::{Failed, Outcome};

    fn outcome(result: checks::Outcome) -> Outcome {
        result.map_err(|_| Failed)
    }

    /// See [`checks::scrub_on_death`].
    pub fn scrub_on_death() -> Outcome {
        outcome(checks::scrub_on_death::<Machine>())
    }
    /// See [`checks::tables_follow_mappings`].
    pub fn tables_follow_mappings() -> Outcome {
        outcome(checks::tables_follow_mappings::<Machine>())
    }
    /// See [`checks::contract_and_overlap`].
    pub fn contract_and_overlap() -> Outcome {
        outcome(checks::contract_and_overlap::<Machine>())
    }
    /// See [`checks::revocation_window`].
    pub fn revocation_window() -> Outcome {
        outcome(checks::revocation_window())
    }
    /// See [`checks::event_while_waiting_for_frames`].
    pub fn event_while_waiting_for_frames() -> Outcome {
        outcome(checks::event_while_waiting_for_frames::<Machine>())
    }
    /// See [`checks::deadlock_leaves_restarted_calls_alone`].
    pub fn deadlock_leaves_restarted_calls_alone() -> Outcome {
        outcome(checks::deadlock_leaves_restarted_calls_alone::<Machine>())
    }
    /// See [`checks::kernel_arena`].
    pub fn kernel_arena() -> Outcome {
        outcome(checks::kernel_arena::<Machine>())
    }
    /// See [`checks::address_quota_reuse`].
    pub fn address_quota_reuse() -> Outcome {
        outcome(checks::address_quota_reuse())
    }
}

/// The device `target` names on this machine, with what its driver domain is to be given.
fn find(target: manifest::DeviceTarget<'_>, boot: &BootInfo) -> Option<Found<Function>> {
    use manifest::DeviceTarget;
    let mut slot = abi::DeviceSlot { event: u64::MAX, ..Default::default() };
    if let DeviceTarget::Node { compatible, unit } = target {
        // Units count the nodes of that `compatible` from the lowest address up.
        let mut nodes: heapless::Vec<&crate::boot_info::Device, 32> =
            boot.devices.iter().filter(|d| d.kind == compatible).collect();
        nodes.sort_unstable_by_key(|d| d.regs.start);
        let node = nodes.get(usize::from(unit))?;
        slot.kind = abi::device_kind::NODE;
        let mut windows = heapless::Vec::new();
        windows.push((0, node.regs)).ok()?;
        let function = (compatible == manifest::VIRTIO_MMIO_COMPATIBLE)
            .then_some(Function::VirtioMmio(node.regs.start));
        return Some(Found { slot, windows, config: None, line: node.irq, function });
    }
    let host = boot.pci?;
    let mut seen = 0u16;
    let mut hit = None;
    pci::walk(&host, &mut |f| {
        let wanted = match target {
            DeviceTarget::PciAddress { bus, slot, function } => {
                (f.bus, f.device, f.function) == (bus, slot, function)
            }
            DeviceTarget::PciId { vendor, device, .. } => f.id == (vendor, device),
            DeviceTarget::PciClass { class, subclass, .. } => {
                (f.class.0, f.class.1) == (class, subclass)
            }
            DeviceTarget::Node { .. } => false,
        };
        let index = match target {
            DeviceTarget::PciId { index, .. } | DeviceTarget::PciClass { index, .. } => index,
            _ => 0,
        };
        if wanted && hit.is_none() {
            if seen == index {
                hit = Some(f);
            }
            seen += 1;
        }
    });
    let f = hit?;
    slot.kind = abi::device_kind::PCI;
    slot.pci_id = u64::from(f.id.0) << 16 | u64::from(f.id.1);
    slot.pci_location = u64::from(f.bus) << 16 | u64::from(f.device) << 8 | u64::from(f.function);
    slot.pci_class = u64::from(f.class.0) << 16 | u64::from(f.class.1) << 8 | u64::from(f.class.2);
    let msix_bar = pci::msix_bar(&host, &f);
    let windows = pci::windows(&host, &f)
        .into_iter()
        .filter(|w| Some(w.bar) != msix_bar)
        .map(|w| (u64::from(w.bar), w.regs))
        .collect();
    let config = pci::config_space(&host, &f);
    Some(Found {
        slot,
        windows,
        config: Some(config),
        line: None,
        function: Some(Function::Pci(host, f)),
    })
}
