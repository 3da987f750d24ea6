//! Apps: building them as static position-independent executables, relocating one copy per
//! domain instance into its image slot, and packing the copies with the compiled manifest into
//! the boot image (`libs/boot_image`). See `docs/userland.md`.
//!
//! Each app under `userland/apps/` (and each driver domain under `drivers/`) is built once per architecture, linked at address 0 with
//! libtessera's `tessera-app.ld` (three page-aligned segments: text R+X, rodata R, data+bss
//! R+W). Instance `i` of the manifest is relocated to `abi::IMAGE_BASE + i * abi::IMAGE_SLOT`:
//! every dynamic relocation must be the architecture's relative one (`R_RISCV_RELATIVE`,
//! `R_X86_64_RELATIVE`: `*(base + offset) = base + addend`); anything that needs a symbol, a
//! dynamic linker, TLS or a page shared by different rights is refused, and so is an app built
//! for another architecture than the boot image's.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, Result, bail, ensure};
use boot_image::{BootImage, BootImageBuilder};
use object::LittleEndian as LE;
use object::elf;
use object::read::elf::{Dyn, FileHeader, ProgramHeader, Rela, SectionHeader};

use tool_base::{Arch, util};

/// Page size of the single address space.
const PAGE: u64 = abi::PAGE_SIZE as u64;

/// `DT_RELR`/`DT_RELRSZ` (packed relative relocations), which are not implemented.
const DT_RELRSZ: u64 = 35;
const DT_RELR: u64 = 36;

/// One loadable segment of a relocated app: `(vaddr, mem_size, rights, data)`, page-aligned
/// `vaddr` and `mem_size`, `data` the bytes stored in the image (the rest is zero-filled).
pub type Segment = (u64, u64, u8, Vec<u8>);

/// An app relocated to its instance's base address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Relocated {
    /// The entry point (`_start`) at its final address.
    pub entry: u64,
    /// The segments, sorted by address, page-aligned, with `abi::Rights` bits.
    pub segments: Vec<Segment>,
}

impl Relocated {
    /// One past the last address of the last segment.
    pub fn end(&self) -> u64 {
        self.segments.last().map_or(0, |(vaddr, size, _, _)| vaddr + size)
    }
}

/// The apps: directories under `userland/apps/` with a `Cargo.toml`, and the driver domains:
/// directories under `drivers/` with a `src/main.rs` (the others there are libraries). Each is
/// a package and a binary named like its directory, `_` written `-` (`drivers/virtio_blk` is
/// app `virtio-blk`); sorted.
pub fn app_names() -> Vec<String> {
    let root = util::root();
    let listed = |dir: PathBuf, marker: &str| -> Vec<String> {
        std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .filter_map(|e| e.ok())
                    .filter(|e| e.path().join(marker).is_file())
                    .filter_map(|e| e.file_name().to_str().map(|n| n.replace('_', "-")))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut names = listed(root.join("userland").join("apps"), "Cargo.toml");
    names.extend(listed(root.join("drivers"), "src/main.rs"));
    names.sort();
    names
}

/// The cargo package spec of app `name`: with the version, so that an app named like a
/// dependency (`spin`) is not ambiguous (apps share the workspace's version).
pub fn package_spec(name: &str) -> String {
    format!("{name}@{}", env!("CARGO_PKG_VERSION"))
}

/// The `rustc` flags of app builds for `arch` (`CARGO_ENCODED_RUSTFLAGS` form: separated by
/// 0x1f).
fn app_rustflags(arch: Arch) -> String {
    let mut flags = vec!["-C", "relocation-model=pie", "-C", "link-arg=-pie"];
    flags.extend(["-C", "link-arg=--no-dynamic-linker"]);
    if arch == Arch::Riscv64 {
        // The precompiled `core` and `alloc` of RISC-V are not position-independent: their
        // read-only data holds absolute addresses. Let the linker turn those into relative
        // relocations in read-only segments too; xtask applies every relocation before the
        // image is loaded, so no segment is ever written at run time. (x86_64's are, and its
        // apps keep every relocation in the writable segment.)
        flags.extend(["-C", "link-arg=-znotext"]);
    }
    flags.extend([
        "-C",
        "force-frame-pointers=yes",
        // Apps are linked at 0, where the linker would also put the debug information of every
        // function it discarded: gdb would then name `_start` after one of them and unwind
        // through it. Mark them with an address no code has instead (loaded bytes unchanged;
        // `.debug_ranges` and `.debug_loc` keep the linker's own marker, as -1 means something
        // else there).
        "-C",
        "link-arg=-zdead-reloc-in-nonalloc=.debug_info=0xffffffffffffffff",
        "-C",
        "link-arg=-zdead-reloc-in-nonalloc=.debug_line=0xffffffffffffffff",
        "-C",
        "link-arg=-zdead-reloc-in-nonalloc=.debug_aranges=0xffffffffffffffff",
        "-C",
        "link-arg=-zdead-reloc-in-nonalloc=.debug_frame=0xffffffffffffffff",
        // Found through the search path libtessera's build.rs adds.
        "-C",
        "link-arg=-Ttessera-app.ld",
    ]);
    if arch == Arch::X86_64 {
        flags.extend([
            // The target's default is the kernel code model (code in the top 2 GiB); apps are
            // position-independent code anywhere in the user half.
            "-C",
            "code-model=small",
            // No data below the stack pointer: the runtime writes an upcall record there
            // (`libtessera/src/paging.rs`). `x86_64-unknown-none` already disables the red
            // zone, its precompiled `core` included; this keeps it so for the apps' own code.
            "-C",
            "no-redzone=yes",
        ]);
    }
    flags.join("\x1f")
}

/// How the apps are compiled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Build {
    /// The release profile: what tests and benches run.
    #[default]
    Release,
    /// The workspace's `debug-apps` profile (`cargo xtask run --debug-apps`): release without
    /// optimisation, so that gdb reads every local.
    Debug,
}

