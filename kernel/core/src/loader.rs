//! Creating the domains the boot image describes and entering the first one.
//!
//! The boot image (QEMU `-initrd`) holds the compiled manifest and one relocated program image
//! per domain instance. Both are validated again here, whatever the host checked: a corrupt
//! image or manifest is refused with a report and a failure status, before any domain exists.

use crate::domain::DomainId;
use alloc::vec;
use alloc::vec::Vec;
use core::ptr::NonNull;
use core::sync::atomic::Ordering;

use abi::{IMAGE_BASE, IMAGE_SLOT, PAGE_SIZE, Rights};
use boot_image::BootImage;

use super::World;
use super::stretch::Kind;
use crate::contract::{AddressSpaceOps, UserContextOps};
use crate::log::Report;
use crate::{Exit, Platform};

/// Pages of stack each domain gets (plus an unmapped guard page below).
pub const STACK_PAGES: usize = 16;

fn reject<P: Platform>(what: &str, why: impl Report) -> ! {
    error!("boot image rejected: {=str}: {}", what, why);
    P::exit(Exit::BootImageRejected)
}

/// What the command line asks of the run.
#[derive(Clone, Copy, Debug, Default)]
pub struct BootOptions {
    /// Trace the scheduler's decisions (`trace=sched`).
    pub trace_sched: bool,
    /// End the run at this instant, in ns since boot (`stop=`).
    pub stop_ns: Option<u64>,
}

/// The argument block a domain finds in `a1`: `u32 argc`, then per argument `u32 len` and the
/// bytes, little-endian, unpadded.
fn argument_block(args: &[alloc::string::String]) -> Vec<u8> {
    let mut block = Vec::new();
    block.extend_from_slice(&(args.len() as u32).to_le_bytes());
    for a in args {
        block.extend_from_slice(&(a.len() as u32).to_le_bytes());
        block.extend_from_slice(a.as_bytes());
    }
    block
}

/// Creates in `w` (a world with no domain yet) every domain of the boot image `bytes`, with
/// the devices of `machine` their manifest grants them; a corrupt image or manifest ends the
/// run. [`enter_first`] then says what runs first.
pub fn start_from_boot_image<P: Platform>(
    w: &mut World<P>,
    bytes: &[u8],
    machine: &P::Machine,
    args: BootOptions,
) {
    let image = BootImage::parse(bytes).unwrap_or_else(|e| reject::<P>("image", e));
    let manifest =
        manifest::decode(image.manifest()).unwrap_or_else(|e| reject::<P>("manifest", e));
    if manifest.domains.len() != image.images().len() {
        reject::<P>("image", "the manifest and the image list differ in length");
    }
    info!(
        "boot image: {=usize} domain(s), {=u64} KiB",
        manifest.domains.len(),
        (bytes.len() >> 10) as u64
    );
    w.sched.policy.set_trace(args.trace_sched);
    w.sched.stop_at = args.stop_ns.map(super::clock::ticks_from_ns::<P>);
    for (i, (spec, img)) in manifest.domains.iter().zip(image.images()).enumerate() {
        if spec.name != img.domain || spec.app != img.app {
            reject::<P>("image", "image entries do not follow the manifest's domains");
        }
        let Some(id) = w.domains.next_id() else {
            reject::<P>("manifest", "more domains than frame owners can name")
        };
        let slot = IMAGE_BASE + i * IMAGE_SLOT;
        for seg in &img.segments {
            let inside = (seg.vaddr as usize) >= slot
                && (seg.vaddr + seg.mem_size) as usize <= slot + IMAGE_SLOT;
            if !inside {
                reject::<P>("image", "a segment lies outside its domain's image slot");
            }
        }
        if !((slot as u64)..(slot + IMAGE_SLOT) as u64).contains(&img.entry) {
            reject::<P>("image", "an entry point lies outside its domain's image slot");
        }
        let space = P::Space::new(id.owner()).unwrap_or_else(|e| reject::<P>("domain", e));
        let page = PAGE_SIZE as u64;
        let quota = w.region.share(spec.address_space as usize).unwrap_or_else(|| {
            reject::<P>("domain", "the stretch region cannot hold its address space")
        });
        if w.add_domain(&spec.name, space, spec.guaranteed / page, spec.optimistic / page, quota)
            != Some(id)
        {
            reject::<P>("domain", "the kernel heap cannot hold its records");
        }
        let contract = spec.cpu.contract();
        if w.sched.policy.try_add(contract, 0).is_err() {
            reject::<P>("domain", "the kernel heap cannot hold its scheduler records");
        }
        w.domains[id].disk = spec.disk.map(|d| (d.period_ns, d.slice_ns));
        if let Err(e) = populate(w, id, &image, i, &spec.args) {
            error!("domain {=str} could not be created: {}", spec.name.as_str(), e);
            w.kill(id, super::Ending::Terminated(super::Termination::NotCreated));
            continue;
        }
        if let Err(e) = w.grant_devices(id, &manifest, spec, machine) {
            error!("domain {=str} could not be given its devices: {=str}", spec.name.as_str(), e);
            w.kill(id, super::Ending::Terminated(super::Termination::NotCreated));
            continue;
        }
        info!(
            "domain {=str} (id {=u32}): app {=str} at {=u64:#x}, {=u64} of {=u64} frames used",
            spec.name.as_str(),
            id.raw(),
            spec.app.as_str(),
            slot as u64,
            w.domains.charged(id),
            w.domains[id].guaranteed_frames
        );
        info!(
            "domain {=str}: cpu contract: slice {=u64} us every {=u64} us, extra {=bool}, latency {=u64} us",
            spec.name.as_str(),
            contract.slice / 1000,
            contract.period / 1000,
            contract.extra,
            contract.latency / 1000
        );
        let share = w.domains[id].address.range();
        info!(
            "domain {=str}: address space {=u64:#x}..{=u64:#x} ({=u64} MiB)",
            spec.name.as_str(),
            share.start as u64,
            share.end as u64,
            (share.len() >> 20) as u64
        );
        publish_contract(w, id, contract);
        w.domains.publish_frames(id);
    }
    let mut ends = alloc::vec![0usize; w.domains.len()];
    for channel in &manifest.channels {
        let slot = [ends[channel.from], ends[channel.to]];
        ends[channel.from] += 1;
        ends[channel.to] += 1;
        let disk = |i: usize| stream_contract(manifest.domains.get(i).and_then(|d| d.disk));
        let net = |i: usize| stream_contract(manifest.domains.get(i).and_then(|d| d.net));
        let peers = [(disk(channel.to), net(channel.to)), (disk(channel.from), net(channel.from))];
        if let Err(e) = connect(w, channel, slot, peers) {
            error!("channel {=str} could not be created: {}", channel.name.as_str(), e);
        }
    }
    // The decoded manifest and the image directory are boot-time state that nothing keeps:
    // `enter_first` never returns, so they go now rather than stay on the heap for good.
    drop(ends);
    drop(manifest);
    drop(image);
    let heap = P::heap_used();
    w.reports.domains_made(heap);
    info!("kernel heap: {=usize} KiB used at boot", heap >> 10);
}

