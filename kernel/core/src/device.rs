//! Driver domains: the domains a manifest grants devices to (marked trusted: with no IOMMU a
//! device can write anywhere its driver tells it to), and what only they may have.
//!
//! What is implemented: DMA memory (`dma_alloc`: a nailed stretch of physically contiguous
//! frames from the domain's guarantee; `dma_address`: its physical addresses, for the
//! domain's devices); stretches of device registers (`Kind::Device`: mapped uncached into
//! the driver domain alone, never shared, destroyed or freed as RAM); and devices' interrupts
//! as events.
//!
//! # Interrupts as events
//! A device's interrupt arrives on a *line*: the arch code's number for it (RISC-V: a PLIC
//! source; x86_64: the vector its message-signalled interrupt arrives on), below [`LINES`].
//! The arch's handler, which may run while the kernel holds [`super::WORLD`] (in the idle
//! loop), only marks the line in a lock-free set ([`raise_interrupt`]) and leaves it masked or
//! claimed; the scheduler's path then delivers it ([`World::deliver_interrupts`]): it signals
//! the endpoint the line is bound to, which wakes the driver domain. The line stays quiet
//! until the driver, having served its device, acknowledges it with `irq_ack` on that endpoint.
//! A line bound to nobody (or to a dead domain) is acknowledged and masked at once.

use crate::domain::DomainId;
use core::sync::atomic::{AtomicU64, Ordering};

use abi::{PAGE_SIZE, Rights, SysError};

use crate::platform::{Found, PhysRange, Platform, Routed};

use super::paging::Shortage;
use super::stretch::Kind;
use super::{Filling, World, pages_for};

/// The largest DMA stretch one `dma_alloc` makes: a run of contiguous frames is searched for
/// linearly in the frames of RAM, so its cost grows with the machine, not with the request;
/// drivers make their DMA memory once, when they start.
pub const DMA_MAX: usize = 4 << 20;

// Every grant a manifest may hold has its slot in the control block.
const _: () = assert!(manifest::MAX_DEVICES_PER_DOMAIN <= abi::MAX_DEVICES);

/// Device interrupt lines are numbered below this.
pub const LINES: usize = 1024;

/// The `sender` of the endpoints device interrupts signal.
pub const DEVICE: u32 = u32::MAX - 1;

/// Raised lines not yet delivered: bit `line % 64` of word `line / 64`.
static RAISED: [AtomicU64; LINES / 64] = [const { AtomicU64::new(0) }; LINES / 64];

/// Which words of [`RAISED`] may have a bit set: one load tells the scheduler's path (every
/// switch) that nothing awaits delivery.
static RAISED_WORDS: AtomicU64 = AtomicU64::new(0);

/// Marks device interrupt line `line` raised, for delivery on the scheduler's path. Called by
/// the arch's interrupt handlers (interrupts off, possibly while the kernel holds the world
/// lock), which leave the line masked or claimed until it is acknowledged.
#[inline]
pub fn raise_interrupt(line: u32) {
    let word = line as usize / 64;
    if let Some(bits) = RAISED.get(word) {
        bits.fetch_or(1 << (line % 64), Ordering::AcqRel);
        RAISED_WORDS.fetch_or(1 << word, Ordering::AcqRel);
    }
}

/// Whether a raised line awaits delivery (the idle loop stops waiting for it).
#[inline]
pub fn interrupts_raised() -> bool {
    RAISED_WORDS.load(Ordering::Acquire) != 0
}

/// A device interrupt line bound to an endpoint of a driver domain.
#[derive(Clone, Copy)]
pub(super) struct Binding {
    /// The arch's line number.
    pub line: u32,
    /// The driver domain.
    pub domain: DomainId,
    /// Its endpoint the line signals.
    pub endpoint: usize,
}

/// The most lines bound at once.
pub const MAX_BINDINGS: usize = 64;

/// The most devices to stop (PCI functions, virtio-mmio transports) granted at once.
pub const MAX_FUNCTIONS: usize = 16;

/// What driver domains were given, owned by [`World`]: the interrupt lines bound to their
/// endpoints, and the devices to stop when they die (PCI functions, virtio-mmio transports).
pub(super) struct Devices<F> {
    /// Lines bound to endpoints.
    bindings: heapless::Vec<Binding, MAX_BINDINGS>,
    /// `(driver domain, host bridge, function)`.
    functions: heapless::Vec<(DomainId, F), MAX_FUNCTIONS>,
    /// `(driver domain, device index)` of each disk with a model, whose driver raises
    /// [`abi::Dcb::device_busy`] while the device has its requests.
    modelled: heapless::Vec<(DomainId, usize), MAX_FUNCTIONS>,
}