impl Build {
    /// The cargo profile, which also names the output directory.
    pub fn profile(self) -> &'static str {
        match self {
            Build::Release => "release",
            Build::Debug => "debug-apps",
        }
    }
}

/// Builds every app for `arch` as a static PIE with `build`'s profile, in `<target>/userland`
/// so that its flags do not invalidate the kernel's build; returns app name to ELF path.
pub fn build_apps(arch: Arch, build: Build) -> Result<BTreeMap<String, PathBuf>> {
    let names = app_names();
    ensure!(!names.is_empty(), "no apps found under userland/apps/");
    let target = arch.target();
    let target_dir = util::target_dir().join("userland");
    let mut cmd = util::cargo();
    cmd.args(["build", "--quiet", "--profile", build.profile(), "--target", target]);
    cmd.arg("--target-dir").arg(&target_dir);
    for name in &names {
        cmd.args(["-p", &package_spec(name)]);
    }
    cmd.env("CARGO_ENCODED_RUSTFLAGS", app_rustflags(arch));
    util::run(&mut cmd, &format!("building the apps for {}", arch.name()))?;
    let out = target_dir.join(target).join(build.profile());
    let mut apps = BTreeMap::new();
    for name in names {
        let elf = out.join(&name);
        ensure!(
            elf.is_file(),
            "app `{name}` built no {}: its package and binary must be named like its directory",
            elf.display()
        );
        apps.insert(name, elf);
    }
    Ok(apps)
}