/// Builds domain `id`'s image stretches, its stack and its starting context.
fn populate<P: Platform>(
    w: &mut World<P>,
    id: DomainId,
    image: &BootImage<'_>,
    index: usize,
    args: &[alloc::string::String],
) -> Result<(), abi::SysError> {
    let img = &image.images()[index];
    for seg in &img.segments {
        let pages = (seg.mem_size as usize).div_ceil(PAGE_SIZE);
        let rights =
            Rights::from_bits(seg.rights as usize).ok_or(abi::SysError::InvalidArgument)?;
        let data = image.segment_data(seg);
        w.create_stretch(id, seg.vaddr as usize, pages, rights, Kind::Image, data)?;
    }
    let base = w.domains[id].address.take(STACK_PAGES).ok_or(abi::SysError::NoAddressSpace)?;
    let block = argument_block(args);
    let bytes = STACK_PAGES * PAGE_SIZE;
    if block.len() + 64 > bytes {
        return Err(abi::SysError::InvalidArgument);
    }
    let mut stack = vec![0u8; bytes];
    let args_at = bytes - block.len();
    stack[args_at..].copy_from_slice(&block);
    w.create_stretch(
        id,
        base,
        STACK_PAGES,
        Rights::READ.union(Rights::WRITE),
        Kind::Stack,
        &stack,
    )?;
    let args_addr = base + args_at;
    let sp = args_addr & !15;
    let dcb_at = w.domains[id].address.take(1).ok_or(abi::SysError::NoAddressSpace)?;
    w.create_stretch(id, dcb_at, 1, Rights::READ.union(Rights::WRITE), Kind::ControlBlock, &[])?;
    let frame = w.stretches[&dcb_at].frames[0].ok_or(abi::SysError::NoMemory)?;
    let dcb = abi::Dcb {
        domain_id: u64::from(id.raw()),
        timebase_hz: P::frequency(),
        trace: u64::from(w.sched.tracing()),
        ..Default::default()
    };
    P::write_dcb(frame, &dcb);
    w.domains[id].dcb = Some(frame);
    w.domains[id].dcb_va = dcb_at;
    *w.domains[id].ctx =
        P::Context::new_user(img.entry as usize, sp, [id.index(), args_addr, block.len(), dcb_at]);
    Ok(())
}

