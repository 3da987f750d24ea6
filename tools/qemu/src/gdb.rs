//! `cargo xtask run --gdb`: a gdb script that loads the symbols of everything the boot runs and
//! connects to QEMU's gdb stub. See `docs/debugging.md`.
//!
//! The kernel and the firmware are linked where they run. Each app is a static PIE linked at 0
//! that [`apps::relocate`](system_image::apps::relocate) moves as a whole to its instance's image slot
//! (link address `v` runs at `base + v`), so its symbols load with `add-symbol-file ELF -o
//! BASE`. Two domains running the same app load the same ELF at two offsets: a breakpoint on
//! one of its functions gets a location in each.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::qemu::Boot;
use system_image::system::System;
use tool_base::artifacts::Artifacts;
use tool_base::{Arch, Bios, util};

/// Where QEMU's `-s` listens.
pub const REMOTE: &str = "localhost:1234";

/// One domain instance: the app it runs, loaded at its image slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instance {
    /// The domain's name in the manifest.
    pub domain: String,
    /// The app's name.
    pub app: String,
    /// The base of the instance's image slot: where the app's link address 0 runs.
    pub base: u64,
    /// The app's ELF (with its debug information).
    pub elf: PathBuf,
}

/// The domain instances of `system`, in manifest order.
pub fn instances(system: &System) -> Vec<Instance> {
    system
        .manifest
        .domains
        .iter()
        .zip(&system.instances)
        .map(|(d, (base, elf))| Instance {
            domain: d.name.clone(),
            app: d.app.clone(),
            base: *base,
            elf: elf.clone(),
        })
        .collect()
}

/// The gdb script: quiet queries, the kernel's symbols (and the firmware's), each instance's
/// symbols at its slot, the toolchain's Rust pretty-printers (`printers`, as `rust-gdb` loads
/// them), a `tessera-domain` command that names the domain whose slot holds `$pc`, and the
/// connection to [`REMOTE`].
pub fn script(
    kernel: &Path,
    firmware: Option<&Path>,
    instances: &[Instance],
    printers: Option<&Path>,
) -> String {
    let mut s = String::new();
    s.push_str("# Written by `cargo xtask run --gdb`: gdb-multiarch -x THIS_FILE\n");
    s.push_str("set confirm off\n");
    let _ = writeln!(s, "file {}", kernel.display());
    if let Some(fw) = firmware {
        let _ = writeln!(s, "add-symbol-file {}", fw.display());
    }
    for i in instances {
        let _ = writeln!(s, "# domain `{}` (app `{}`), image slot {:#x}", i.domain, i.app, i.base);
        let _ = writeln!(s, "add-symbol-file {} -o {:#x}", i.elf.display(), i.base);
    }
    s.push_str("set confirm on\n");
    if let Some(p) = printers {
        let _ = writeln!(s, "source {}", p.display());
    }
    s.push_str("define tessera-domain\n");
    for i in instances {
        let end = i.base + abi::IMAGE_SLOT as u64;
        let _ = writeln!(s, "  if $pc >= {:#x} && $pc < {end:#x}", i.base);
        let _ = writeln!(s, "    echo domain {} (app {})\\n", i.domain, i.app);
        s.push_str("  end\n");
    }
    s.push_str("end\n");
    s.push_str("document tessera-domain\n");
    s.push_str("Names the domain whose image slot holds $pc (nothing in the kernel).\n");
    s.push_str("end\n");
    let _ = writeln!(s, "target remote {REMOTE}");
    s
}

/// The toolchain's `gdb_load_rust_pretty_printers.py` (Vec, String, Option... shown as values),
/// if it is installed.
fn rust_printers() -> Option<PathBuf> {
    let mut rustc = std::process::Command::new("rustc");
    rustc.current_dir(util::root()).args(["--print", "sysroot"]);
    let sysroot = util::output(&mut rustc).ok()?;
    let path = Path::new(sysroot.trim()).join("lib/rustlib/etc/gdb_load_rust_pretty_printers.py");
    path.is_file().then_some(path)
}

/// Where the script is written.
pub fn script_path() -> PathBuf {
    util::target_dir().join("gdb").join("tessera.gdb")
}