/// Packs the boot image for `arch`: the compiled manifest and, for each `(domain, app)`
/// instance `i`, the app (built for `arch`) relocated to `abi::IMAGE_BASE + i *
/// abi::IMAGE_SLOT`. The result is checked with the same parser the kernel uses.
pub fn pack(
    arch: Arch,
    manifest_bytes: Vec<u8>,
    instances: &[(String, String)],
    apps: &BTreeMap<String, PathBuf>,
) -> Result<Vec<u8>> {
    let slot = abi::IMAGE_SLOT as u64;
    let slots = (abi::STRETCH_BASE - abi::IMAGE_BASE) / abi::IMAGE_SLOT;
    ensure!(
        instances.len() <= slots,
        "{} domains do not fit: the address space has image slots for {slots}",
        instances.len()
    );
    let mut elves: BTreeMap<&str, Vec<u8>> = BTreeMap::new();
    let mut builder = BootImageBuilder::new(manifest_bytes);
    for (i, (domain, app)) in instances.iter().enumerate() {
        let Some(path) = apps.get(app) else {
            let known: Vec<&str> = apps.keys().map(String::as_str).collect();
            bail!("domain `{domain}` runs app `{app}`, which does not exist (apps: {known:?})");
        };
        if !elves.contains_key(app.as_str()) {
            let bytes = std::fs::read(path)
                .with_context(|| format!("reading app `{app}` from {}", path.display()))?;
            elves.insert(app, bytes);
        }
        let base = abi::IMAGE_BASE as u64 + i as u64 * slot;
        let image = relocate(arch, &elves[app.as_str()], base)
            .with_context(|| format!("relocating app `{app}` for domain `{domain}`"))?;
        ensure!(
            image.end() <= base + slot,
            "app `{app}` for domain `{domain}` needs {:#x} bytes of address space, more than \
             its image slot of {slot:#x}",
            image.end() - base
        );
        builder = builder.add_image(domain.as_str(), app.as_str(), image.entry, image.segments);
    }
    let bytes = builder.finish();
    BootImage::parse(&bytes)
        .map_err(|e| anyhow::anyhow!("the packed boot image is invalid: {e}"))?;
    Ok(bytes)
}

/// Checks that app `name` (the ELF `bytes`, built for `arch`) loads as every app must: relocated
/// at two image slots it has the same layout in both (text R+X, rodata R, data R+W), its entry
/// at the same offset, and every 8-byte word that differs between the two holds its slot's base
/// plus the same offset into the image (at least one does). Returns its segment table.
pub fn check_app(arch: Arch, name: &str, bytes: &[u8]) -> Result<String> {
    let base_a = abi::IMAGE_BASE as u64;
    let base_b = base_a + 7 * abi::IMAGE_SLOT as u64;
    let a = relocate(arch, bytes, base_a).with_context(|| format!("relocating app `{name}`"))?;
    let b = relocate(arch, bytes, base_b).with_context(|| format!("relocating app `{name}`"))?;
    let mut table = format!("{name}: entry {:#x}\n", a.entry);
    for (v, m, r, d) in &a.segments {
        table.push_str(&format!("  {v:#014x} {m:#8x} rights {r} file {:#x}\n", d.len()));
    }
    ensure!(a.entry - base_a == b.entry - base_b, "{name}: the entry moved within the image");
    let rights: Vec<u8> = a.segments.iter().map(|s| s.2).collect();
    ensure!(
        rights == [5, 1, 3],
        "{name}: segments with rights {rights:?}, want text, rodata, data"
    );
    ensure!(a.segments.len() == b.segments.len(), "{name}: the segments differ");
    let mut words = 0;
    for (sa, sb) in a.segments.iter().zip(&b.segments) {
        ensure!(
            (sa.0 - base_a, sa.1, sa.3.len()) == (sb.0 - base_b, sb.1, sb.3.len()),
            "{name}: the segment at {:#x} differs between the two slots",
            sa.0 - base_a
        );
        for (k, (wa, wb)) in sa.3.chunks(8).zip(sb.3.chunks(8)).enumerate() {
            if wa == wb {
                continue;
            }
            let word = |w: &[u8]| {
                let mut bytes = [0u8; 8];
                bytes[..w.len()].copy_from_slice(w);
                u64::from_le_bytes(bytes)
            };
            let (x, y) = (word(wa).wrapping_sub(base_a), word(wb).wrapping_sub(base_b));
            let at = sa.0 - base_a + 8 * k as u64;
            ensure!(x == y, "{name}: the word at {at:#x} differs by more than the base");
            ensure!(x < a.end() - base_a, "{name}: the word at {at:#x} points outside the image");
            // x86_64's `core` is position-independent, so its apps are linked without
            // `-znotext` and the linker keeps relocations out of read-only segments.
            ensure!(
                arch != Arch::X86_64 || sa.2 & abi::Rights::WRITE.0 != 0,
                "{name}: the word at {at:#x} is relocated in a read-only segment"
            );
            words += 1;
        }
    }
    ensure!(words > 0, "{name}: no relocations applied");
    table.push_str(&format!("  {words} relocated words\n"));
    check_activation_entry(name, symbol_address(bytes, ACTIVATION_ENTRY)?)?;
    Ok(table)
}