/// Creates the manifest's IO channels: a shared stretch owned by the sender, read-write for
/// both ends, an endpoint at each end that only the other end may signal, and the description
/// of the channel in both control blocks, each end's with its peer's disk-time and link-time
/// contracts (`peers`: the sending end's, which are the receiver's, first).
fn connect<P: Platform>(
    w: &mut World<P>,
    channel: &manifest::ChannelSpec,
    slot: [usize; 2],
    peers: [(abi::StreamContract, abi::StreamContract); 2],
) -> Result<(), abi::SysError> {
    let named = |index: usize| u32::try_from(index).ok().and_then(|raw| w.domains.id(raw));
    let (Some(from), Some(to)) = (named(channel.from), named(channel.to)) else {
        return Err(abi::SysError::NotFound);
    };
    if w.domain(from).is_none() || w.domain(to).is_none() {
        return Err(abi::SysError::NotFound);
    }
    let pages = (channel.bytes() as usize).div_ceil(PAGE_SIZE);
    let base = w.domains[from].address.take(pages).ok_or(abi::SysError::NoAddressSpace)?;
    let rw = Rights::READ.union(Rights::WRITE);
    w.create_stretch(from, base, pages, rw, Kind::Channel, &[])?;
    w.set_stretch_rights(base, to, rw)?;
    let space_event = w.alloc_endpoint(from, to.raw()).ok_or(abi::SysError::NoMemory)?;
    let data_event = w.alloc_endpoint(to, from.raw()).ok_or(abi::SysError::NoMemory)?;
    if w.sched.tracing() {
        info!(
            "event channel: name={=str} from={=usize} to={=usize} data={=usize} space={=usize}",
            channel.name.as_str(),
            from.index(),
            to.index(),
            data_event,
            space_event
        );
    }
    let mut name = [0u8; 32];
    let n = channel.name.len().min(32);
    name[..n].copy_from_slice(&channel.name.as_bytes()[..n]);
    let ends = [
        (from, abi::ChannelRole::Sender, space_event, to, data_event, slot[0], peers[0]),
        (to, abi::ChannelRole::Receiver, data_event, from, space_event, slot[1], peers[1]),
    ];
    for (me, role, local, peer, peer_event, index, (peer_disk, peer_net)) in ends {
        let frame = w.domains[me].dcb.ok_or(abi::SysError::NotFound)?;
        let slot = abi::ChannelSlot {
            role: role as u16,
            name,
            base: base as u64,
            slots: channel.slots,
            // At most MAX_SLOT_SIZE (4096) and MAX_EVENTS, by the manifest's check.
            slot_size: channel.slot_size as u16,
            local_event: local as u16,
            peer_domain: peer.raw(),
            peer_event: peer_event as u16,
            peer_disk,
            peer_net,
        };
        P::write_channel_slot(frame, index, &slot);
    }
    Ok(())
}

/// The context of the first domain to run, once [`start_from_boot_image`] made them all (the
/// kernel enters it once it has let go of the world); ends the run if no domain could be
/// created.
pub fn enter_first<P: Platform>(w: &mut World<P>) -> NonNull<P::Context> {
    w.sched.policy.restart(super::clock::now_ns::<P>());
    super::sched::first(w)
}

/// A domain's disk-time contract as a channel slot carries it (all zero: none).
fn stream_contract(spec: Option<manifest::CpuSpec>) -> abi::StreamContract {
    spec.map_or(abi::StreamContract::default(), |c| abi::StreamContract {
        period_ns: c.period_ns,
        slice_ns: c.slice_ns,
        latency_ns: c.latency_ns,
        extra: u64::from(c.extra),
    })
}

/// Writes domain `index`'s CPU contract into its control block.
fn publish_contract<P: Platform>(w: &World<P>, id: DomainId, c: atropos::Contract) {
    let Some(frame) = w.domains[id].dcb else { return };
    let cpu = &P::dcb(frame).cpu;
    cpu.period_ns.store(c.period, Ordering::Relaxed);
    cpu.slice_ns.store(c.slice, Ordering::Relaxed);
    cpu.latency_ns.store(c.latency, Ordering::Relaxed);
    cpu.extra.store(u64::from(c.extra), Ordering::Relaxed);
}