/// Writes the script for boot `b` of `a` (with the domains of `system`, if any) and tells the
/// user how to use it.
pub fn prepare(b: &Boot, a: &Artifacts, system: Option<&System>) -> Result<PathBuf> {
    let firmware = match (b.arch, b.bios) {
        (Arch::Riscv64, Bios::Rustsbi) => a.firmware.as_deref(),
        _ => None,
    };
    let instances = system.map(instances).unwrap_or_default();
    let path = script_path();
    let dir = path.parent().expect("the script lives in a directory");
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let printers = rust_printers();
    std::fs::write(&path, script(&a.kernel, firmware, &instances, printers.as_deref()))
        .with_context(|| format!("writing {}", path.display()))?;
    let shown = std::env::current_dir()
        .ok()
        .and_then(|cwd| path.strip_prefix(cwd).ok().map(Path::to_path_buf))
        .unwrap_or_else(|| path.clone());
    eprintln!("QEMU waits for a debugger on {REMOTE}. In another terminal:");
    eprintln!("  gdb-multiarch -x {}", shown.display());
    eprintln!(
        "(it loads the kernel's symbols and those of {} domain(s) at their image slots, then \
         connects; see docs/debugging.md)",
        instances.len()
    );
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instance(domain: &str, app: &str, slot: usize) -> Instance {
        Instance {
            domain: domain.into(),
            app: app.into(),
            base: (abi::IMAGE_BASE + slot * abi::IMAGE_SLOT) as u64,
            elf: format!("/t/userland/{app}").into(),
        }
    }

    fn lines(s: &str) -> Vec<&str> {
        s.lines().collect()
    }

    #[test]
    fn each_instance_loads_its_app_at_its_slot() {
        let base0 = abi::IMAGE_BASE as u64;
        let base1 = base0 + abi::IMAGE_SLOT as u64;
        let s = script(
            Path::new("/t/kernel"),
            Some(Path::new("/t/firmware")),
            &[instance("gold", "spin", 0), instance("silver", "spin", 1)],
            Some(Path::new("/rust/etc/printers.py")),
        );
        let l = lines(&s);
        let at = |line: &str| l.iter().position(|x| *x == line).unwrap_or_else(|| panic!("{s}"));
        let kernel = at("file /t/kernel");
        let firmware = at("add-symbol-file /t/firmware");
        let gold = at(&format!("add-symbol-file /t/userland/spin -o {base0:#x}"));
        let silver = at(&format!("add-symbol-file /t/userland/spin -o {base1:#x}"));
        let remote = at("target remote localhost:1234");
        // Queries off while loading, symbols before connecting, connecting last.
        assert!(at("set confirm off") < kernel);
        assert!(kernel < firmware && firmware < gold && gold < silver);
        assert!(silver < at("set confirm on") && at("set confirm on") < remote);
        assert!(silver < at("source /rust/etc/printers.py"));
        assert_eq!(remote, l.len() - 1);
        assert_eq!(l[gold - 1], format!("# domain `gold` (app `spin`), image slot {base0:#x}"));
        assert_eq!(l.iter().filter(|x| x.starts_with("add-symbol-file")).count(), 3);
    }

    #[test]
    fn tessera_domain_names_the_slot_holding_the_pc() {
        let base1 = (abi::IMAGE_BASE + abi::IMAGE_SLOT) as u64;
        let end1 = base1 + abi::IMAGE_SLOT as u64;
        let s = script(
            Path::new("/t/kernel"),
            None,
            &[instance("hello", "hello", 0), instance("pagetrace", "pagetrace", 1)],
            None,
        );
        let expected = format!(
            "  if $pc >= {base1:#x} && $pc < {end1:#x}\n    echo domain pagetrace (app \
             pagetrace)\\n\n  end\n"
        );
        assert!(s.contains(&expected), "{s}");
        assert!(s.contains("define tessera-domain\n"));
    }

    #[test]
    fn instances_pair_each_domain_with_its_slot_and_elf() {
        let manifest = system_image::system::load_manifest(
            &util::root().join("manifests/default.toml"),
            tool_base::Arch::Riscv64,
        )
        .unwrap();
        let slots: Vec<(u64, PathBuf)> = manifest
            .domains
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let base = (abi::IMAGE_BASE + i * abi::IMAGE_SLOT) as u64;
                (base, format!("/t/userland/{}", d.app).into())
            })
            .collect();
        let system =
            System { manifest, image: "/t/boot.img".into(), instances: slots, disks: vec![] };
        let found = instances(&system);
        let names: Vec<(&str, &str)> =
            found.iter().map(|i| (i.domain.as_str(), i.app.as_str())).collect();
        assert_eq!(
            names,
            [("hello", "hello"), ("gold", "spin"), ("silver", "spin"), ("bronze", "spin")]
        );
        assert_eq!(found[2], instance("silver", "spin", 2));
    }

    #[test]
    fn the_debug_apps_profile_exists() {
        // `--debug-apps` builds with `cargo --profile debug-apps`, which the workspace defines.
        let toml = std::fs::read_to_string(util::root().join("Cargo.toml")).unwrap();
        let section = toml.split("[profile.debug-apps]").nth(1).expect("no [profile.debug-apps]");
        assert!(section.contains("inherits = \"release\""), "{section}");
        assert_eq!(system_image::apps::Build::Debug.profile(), "debug-apps");
        assert_eq!(system_image::apps::Build::default().profile(), "release");
    }

    #[test]
    fn a_bare_kernel_loads_the_kernel_alone() {
        let s = script(Path::new("/t/kernel"), None, &[], None);
        assert_eq!(
            lines(&s).into_iter().filter(|l| !l.starts_with('#')).collect::<Vec<_>>(),
            [
                "set confirm off",
                "file /t/kernel",
                "set confirm on",
                "define tessera-domain",
                "end",
                "document tessera-domain",
                "Names the domain whose image slot holds $pc (nothing in the kernel).",
                "end",
                "target remote localhost:1234",
            ]
        );
    }
}
