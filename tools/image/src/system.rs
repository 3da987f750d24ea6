//! A bootable system: a manifest checked on the host, its apps built and relocated, and the boot
//! image the kernel receives with `-initrd`.
//!
//! Arguments in a manifest may name another domain's image: `@image:NAME` becomes the base
//! address of domain NAME's image slot (tests use it to aim a misbehaving domain at another).
//!
//! A manifest is placed for the machine of the architecture it boots on
//! ([`manifest::parse_file_for`]): its disks get their device addresses, and its disk images
//! are made under `target/disks/<arch>/` (see [`crate::disks`]) for `qemu_run::qemu::Boot::attach`. A
//! bootable manifest for one architecture only says so on a line `# machine: riscv64` (or
//! `x86_64`) at its top; the others boot on both.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail, ensure};
use manifest::Manifest;

use crate::apps;
use crate::disks::{self, DiskImage};
use tool_base::{Arch, util};

/// What a boot with a manifest needs.
pub struct System {
    /// The checked manifest, placeholders resolved.
    pub manifest: Manifest,
    /// The packed boot image.
    pub image: PathBuf,
    /// `(base address, app ELF)` per domain instance, for symbolizing their addresses.
    pub instances: Vec<(u64, PathBuf)>,
    /// The disk images made for the boot, in manifest order: read them back after the run
    /// ([`disks::read_sectors`]).
    pub disks: Vec<DiskImage>,
}

impl System {
    /// Guest memory the manifest asks for, in MiB.
    pub fn memory_mib(&self) -> u32 {
        (self.manifest.memory >> 20) as u32
    }
}

/// Reads and checks `path` (errors name the file, line, key and reason) and places it for the
/// machine of `arch` ([`manifest::parse_file_for`]), including that this host has the memory
/// the manifest asks for ([`check_host_memory`]).
pub fn load_manifest(path: &Path, arch: Arch) -> Result<Manifest> {
    load_manifest_on(path, arch, host_memory())
}

/// [`load_manifest`] on a host of `host` bytes of physical memory (`None`: unknown, not
/// checked).
fn load_manifest_on(path: &Path, arch: Arch, host: Option<u64>) -> Result<Manifest> {
    let names = apps::app_names();
    let known: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut m = manifest::parse_file_for(path, &known, arch.machine())
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    if let Some(host) = host {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        check_host_memory(&path.display().to_string(), &text, m.memory, host)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    resolve_placeholders(&mut m).with_context(|| format!("{}", path.display()))?;
    m.check().map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    Ok(m)
}

/// The host's physical memory in bytes (`MemTotal` in `/proc/meminfo`), if it says.
pub fn host_memory() -> Option<u64> {
    meminfo_total(&std::fs::read_to_string("/proc/meminfo").ok()?)
}

/// `MemTotal` of a `/proc/meminfo` text, in bytes.
fn meminfo_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find_map(|l| l.strip_prefix("MemTotal:"))?;
    let kib = line.trim().strip_suffix("kB")?.trim().parse::<u64>().ok()?;
    kib.checked_mul(1024)
}