impl<F> Devices<F> {
    /// None given yet.
    pub fn new() -> Self {
        Devices {
            bindings: heapless::Vec::new(),
            functions: heapless::Vec::new(),
            modelled: heapless::Vec::new(),
        }
    }

    /// Whether line `line` can be bound: a device line, not bound yet, with room for one
    /// more binding.
    #[inline]
    pub fn can_bind(&self, line: u32) -> bool {
        (line as usize) < LINES
            && self.bindings.len() < MAX_BINDINGS
            && self.bindings.iter().all(|b| b.line != line)
    }

    /// Binds `line` to endpoint `endpoint` of `domain` (checked by [`Devices::can_bind`]).
    #[inline]
    pub fn bind(&mut self, line: u32, domain: DomainId, endpoint: usize) -> Option<()> {
        self.bindings.push(Binding { line, domain, endpoint }).ok()
    }

    /// The binding of line `line`, if it is bound.
    #[inline]
    pub fn bound(&self, line: u32) -> Option<Binding> {
        self.bindings.iter().find(|b| b.line == line).copied()
    }

    /// The line bound to endpoint `endpoint` of `domain`, if any.
    #[inline]
    pub fn line_of(&self, domain: DomainId, endpoint: usize) -> Option<u32> {
        self.bindings.iter().find(|b| b.domain == domain && b.endpoint == endpoint).map(|b| b.line)
    }

    /// Whether any line is bound (a device interrupt may still wake a domain).
    #[inline]
    pub fn any_bound(&self) -> bool {
        !self.bindings.is_empty()
    }

    /// The first line of `lines` bound to nobody.
    pub fn free_line(&self, mut lines: core::ops::Range<u32>) -> Option<u32> {
        lines.find(|l| self.bindings.iter().all(|b| b.line != *l))
    }

    /// Records device `function` as driver domain `domain`'s, to stop when it dies.
    pub fn add_function(&mut self, domain: DomainId, function: F) -> Result<(), &'static str> {
        (self.functions.push((domain, function)).is_ok())
            .then_some(())
            .ok_or("more devices granted than the kernel tracks")
    }

    /// Records device `index` of driver domain `domain` as a disk with a model.
    pub fn add_modelled(&mut self, domain: DomainId, index: usize) -> Result<(), &'static str> {
        (self.modelled.push((domain, index)).is_ok())
            .then_some(())
            .ok_or("more disks with a model than the kernel tracks")
    }

    /// The disks with a model: `(driver domain, device index)`.
    #[inline]
    pub fn modelled(&self) -> impl Iterator<Item = (DomainId, usize)> {
        self.modelled.iter().copied()
    }

    /// Unbinds line `line` and releases it at its controller (its device turned out not to
    /// interrupt).
    pub fn release_line<P: Platform<Function = F>>(&mut self, line: u32) {
        P::release_line(line);
        self.bindings.retain(|b| b.line != line);
    }

    /// Stops the devices of dead domain `id`: its PCI functions neither interrupt nor reach
    /// memory any more, its virtio-mmio transports are reset, and its lines are masked at their
    /// controller. How many devices were stopped (lines not counted).
    pub fn release_of<P: Platform<Function = F>>(&mut self, id: DomainId) -> usize {
        let mut stopped = 0;
        for (_, f) in self.functions.iter().filter(|(d, _)| *d == id) {
            P::quiesce_function(f);
            stopped += 1;
        }
        self.functions.retain(|(d, _)| *d != id);
        for b in self.bindings.iter().filter(|b| b.domain == id) {
            P::release_line(b.line);
        }
        self.bindings.retain(|b| b.domain != id);
        self.modelled.retain(|(d, _)| *d != id);
        stopped
    }
}

impl<P: Platform> World<P> {
    /// Binds device interrupt line `line` to a new endpoint of domain `id` and lets the line
    /// through at its controller; the endpoint's index (`None`: no endpoint or binding left,
    /// or the line cannot be enabled).
    pub(super) fn bind_interrupt(&mut self, id: DomainId, line: u32) -> Option<usize> {
        if !self.devices.can_bind(line) {
            return None;
        }
        let endpoint = self.alloc_endpoint(id, DEVICE)?;
        if !P::enable_line(line) {
            return None;
        }
        self.devices.bind(line, id, endpoint)?;
        Some(endpoint)
    }