/// The runtime's activation handler (`userland/libtessera/src/arch`), the entry it gives
/// `activation_set`.
const ACTIVATION_ENTRY: &str = "__tessera_activation";

/// The address (as linked) of the symbol `name` in the symbol table of the ELF `bytes`; `None`
/// if there is no such symbol (or no symbol table).
fn symbol_address(bytes: &[u8], name: &str) -> Result<Option<u64>> {
    use object::{Object, ObjectSymbol};
    let file = object::File::parse(bytes).map_err(|e| anyhow::anyhow!("not an ELF file: {e}"))?;
    Ok(file.symbols().find(|s| s.name() == Ok(name)).map(|s| s.address()))
}

/// Checks that app `name`'s activation handler, linked at `at` (`None`: the app has none), is
/// at an address `activation_set` accepts: an even one (`docs/syscalls.md`). Image slots are
/// page-aligned, so relocating keeps the parity. On x86_64 code may start at any byte: an
/// assembly entry whose section is not aligned lands wherever the code before it ends.
fn check_activation_entry(name: &str, at: Option<u64>) -> Result<()> {
    if let Some(at) = at {
        ensure!(
            at.is_multiple_of(2),
            "{name}: the activation handler `{ACTIVATION_ENTRY}` is at the odd address {at:#x}, \
             which `activation_set` refuses: align its section"
        );
    }
    Ok(())
}

/// What the loader accepts of one architecture's ELF files.
struct Machine {
    /// `e_machine`.
    e_machine: u16,
    /// The architecture's name in messages.
    name: &'static str,
    /// The relocation that does nothing, skipped.
    none: u32,
    /// The only relocation applied: `*(base + offset) = base + addend`.
    relative: u32,
    /// Names relocation types, for messages.
    reloc_name: fn(u32) -> &'static str,
}

impl Machine {
    fn of(arch: Arch) -> Machine {
        match arch {
            Arch::Riscv64 => Machine {
                e_machine: elf::EM_RISCV,
                name: "RISC-V",
                none: elf::R_RISCV_NONE,
                relative: elf::R_RISCV_RELATIVE,
                reloc_name: riscv_reloc_name,
            },
            Arch::X86_64 => Machine {
                e_machine: elf::EM_X86_64,
                name: "x86_64",
                none: elf::R_X86_64_NONE,
                relative: elf::R_X86_64_RELATIVE,
                reloc_name: x86_64_reloc_name,
            },
        }
    }
}

/// Name of a RISC-V relocation type, for error messages.
fn riscv_reloc_name(r_type: u32) -> &'static str {
    match r_type {
        elf::R_RISCV_NONE => "R_RISCV_NONE",
        elf::R_RISCV_32 => "R_RISCV_32",
        elf::R_RISCV_64 => "R_RISCV_64",
        elf::R_RISCV_RELATIVE => "R_RISCV_RELATIVE",
        elf::R_RISCV_COPY => "R_RISCV_COPY",
        elf::R_RISCV_JUMP_SLOT => "R_RISCV_JUMP_SLOT",
        elf::R_RISCV_TLS_DTPMOD64 | elf::R_RISCV_TLS_DTPREL64 | elf::R_RISCV_TLS_TPREL64 => {
            "a TLS relocation"
        }
        elf::R_RISCV_IRELATIVE => "R_RISCV_IRELATIVE",
        _ => "an unsupported relocation",
    }
}