/// Fails when the manifest `text` (read from `file`) asks for more guest memory than the
/// host's `host` bytes of physical memory. QEMU maps the guest's RAM in one piece, and Linux's
/// default overcommit refuses a mapping larger than the host's memory (and swap): QEMU would
/// stop with "Cannot allocate memory". The error names the file, the line and the key
/// `system.memory`, as the manifest's own errors do.
pub fn check_host_memory(
    file: &str,
    text: &str,
    memory: u64,
    host: u64,
) -> Result<(), manifest::ManifestError> {
    if memory <= host {
        return Ok(());
    }
    let reason = format!(
        "system memory {} is more than this host's memory, {} (MemTotal in /proc/meminfo): \
         QEMU could not allocate the guest's RAM",
        manifest::Bytes(memory),
        manifest::Bytes(host / manifest::MIB * manifest::MIB)
    );
    Err(manifest::ManifestError::at_key(file, text, "system.memory", reason))
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

/// Checks the manifest, builds the apps for `arch` and packs the boot image under
/// `target/boot/` (`target/boot/x86_64/` for x86_64), and makes fresh disk images under
/// `target/disks/<arch>/` ([`disks::create`]).
pub fn prepare(path: &Path, spoil: Spoil, arch: Arch) -> Result<System> {
    prepare_with(path, spoil, apps::Build::Release, arch, false)
}

/// [`prepare`] with the apps built as `build` says, keeping existing disk images if
/// `keep_disks` (`cargo xtask run --keep-disk`).
pub fn prepare_with(
    path: &Path,
    spoil: Spoil,
    build: apps::Build,
    arch: Arch,
    keep_disks: bool,
) -> Result<System> {
    let manifest = load_manifest(path, arch)?;
    // The disks first: a kept image that is not there fails before anything is built.
    let mut disks = disks::create(&disks::dir(arch), path, &manifest, keep_disks)?;
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    disks::inject_faults(&mut disks, path, &text)?;
    let built = apps::build_apps(arch, build)?;
    let mut bytes = manifest.compile();
    if spoil == Spoil::ManifestByte {
        let last = bytes.len() - 1;
        bytes[last] ^= 0x01;
    }
    let instances: Vec<(String, String)> =
        manifest.domains.iter().map(|d| (d.name.clone(), d.app.clone())).collect();
    let image = apps::pack(arch, bytes, &instances, &built)?;
    let dir = match arch {
        Arch::Riscv64 => util::target_dir().join("boot"),
        other => util::target_dir().join("boot").join(other.name()),
    };
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
    Ok(System { manifest, image: out, instances, disks })
}

/// The architecture a manifest is for, if it is for one only: a line `# machine: riscv64` or
/// `# machine: x86_64` among the comments at its top.
pub fn manifest_arch(text: &str) -> Option<Arch> {
    let comments = text.lines().take_while(|l| l.trim().is_empty() || l.starts_with('#'));
    comments.filter_map(|l| l.strip_prefix("# machine: ")).find_map(|m| match m.trim() {
        "riscv64" => Some(Arch::Riscv64),
        "x86_64" => Some(Arch::X86_64),
        _ => None,
    })
}

/// Does the manifest at `path` boot on `arch` ([`manifest_arch`])?
pub fn boots_on(path: &Path, arch: Arch) -> Result<bool> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(manifest_arch(&text).is_none_or(|a| a == arch))
}

/// The manifests that must boot: every `*.toml` under `manifests/` (but `manifests/bad/`, which
/// the manifest checks must refuse) and under `tests/manifests/`, sorted. Some are for one
/// architecture only ([`boots_on`]).
pub fn bootable_manifests() -> Result<Vec<PathBuf>> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
            let path = entry?.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "bad") {
                    walk(&path, out)?;
                }
            } else if path.extension().is_some_and(|e| e == "toml") {
                out.push(path);
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(&util::root().join("manifests"), &mut out)?;
    walk(&util::root().join("tests").join("manifests"), &mut out)?;
    out.sort();
    Ok(out)
}