    /// Delivers every raised line: signals the endpoint it is bound to. A line bound to
    /// nobody, or to a dead domain, is released (acknowledged and masked). With `charge_from`
    /// (timer ticks: an interrupt taken while a domain ran), the kernel's time for each line,
    /// from the end of the previous one, is charged to the driver it was delivered to, not to
    /// the interrupted domain ([`super::sched::Scheduler::charge_since`]).
    pub(super) fn deliver_interrupts(&mut self, charge_from: Option<u64>) {
        let mut at = charge_from;
        // The summary first: a line raised after this swap sets its word's bit again.
        let mut words = RAISED_WORDS.swap(0, Ordering::AcqRel);
        while words != 0 {
            let i = words.trailing_zeros() as usize;
            words &= words - 1;
            let mut bits = RAISED[i].swap(0, Ordering::AcqRel);
            while bits != 0 {
                let line = (i * 64) as u32 + bits.trailing_zeros();
                bits &= bits - 1;
                match self.devices.bound(line) {
                    Some(b) if self.domain(b.domain).is_some() => {
                        self.stamp_interrupt(b);
                        self.signal(b.domain, b.endpoint);
                        at = at.map(|from| self.sched.charge_since::<P>(b.domain, from));
                    }
                    _ => P::release_line(line),
                }
            }
        }
    }

    /// Records in the driver's control block when `b`'s endpoint was signalled
    /// (`Dcb::interrupt_ns` of the device it belongs to).
    fn stamp_interrupt(&self, b: Binding) {
        let Some(frame) = self.domains[b.domain].dcb else { return };
        let dcb = P::dcb(frame);
        if let Some(i) = dcb.devices.iter().position(|s| s.event == b.endpoint as u64) {
            let now = super::clock::ns_from_ticks::<P>(P::now_ticks());
            dcb.interrupt_ns[i].store(now, Ordering::Release);
        }
    }

    /// `irq_ack(endpoint)`: domain `id` has served the device whose interrupt signals its
    /// endpoint `ep`; the line may interrupt again.
    #[inline(never)]
    pub(super) fn irq_ack(&mut self, id: DomainId, ep: usize) -> Result<usize, SysError> {
        let d = self.domain(id).ok_or(SysError::NotFound)?;
        let endpoint = d.endpoints.get(ep).ok_or(SysError::NotFound)?;
        if endpoint.sender != DEVICE {
            return Err(SysError::PermissionDenied);
        }
        let line = self.devices.line_of(id, ep).ok_or(SysError::PermissionDenied)?;
        P::ack_line(line);
        Ok(0)
    }

    /// Whether a disk with a model has requests at its device: its driver says so in its
    /// control block ([`abi::Dcb::device_busy`]).
    pub(super) fn modelled_device_busy(&self) -> bool {
        self.devices.modelled().any(|(id, index)| {
            self.domains[id]
                .dcb
                .is_some_and(|frame| P::dcb(frame).device_busy[index].load(Ordering::Acquire) != 0)
        })
    }

    /// `dma_alloc(bytes) -> base` for domain `id`.
    #[inline(never)]
    pub(super) fn dma_alloc(&mut self, id: DomainId, bytes: usize) -> Result<usize, Shortage> {
        let d = self.domain(id).ok_or(SysError::NotFound)?;
        if !d.driver {
            return Err(SysError::PermissionDenied.into());
        }
        if bytes == 0 || bytes > DMA_MAX {
            return Err(SysError::InvalidArgument.into());
        }
        let pages = pages_for(bytes);
        if !self.domains.within_contract(id, pages as u64) {
            return Err(SysError::NoMemory.into());
        }
        let base = self.domains[id].address.take(pages).ok_or(SysError::NoAddressSpace)?;
        let rights = Rights::READ.union(Rights::WRITE).union(Rights::META);
        let made =
            self.create_stretch_or_wait(id, base, pages, rights, Kind::Dma, Filling::Contiguous);
        if let Err(e) = made {
            self.domains[id].address.give_back(base, pages);
            return Err(e);
        }
        Ok(base)
    }

    /// `dma_address(va) -> pa` for domain `id`.
    #[inline(never)]
    pub(super) fn dma_address(&self, id: DomainId, va: usize) -> Result<usize, SysError> {
        let d = self.domain(id).ok_or(SysError::NotFound)?;
        if !d.driver {
            return Err(SysError::PermissionDenied);
        }
        let (_, s) = self.stretches.own_containing(id, va).ok_or(SysError::NotFound)?;
        if s.kind != Kind::Dma {
            return Err(SysError::InvalidArgument);
        }
        let frame = s.frames[(va - s.base) / PAGE_SIZE].ok_or(SysError::NotMapped)?;
        Ok(frame.addr() as usize + va % PAGE_SIZE)
    }
}