/// Name of an x86_64 relocation type, for error messages.
fn x86_64_reloc_name(r_type: u32) -> &'static str {
    match r_type {
        elf::R_X86_64_NONE => "R_X86_64_NONE",
        elf::R_X86_64_64 => "R_X86_64_64",
        elf::R_X86_64_PC32 => "R_X86_64_PC32",
        elf::R_X86_64_GOT32 => "R_X86_64_GOT32",
        elf::R_X86_64_PLT32 => "R_X86_64_PLT32",
        elf::R_X86_64_COPY => "R_X86_64_COPY",
        elf::R_X86_64_GLOB_DAT => "R_X86_64_GLOB_DAT",
        elf::R_X86_64_JUMP_SLOT => "R_X86_64_JUMP_SLOT",
        elf::R_X86_64_RELATIVE => "R_X86_64_RELATIVE",
        elf::R_X86_64_GOTPCREL => "R_X86_64_GOTPCREL",
        elf::R_X86_64_32 => "R_X86_64_32",
        elf::R_X86_64_32S => "R_X86_64_32S",
        elf::R_X86_64_PC64 => "R_X86_64_PC64",
        elf::R_X86_64_DTPMOD64
        | elf::R_X86_64_DTPOFF64
        | elf::R_X86_64_TPOFF64
        | elf::R_X86_64_TPOFF32 => "a TLS relocation",
        elf::R_X86_64_IRELATIVE => "R_X86_64_IRELATIVE",
        elf::R_X86_64_RELATIVE64 => "R_X86_64_RELATIVE64",
        _ => "an unsupported relocation",
    }
}

/// A `PT_LOAD` segment as linked.
struct Load {
    vaddr: u64,
    mem_size: u64,
    rights: u8,
    data: Vec<u8>,
}

/// `abi::Rights` bits for ELF segment flags.
fn rights(p_flags: u32) -> u8 {
    let mut r = 0;
    if p_flags & elf::PF_R != 0 {
        r |= abi::Rights::READ.0;
    }
    if p_flags & elf::PF_W != 0 {
        r |= abi::Rights::WRITE.0;
    }
    if p_flags & elf::PF_X != 0 {
        r |= abi::Rights::EXECUTE.0;
    }
    r
}

/// Relocates a static-PIE ELF of `arch` (linked at 0) to `base`: applies its relative
/// relocations (`R_RISCV_RELATIVE`, `R_X86_64_RELATIVE`), refuses any other, and returns its
/// page-aligned segments at their final addresses with their rights.
pub fn relocate(arch: Arch, elf_bytes: &[u8], base: u64) -> Result<Relocated> {
    let machine = Machine::of(arch);
    ensure!(base.is_multiple_of(PAGE), "base address {base:#x} is not page-aligned");
    let header = elf::FileHeader64::<LE>::parse(elf_bytes)
        .map_err(|e| anyhow::anyhow!("not a 64-bit ELF file: {e}"))?;
    let endian = header.endian().map_err(|_| anyhow::anyhow!("not a little-endian ELF file"))?;
    ensure!(
        header.e_machine(endian) == machine.e_machine,
        "not an ELF file for {} (machine {}, want {}): built for another architecture?",
        machine.name,
        header.e_machine(endian),
        machine.e_machine
    );
    ensure!(
        header.e_type(endian) == elf::ET_DYN,
        "not position-independent (ELF type {}, want ET_DYN): build it with `cargo xtask`",
        header.e_type(endian)
    );
    let phdrs = header
        .program_headers(endian, elf_bytes)
        .map_err(|e| anyhow::anyhow!("bad program headers: {e}"))?;

    let mut loads = Vec::new();
    let mut dynamic = None;
    for ph in phdrs {
        match ph.p_type(endian) {
            elf::PT_LOAD => {
                let (vaddr, mem_size) = (ph.p_vaddr(endian), ph.p_memsz(endian));
                let data = ph
                    .data(endian, elf_bytes)
                    .map_err(|_| anyhow::anyhow!("segment at {vaddr:#x} lies outside the file"))?;
                ensure!(
                    data.len() as u64 <= mem_size,
                    "segment at {vaddr:#x} stores more bytes than it occupies"
                );
                ensure!(vaddr.checked_add(mem_size).is_some(), "segment at {vaddr:#x} overflows");
                let r = rights(ph.p_flags(endian));
                let (w, x) = (abi::Rights::WRITE.0, abi::Rights::EXECUTE.0);
                ensure!(r & (w | x) != w | x, "segment at {vaddr:#x} is writable and executable");
                ensure!(r != 0, "segment at {vaddr:#x} has no access rights");
                if mem_size > 0 {
                    loads.push(Load { vaddr, mem_size, rights: r, data: data.to_vec() });
                }
            }
            elf::PT_DYNAMIC => {
                dynamic = ph
                    .dynamic(endian, elf_bytes)
                    .map_err(|e| anyhow::anyhow!("bad dynamic segment: {e}"))?;
            }
            elf::PT_INTERP => bail!("asks for a dynamic linker (PT_INTERP); apps are static"),
            elf::PT_TLS => bail!("uses thread-local storage, which apps do not have yet"),
            _ => {}
        }
    }
    ensure!(!loads.is_empty(), "has no loadable segments");
    loads.sort_by_key(|l| l.vaddr);

    if let Some(dynamic) = dynamic {
        apply_relocations(&machine, header, endian, elf_bytes, dynamic, &mut loads, base)?;
    } else {
        // Without a dynamic table nothing can be relocated, so there must be nothing to do.
        let sections = header
            .sections(endian, elf_bytes)
            .map_err(|e| anyhow::anyhow!("bad section headers: {e}"))?;
        for s in sections.iter() {
            let (kind, flags) = (s.sh_type(endian), s.sh_flags(endian));
            if (kind == elf::SHT_RELA || kind == elf::SHT_REL)
                && flags & u64::from(elf::SHF_ALLOC) != 0
            {
                bail!("has dynamic relocations but no dynamic table (PT_DYNAMIC)");
            }
        }
    }

    let segments = page_align(loads, base)?;
    let entry = base
        .checked_add(header.e_entry(endian))
        .context("entry point overflows the address space")?;
    let exec = abi::Rights::EXECUTE.0;
    ensure!(
        segments.iter().any(|(v, size, r, _)| r & exec != 0 && (*v..v + size).contains(&entry)),
        "entry point {:#x} is not in an executable segment",
        header.e_entry(endian)
    );
    Ok(Relocated { entry, segments })
}