/// The userland of `arch` without booting it: builds every app for `arch`, checks that each
/// loads ([`apps::check_app`]: relocated at two image slots, only relative relocations), and
/// packs the boot image of every bootable manifest ([`bootable_manifests`]) in memory.
pub fn check_userland(arch: Arch) -> Result<()> {
    let built = apps::build_apps(arch, apps::Build::Release)?;
    for (name, path) in &built {
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        apps::check_app(arch, name, &bytes)?;
    }
    let manifests = bootable_manifests()?;
    ensure!(!manifests.is_empty(), "no manifests found");
    for path in &manifests {
        if !boots_on(path, arch)? {
            continue;
        }
        let manifest = load_manifest(path, arch)?;
        let instances: Vec<(String, String)> =
            manifest.domains.iter().map(|d| (d.name.clone(), d.app.clone())).collect();
        apps::pack(arch, manifest.compile(), &instances, &built)
            .with_context(|| format!("packing the boot image of {}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MEMINFO: &str = "MemTotal:       24684084 kB\nMemFree:         1419612 kB\n\
                           MemAvailable:   24104404 kB\nSwapTotal:             0 kB\n";

    #[test]
    fn the_host_memory_is_read_from_meminfo() {
        assert_eq!(meminfo_total(MEMINFO), Some(24684084 * 1024));
        assert_eq!(meminfo_total("MemFree: 1 kB\n"), None);
        assert_eq!(meminfo_total("MemTotal: lots\n"), None);
        // This host (Linux) says.
        assert!(host_memory().is_some_and(|m| m > 0));
    }

    #[test]
    fn a_manifest_beyond_the_host_memory_is_refused_at_its_key() {
        let text = "[[domain]]\nname = \"a\"\napp = \"hello\"\nmemory = { guaranteed = \"1M\" }\n\n\
                    [system]\nmemory = \"32G\"\n";
        let host = meminfo_total(MEMINFO).unwrap();
        let e = check_host_memory("big.toml", text, 32 << 30, host).unwrap_err();
        assert_eq!((e.line, e.key.as_deref()), (Some(7), Some("system.memory")));
        assert_eq!(
            e.to_string(),
            "big.toml:7: system.memory: system memory 32G is more than this host's memory, \
             24105M (MemTotal in /proc/meminfo): QEMU could not allocate the guest's RAM"
        );
        assert!(check_host_memory("big.toml", text, 23 << 30, host).is_ok());
        assert!(check_host_memory("big.toml", text, host, host).is_ok());
    }

    #[test]
    fn loading_a_manifest_checks_the_host_memory() {
        // A manifest asking for 512M, loaded as on hosts of other sizes (this host's own size
        // does not matter).
        let dir = util::target_dir().join("host-memory-test");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("over.toml");
        let text = "[system]\nmemory = \"512M\"\n\n[[domain]]\nname = \"a\"\napp = \"hello\"\n\
                    memory = { guaranteed = \"256K\" }\n";
        std::fs::write(&path, text).unwrap();
        let load = |host| load_manifest_on(&path, Arch::Riscv64, host);
        // A host 1 MiB short is refused, at the key.
        let e = load(Some(511 * manifest::MIB)).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "{}:2: system.memory: system memory 512M is more than this host's memory, 511M \
                 (MemTotal in /proc/meminfo): QEMU could not allocate the guest's RAM",
                path.display()
            )
        );
        // A host with exactly that much, or more, or one that does not say, runs it.
        for host in [Some(512 * manifest::MIB), Some(64 << 30), None] {
            assert_eq!(load(host).unwrap().memory, 512 * manifest::MIB, "{host:?}");
        }
    }

    #[test]
    fn a_manifest_may_be_for_one_architecture() {
        assert_eq!(manifest_arch("# machine: x86_64\n[system]\n"), Some(Arch::X86_64));
        assert_eq!(
            manifest_arch("# A test.\n\n# machine: riscv64\n[system]\n"),
            Some(Arch::Riscv64)
        );
        assert_eq!(manifest_arch("# A test.\n[system]\n"), None);
        // Only the comments at the top count.
        assert_eq!(manifest_arch("[system]\n# machine: x86_64\n"), None);
        let ahci = util::root().join("tests/manifests/disks-ahci.toml");
        assert!(boots_on(&ahci, Arch::X86_64).unwrap() && !boots_on(&ahci, Arch::Riscv64).unwrap());
        // Every bootable manifest loads on each architecture it is for.
        for path in bootable_manifests().unwrap() {
            for arch in [Arch::Riscv64, Arch::X86_64] {
                if boots_on(&path, arch).unwrap() {
                    load_manifest(&path, arch).unwrap_or_else(|e| panic!("{e:#}"));
                }
            }
        }
    }
}
