//! Installs what a fresh machine lacks: the bare-metal Rust targets, QEMU, and for the tests the
//! device-tree compiler.
//!
//! Targets: `rustup target add`; when that cannot download, the offline archives installer
//! at `../shared/toolchain/install-targets` (if present). QEMU, `dtc` (package
//! `device-tree-compiler`, which the tests use to change QEMU's device tree, see
//! `qemu_run::dtb`), `vde_switch` and `wirefilter` (packages `vde-switch` and
//! `vde-wirefilter`, the network of `cargo xtask cluster`) and gdb-multiarch: Debian's packages
//! via apt-get when running as root; otherwise the exact command is printed.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};

use crate::{Arch, util};

/// What the caller needs.
pub struct Needs {
    /// gdb-multiarch for `--gdb`.
    pub gdb: bool,
    /// QEMU (not needed for a plain build).
    pub qemu: bool,
    /// `dtc`, the device-tree compiler (the QEMU tests).
    pub dtc: bool,
    /// `vde_switch` and `wirefilter`, the network of a cluster (`cargo xtask cluster`).
    pub vde: bool,
}

/// The bare-metal Rust target of `arch`.
fn target_of(arch: Arch) -> &'static str {
    match arch {
        Arch::Riscv64 => "riscv64gc-unknown-none-elf",
        Arch::X86_64 => "x86_64-unknown-none",
    }
}

/// The QEMU program of `arch` and the Debian package that has it.
fn qemu_of(arch: Arch) -> (&'static str, &'static str) {
    match arch {
        Arch::Riscv64 => ("qemu-system-riscv64", "qemu-system-misc"),
        Arch::X86_64 => ("qemu-system-x86_64", "qemu-system-x86"),
    }
}

/// The programs of a cluster's network and the Debian packages that have them (`vde2` alone
/// has neither).
const VDE: [(&str, &str); 2] = [("vde_switch", "vde-switch"), ("wirefilter", "vde-wirefilter")];

/// Both architectures: what every command but `setup --arch` makes sure of.
const ARCHES: [Arch; 2] = [Arch::Riscv64, Arch::X86_64];

fn spinner(msg: &str) -> ProgressBar {
    let pb = ProgressBar::new_spinner();
    pb.set_style(ProgressStyle::with_template("{spinner} {msg} [{elapsed}]").unwrap());
    pb.set_message(msg.to_string());
    pb.enable_steady_tick(Duration::from_millis(120));
    pb
}

fn sysroot() -> Result<String> {
    Ok(util::output(Command::new("rustc").current_dir(util::root()).args(["--print", "sysroot"]))?
        .trim()
        .to_string())
}

fn missing_targets(arches: &[Arch]) -> Result<Vec<&'static str>> {
    let sysroot = sysroot()?;
    Ok(arches
        .iter()
        .map(|a| target_of(*a))
        .filter(|t| !Path::new(&sysroot).join("lib/rustlib").join(t).join("lib").is_dir())
        .collect())
}

/// Makes sure everything in `needs` is installed, for both architectures.
pub fn ensure(needs: Needs) -> Result<()> {
    ensure_for(&ARCHES, needs)
}

/// Makes sure everything in `needs` is installed for `arches` (their Rust targets and QEMU).
pub fn ensure_for(arches: &[Arch], needs: Needs) -> Result<()> {
    ensure_targets(arches)?;
    let mut packages = Vec::new();
    if needs.qemu {
        for (program, package) in arches.iter().map(|a| qemu_of(*a)) {
            if !util::have(program) {
                packages.push(package);
            }
        }
    }
    if needs.gdb && !util::have("gdb-multiarch") {
        packages.push("gdb-multiarch");
    }
    if needs.dtc && !util::have("dtc") {
        packages.push("device-tree-compiler");
    }
    if needs.vde {
        for (program, package) in VDE {
            if !util::have(program) {
                packages.push(package);
            }
        }
    }
    if !packages.is_empty() {
        install_packages(&packages)?;
    }
    Ok(())
}

fn ensure_targets(arches: &[Arch]) -> Result<()> {
    let missing = missing_targets(arches)?;
    if missing.is_empty() {
        return Ok(());
    }
    let pb = spinner(&format!("adding Rust targets {}", missing.join(" ")));
    let out = Command::new("rustup")
        .current_dir(util::root())
        .args(["target", "add"])
        .args(&missing)
        .output();
    pb.finish_and_clear();
    if !matches!(&out, Ok(o) if o.status.success()) {
        let offline = util::root().join("../shared/toolchain/install-targets");
        if offline.is_file() {
            eprintln!(
                "rustup target add failed; installing the targets from {}",
                offline.display()
            );
            util::run(
                Command::new("bash").arg(&offline).current_dir(util::root()),
                "install-targets",
            )?;
        } else {
            let msg =
                out.map(|o| String::from_utf8_lossy(&o.stderr).into_owned()).unwrap_or_default();
            bail!("could not add the Rust targets {missing:?}: {}", msg.trim());
        }
    }
    let still = missing_targets(arches)?;
    if !still.is_empty() {
        bail!("Rust targets still missing after installation: {still:?}");
    }
    eprintln!("installed Rust targets: {}", missing.join(" "));
    Ok(())
}

fn is_root() -> bool {
    util::output(Command::new("id").arg("-u")).map(|s| s.trim() == "0").unwrap_or(false)
}

fn install_packages(packages: &[&str]) -> Result<()> {
    let command = format!(
        "apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y {}",
        packages.join(" ")
    );
    if !is_root() || !util::have("apt-get") {
        bail!("missing packages {packages:?}; install them with:\n  sudo sh -c '{command}'");
    }
    let pb = spinner(&format!("installing {} (apt-get)", packages.join(" ")));
    let out = Command::new("sh")
        .args(["-c", &command])
        .stdin(std::process::Stdio::null())
        .output()
        .context("running apt-get")?;
    pb.finish_and_clear();
    if !out.status.success() {
        bail!(
            "`{command}` failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .rev()
                .take(15)
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    eprintln!("installed {}", packages.join(" "));
    Ok(())
}