/// Applies the dynamic relocations of `dynamic` to the segment data of `loads`.
fn apply_relocations(
    machine: &Machine,
    header: &elf::FileHeader64<LE>,
    endian: LE,
    elf_bytes: &[u8],
    dynamic: &[elf::Dyn64<LE>],
    loads: &mut [Load],
    base: u64,
) -> Result<()> {
    let (mut rela, mut rela_size, mut rela_ent) = (None, 0, 24);
    for d in dynamic {
        let (tag, val) = (d.d_tag(endian), d.d_val(endian));
        match tag {
            t if t == u64::from(elf::DT_NULL) => break,
            t if t == u64::from(elf::DT_RELA) => rela = Some(val),
            t if t == u64::from(elf::DT_RELASZ) => rela_size = val,
            t if t == u64::from(elf::DT_RELAENT) => rela_ent = val,
            t if t == u64::from(elf::DT_NEEDED) => bail!("needs a shared library (DT_NEEDED)"),
            t if (t == u64::from(elf::DT_RELSZ) || t == u64::from(elf::DT_PLTRELSZ))
                && val != 0 =>
            {
                bail!(
                    "has REL or PLT relocations; apps may only have RELA {}",
                    (machine.reloc_name)(machine.relative)
                )
            }
            t if t == DT_RELR || (t == DT_RELRSZ && val != 0) => {
                bail!("has packed relative relocations (DT_RELR), which are not supported")
            }
            _ => {}
        }
    }
    let Some(rela) = rela else { return Ok(()) };
    ensure!(rela_ent == 24, "unexpected relocation entry size {rela_ent}");
    ensure!(
        rela_size.is_multiple_of(24),
        "relocation table size {rela_size} is not a multiple of 24"
    );
    // The table is addressed by virtual address; find it in a segment's file bytes.
    let table = loads
        .iter()
        .find_map(|l| {
            let start = rela.checked_sub(l.vaddr)?;
            let end = start.checked_add(rela_size)?;
            l.data.get(usize::try_from(start).ok()?..usize::try_from(end).ok()?)
        })
        .with_context(|| format!("relocation table at {rela:#x} is not inside a segment"))?
        .to_vec();
    let relas: &[elf::Rela64<LE>] = object::pod::slice_from_all_bytes(&table)
        .map_err(|_| anyhow::anyhow!("relocation table at {rela:#x} is misaligned"))?;
    for (n, r) in relas.iter().enumerate() {
        let offset = r.r_offset(endian);
        let r_type = r.r_type(endian, false);
        let sym = r.r_sym(endian, false);
        if sym != 0 {
            let name = symbol_name(header, endian, elf_bytes, sym);
            bail!(
                "relocation {n} at {offset:#x} refers to the dynamic symbol `{name}`; apps must \
                 not reference symbols at run time (is something undefined or exported?)"
            );
        }
        if r_type == machine.none {
            continue;
        }
        ensure!(
            r_type == machine.relative,
            "relocation {n} at {offset:#x} has type {r_type} ({}); only {} is supported in apps",
            (machine.reloc_name)(r_type),
            (machine.reloc_name)(machine.relative)
        );
        let value = base
            .checked_add_signed(r.r_addend(endian))
            .with_context(|| format!("relocation {n} at {offset:#x} overflows"))?;
        let word = loads
            .iter_mut()
            .find_map(|l| {
                let start = usize::try_from(offset.checked_sub(l.vaddr)?).ok()?;
                l.data.get_mut(start..start.checked_add(8)?)
            })
            .with_context(|| {
                format!("relocation {n} at {offset:#x} is not inside a segment's file bytes")
            })?;
        word.copy_from_slice(&value.to_le_bytes());
    }
    Ok(())
}

