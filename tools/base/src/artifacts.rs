//! Building the bare-metal binaries.

use std::path::PathBuf;

use anyhow::Result;

use crate::{Arch, util};

/// What a boot needs.
#[derive(Clone, Debug)]
pub struct Artifacts {
    /// The architecture they were built for.
    pub arch: Arch,
    /// The kernel ELF.
    pub kernel: PathBuf,
    /// The RISC-V firmware ELF (RISC-V only).
    pub firmware: Option<PathBuf>,
}

/// Builds the kernel (and on RISC-V the firmware) in release mode with defmt logging at `info`.
pub fn build(arch: Arch) -> Result<Artifacts> {
    let mut cmd = util::cargo();
    cmd.args(["build", "--quiet", "--release", "--target", arch.target(), "-p", "kernel"]);
    if arch == Arch::Riscv64 {
        cmd.args(["-p", "firmware"]);
    }
    cmd.env("DEFMT_LOG", "info");
    util::run(&mut cmd, &format!("building the {} kernel", arch.name()))?;
    let dir = util::target_dir().join(arch.target()).join("release");
    Ok(Artifacts {
        arch,
        kernel: dir.join("kernel"),
        firmware: (arch == Arch::Riscv64).then(|| dir.join("firmware")),
    })
}
