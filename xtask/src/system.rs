//! A bootable system: a manifest checked on the host, its apps built and relocated, and the boot
//! image the kernel receives with `-initrd`.
//!
//! Arguments in a manifest may name another domain's image: `@image:NAME` becomes the base
//! address of domain NAME's image slot (tests use it to aim a misbehaving domain at another).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use manifest::Manifest;

use crate::artifacts::Artifacts;
use crate::log::Kernel;
use crate::qemu::{self, Boot, Outcome};
use crate::{Arch, apps, util};

/// What a boot with a manifest needs.
pub struct System {
    /// The checked manifest, placeholders resolved.
    pub manifest: Manifest,
    /// The packed boot image.
    pub image: PathBuf,
    /// `(base address, app ELF)` per domain instance, for symbolizing their addresses.
    pub instances: Vec<(u64, PathBuf)>,
}

impl System {
    /// Guest memory the manifest asks for, in MiB.
    pub fn memory_mib(&self) -> u32 {
        (self.manifest.memory >> 20) as u32
    }
}

/// Reads and checks `path` (errors name the file, line, key and reason).
pub fn load_manifest(path: &Path) -> Result<Manifest> {
    let names = apps::app_names();
    let known: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut m = manifest::parse_file(path, &known).map_err(|e| anyhow::anyhow!("{e}"))?;
    resolve_placeholders(&mut m).with_context(|| format!("{}", path.display()))?;
    m.check().map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    Ok(m)
}

fn image_base(index: usize) -> u64 {
    (abi::IMAGE_BASE + index * abi::IMAGE_SLOT) as u64
}

/// Replaces `@image:NAME` arguments with the base address of domain NAME's image.
fn resolve_placeholders(m: &mut Manifest) -> Result<()> {
    let bases: BTreeMap<String, u64> =
        m.domains.iter().enumerate().map(|(i, d)| (d.name.clone(), image_base(i))).collect();
    for d in &mut m.domains {
        for arg in &mut d.args {
            if let Some(name) = arg.strip_prefix("@image:") {
                let Some(base) = bases.get(name) else {
                    bail!("domain {}: argument `{arg}` names no domain", d.name);
                };
                *arg = format!("{base:#x}");
            }
        }
    }
    Ok(())
}

/// How to spoil the compiled manifest on purpose (to test the kernel's own validation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spoil {
    /// Leave it intact.
    Nothing,
    /// Flip one bit of the payload (the boot image around it stays valid).
    ManifestByte,
}

/// Checks the manifest, builds the apps and packs the boot image under `target/boot/`.
pub fn prepare(path: &Path, spoil: Spoil) -> Result<System> {
    prepare_with(path, spoil, apps::Build::Release)
}

/// [`prepare`] with the apps built as `build` says.
pub fn prepare_with(path: &Path, spoil: Spoil, build: apps::Build) -> Result<System> {
    let manifest = load_manifest(path)?;
    let built = apps::build_apps(build)?;
    let mut bytes = manifest.compile();
    if spoil == Spoil::ManifestByte {
        let last = bytes.len() - 1;
        bytes[last] ^= 0x01;
    }
    let instances: Vec<(String, String)> =
        manifest.domains.iter().map(|d| (d.name.clone(), d.app.clone())).collect();
    let image = apps::pack(bytes, &instances, &built)?;
    let dir = util::target_dir().join("boot");
    std::fs::create_dir_all(&dir)?;
    let stem = path.file_stem().map_or("manifest".into(), |s| s.to_string_lossy().into_owned());
    let suffix = if spoil == Spoil::Nothing { "" } else { "-spoiled" };
    let out = dir.join(format!("{stem}{suffix}.img"));
    std::fs::write(&out, &image).with_context(|| format!("writing {}", out.display()))?;
    let instances = manifest
        .domains
        .iter()
        .enumerate()
        .map(|(i, d)| (image_base(i), built[&d.app].clone()))
        .collect();
    Ok(System { manifest, image: out, instances })
}

/// A manifest ready to boot on RISC-V under `-icount shift=0,sleep=off`, as many times as
/// wanted: the boot and a kernel that symbolizes its apps' addresses.
pub struct IcountBoot {
    /// The QEMU boot (image, memory, command line).
    pub boot: Boot,
    kernel: Kernel,
}

impl IcountBoot {
    /// Prepares `manifest` (relative to the workspace) for the kernel of `a`, with `append` on
    /// the kernel command line.
    pub fn new(a: &Artifacts, manifest: &str, append: &str) -> Result<Self> {
        let s = prepare(&util::root().join(manifest), Spoil::Nothing)?;
        let mut kernel = Kernel::load(&a.kernel)?;
        kernel.add_instances(&s.instances)?;
        let mut boot = Boot::new(Arch::Riscv64);
        boot.memory = s.memory_mib();
        boot.initrd = Some(s.image.clone());
        boot.icount = true;
        boot.append = append.to_string();
        Ok(IcountBoot { boot, kernel })
    }

    /// Boots it once.
    pub fn run(&self, a: &Artifacts) -> Result<Outcome> {
        qemu::boot(&self.boot, a, &self.kernel, None, &mut |_| {})
    }
}