/// The name of dynamic symbol `index`, or `#index` if it cannot be found.
fn symbol_name(header: &elf::FileHeader64<LE>, endian: LE, elf_bytes: &[u8], index: u32) -> String {
    let name = || -> Option<String> {
        let sections = header.sections(endian, elf_bytes).ok()?;
        let symbols = sections.symbols(endian, elf_bytes, elf::SHT_DYNSYM).ok()?;
        let sym = symbols.symbol(object::SymbolIndex(index as usize)).ok()?;
        let bytes = symbols.symbol_name(endian, sym).ok()?;
        Some(String::from_utf8_lossy(bytes).into_owned())
    };
    name().unwrap_or_else(|| format!("#{index}"))
}

/// Rounds each segment out to whole pages (data padded at the front), merges neighbours with
/// the same rights that share a page, refuses pages shared by different rights, and moves
/// everything to `base`.
fn page_align(loads: Vec<Load>, base: u64) -> Result<Vec<Segment>> {
    let mut out: Vec<(u64, u64, u8, Vec<u8>)> = Vec::new();
    let mut prev_end = 0; // end of the previous segment's bytes (before rounding)
    for l in loads {
        let start = l.vaddr & !(PAGE - 1);
        let end = (l.vaddr + l.mem_size)
            .checked_next_multiple_of(PAGE)
            .with_context(|| format!("segment at {:#x} overflows the address space", l.vaddr))?;
        match out.last_mut() {
            Some((p_start, p_size, p_rights, p_data)) if start < *p_start + *p_size => {
                ensure!(
                    *p_rights == l.rights,
                    "segments with different rights share the page at {start:#x}; the linker \
                     script must page-align each segment"
                );
                ensure!(l.vaddr >= prev_end, "segments overlap at {:#x}", l.vaddr);
                p_data.resize((l.vaddr - *p_start) as usize, 0);
                p_data.extend_from_slice(&l.data);
                *p_size = (*p_size).max(end - *p_start);
            }
            _ => {
                let mut data = vec![0; (l.vaddr - start) as usize];
                data.extend_from_slice(&l.data);
                out.push((start, end - start, l.rights, data));
            }
        }
        prev_end = l.vaddr + l.mem_size;
    }
    out.into_iter()
        .map(|(vaddr, size, rights, data)| {
            let at = base.checked_add(vaddr).filter(|a| a.checked_add(size).is_some());
            let at = at.with_context(|| format!("segment at {vaddr:#x} overflows at {base:#x}"))?;
            Ok((at, size, rights, data))
        })
        .collect()
}

#[cfg(test)]
mod tests;
