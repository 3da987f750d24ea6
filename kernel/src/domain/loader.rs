//! Creating the domains the boot image describes and entering the first one.
//!
//! The boot image (QEMU `-initrd`) holds the compiled manifest and one relocated program image
//! per domain instance. Both are validated again here, whatever the host checked: a corrupt
//! image or manifest is refused with a report and a failure status, before any domain exists.

use alloc::vec;
use alloc::vec::Vec;

use abi::{IMAGE_BASE, IMAGE_SLOT, PAGE_SIZE, Rights};
use boot_image::BootImage;
use frame_allocator::Owner;

use super::stretch::Kind;
use super::{Domain, WORLD, World};
use crate::arch::{self, AddressSpace, UserContext};
use crate::{BootInfo, ExitCode};

/// Pages of stack each domain gets (plus an unmapped guard page below).
pub const STACK_PAGES: usize = 16;

fn reject(what: &str, why: impl defmt::Format) -> ! {
    defmt::error!("boot image rejected: {=str}: {}", what, why);
    crate::shutdown(ExitCode::BootImageRejected)
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

/// Creates every domain of the boot image and runs the first; returns only if there is no
/// boot image.
pub fn start_from_boot_image(boot: &BootInfo) {
    let Some(range) = boot.initrd else { return };
    let bytes = crate::phys::bytes(range.start, range.len() as usize);
    let image = BootImage::parse(bytes).unwrap_or_else(|e| reject("image", e));
    let manifest = manifest::decode(image.manifest()).unwrap_or_else(|e| reject("manifest", e));
    if manifest.domains.len() != image.images().len() {
        reject("image", "the manifest and the image list differ in length");
    }
    defmt::info!(
        "boot image: {=usize} domain(s), {=u64} KiB",
        manifest.domains.len(),
        range.len() >> 10
    );
    super::init();
    let mut guard = WORLD.lock();
    let w = guard.as_mut().expect("world just created");
    for (i, (spec, img)) in manifest.domains.iter().zip(image.images()).enumerate() {
        if spec.name != img.domain || spec.app != img.app {
            reject("image", "image entries do not follow the manifest's domains");
        }
        let id = i as u32;
        let slot = IMAGE_BASE + i * IMAGE_SLOT;
        for seg in &img.segments {
            let inside = (seg.vaddr as usize) >= slot
                && (seg.vaddr + seg.mem_size) as usize <= slot + IMAGE_SLOT;
            if !inside {
                reject("image", "a segment lies outside its domain's image slot");
            }
        }
        if !((slot as u64)..(slot + IMAGE_SLOT) as u64).contains(&img.entry) {
            reject("image", "an entry point lies outside its domain's image slot");
        }
        let space = AddressSpace::new(Owner::Domain(id), (i + 1) as u16)
            .unwrap_or_else(|e| reject("domain", e));
        w.domains.push(Domain {
            name: spec.name.clone(),
            ctx: UserContext::new_user(0, 0, [0; 3]),
            fp: arch::FpState::default(),
            space: Some(space),
            guaranteed_frames: spec.guaranteed / PAGE_SIZE as u64,
            ending: None,
        });
        if let Err(e) = populate(w, id, &image, i, &spec.args) {
            defmt::error!("domain {=str} could not be created: {}", spec.name.as_str(), e);
            w.kill(id, super::Ending::Terminated("could not be created"));
            continue;
        }
        defmt::info!(
            "domain {=str} (id {=u32}): app {=str} at {=u64:#x}, {=u64} of {=u64} frames used",
            spec.name.as_str(),
            id,
            spec.app.as_str(),
            slot as u64,
            w.charged(id),
            w.domains[i].guaranteed_frames
        );
    }
    enter_first(guard)
}

/// Builds domain `id`'s image stretches, its stack and its starting context.
fn populate(
    w: &mut World,
    id: u32,
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
    let base = w.virtual_space.take(STACK_PAGES).ok_or(abi::SysError::NoAddressSpace)?;
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
    w.domains[index].ctx =
        UserContext::new_user(img.entry as usize, sp, [id as usize, args_addr, block.len()]);
    Ok(())
}

fn enter_first(mut guard: spin::MutexGuard<'_, Option<World>>) -> ! {
    let w = guard.as_mut().expect("world exists");
    let Some(first) = w.domains.iter().position(|d| d.ending.is_none()) else {
        super::summary(w);
        drop(guard);
        crate::shutdown(ExitCode::Success)
    };
    w.current = first;
    let mut ctx = w.domains[first].ctx.clone();
    arch::restore_fp(&mut ctx, &w.domains[first].fp);
    w.domains[first].space.as_ref().expect("alive").activate();
    let hz = arch::time::frequency();
    arch::timer::arm(arch::time::now_ticks() + hz * super::TIME_SLICE_US / 1_000_000);
    drop(guard);
    arch::enter_user(&ctx)
}