impl<P: Platform> World<P> {
    /// Gives domain `id` the devices the manifest grants it: maps each device's registers
    /// (uncached, for it alone) and its PCI configuration space (read-only), binds its
    /// interrupt to a new endpoint, and describes it in the control block. Fails (the domain
    /// is then not created) if a device is not there or its resources cannot be given.
    pub(super) fn grant_devices(
        &mut self,
        id: DomainId,
        manifest: &manifest::Manifest,
        spec: &manifest::DomainSpec,
        machine: &P::Machine,
    ) -> Result<(), &'static str> {
        if spec.devices.is_empty() {
            return Ok(());
        }
        self.domains[id].driver = true;
        for (index, grant) in spec.devices.iter().enumerate() {
            let target = manifest.grant_target(grant).ok_or("a grant names no device")?;
            let mut found =
                P::find_device(target, machine).ok_or("a granted device is not on this machine")?;
            for (i, (at, regs)) in found.windows.iter().enumerate() {
                let base = self.map_registers(id, *regs, Rights::READ.union(Rights::WRITE))?;
                found.slot.windows[i] = abi::DeviceWindow {
                    base: base as u64,
                    len: regs.len().next_multiple_of(PAGE_SIZE as u64),
                    index: *at,
                    phys: regs.start,
                };
            }
            if let Some(config) = found.config {
                found.slot.config = self.map_registers(id, config, Rights::READ)? as u64;
            }
            self.route_interrupt(id, &mut found)?;
            if let Some(function) = found.function {
                self.devices.add_function(id, function)?;
            }
            if let manifest::DeviceGrant::Disk { disk } = grant
                && let Some(model) = manifest.disks.get(*disk).and_then(|d| d.model)
            {
                found.slot.model = model.code();
                self.devices.add_modelled(id, index)?;
            }
            let frame = self.domains[id].dcb.ok_or("no control block")?;
            P::write_device_slot(frame, index, &found.slot);
            info!(
                "domain {=str}: device {=usize} granted: {=usize} register window(s), interrupt {=str}",
                self.domains[id].name.as_str(),
                index,
                found.windows.len(),
                match found.slot.interrupt {
                    abi::interrupt_kind::LINE => "line",
                    abi::interrupt_kind::MSI => "MSI",
                    abi::interrupt_kind::MSIX => "MSI-X",
                    _ => "none",
                }
            );
        }
        Ok(())
    }

    /// Maps the physical range `regs` (widened to whole pages) into driver domain `id` as a
    /// stretch of device registers with `rights`; its base.
    fn map_registers(
        &mut self,
        id: DomainId,
        regs: PhysRange,
        rights: Rights,
    ) -> Result<usize, &'static str> {
        let first = regs.start & !(PAGE_SIZE as u64 - 1);
        let pages = (regs.end - first).div_ceil(PAGE_SIZE as u64) as usize;
        let base = self.domains[id].address.take(pages).ok_or("no address space")?;
        let filling = Filling::Device(first);
        if self.create_stretch_or_wait(id, base, pages, rights, Kind::Device, filling).is_err() {
            self.domains[id].address.give_back(base, pages);
            return Err("its guarantee cannot hold the registers' page tables");
        }
        Ok(base + (regs.start - first) as usize)
    }

    /// Binds the found device's interrupt to a new endpoint of domain `id`: its fixed line, or
    /// for a PCI function a free device line its MSI-X or MSI messages are routed to.
    fn route_interrupt(
        &mut self,
        id: DomainId,
        found: &mut Found<P::Function>,
    ) -> Result<(), &'static str> {
        if let Some(line) = found.line {
            let ep = self.bind_interrupt(id, line).ok_or("its interrupt line cannot be bound")?;
            found.slot.interrupt = abi::interrupt_kind::LINE;
            found.slot.event = ep as u64;
            return Ok(());
        }
        let Some(function) = found.function else { return Ok(()) };
        let Some(line) = self.devices.free_line(P::DEVICE_LINES) else {
            found.slot.event = u64::MAX;
            return Ok(());
        };
        let Some(message) = P::msi_message(line) else {
            // No message-signalled interrupts on this platform: the driver polls.
            found.slot.event = u64::MAX;
            return Ok(());
        };
        let ep = self.bind_interrupt(id, line).ok_or("no endpoint left for its interrupt")?;
        match P::route_msi(&function, message) {
            Some(Routed::MsiX { bar }) => {
                found.slot.interrupt = abi::interrupt_kind::MSIX;
                found.slot.msix_bar = u64::from(bar);
            }
            Some(Routed::Msi) => found.slot.interrupt = abi::interrupt_kind::MSI,
            None => {
                self.devices.release_line::<P>(line);
                found.slot.event = u64::MAX;
                return Ok(());
            }
        }
        found.slot.event = ep as u64;
        Ok(())
    }
}
