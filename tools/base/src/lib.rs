//! The vocabulary every Tessera host tool shares: the guest architectures ([`Arch`]) and RISC-V
//! firmware ([`Bios`]), the workspace's paths and command helpers ([`util`]), the bare-metal
//! build of the kernel and firmware ([`artifacts`]) and the installation of what a fresh machine
//! lacks ([`setup`]).
//!
//! Invariants: this crate is the bottom of the host tools; it depends on no other tool crate
//! (image building, QEMU, suites, benches and lints all build on it), and it only names paths
//! relative to the workspace root ([`util::root`]), never the current directory.

pub mod artifacts;
pub mod setup;
pub mod util;

use clap::ValueEnum;

/// A guest architecture.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Arch {
    /// RISC-V 64 on QEMU `virt`.
    Riscv64,
    /// x86_64 on QEMU `q35` (PVH boot).
    #[value(name = "x86_64", alias = "x86-64")]
    X86_64,
}

impl Arch {
    /// The Rust target triple.
    pub fn target(self) -> &'static str {
        match self {
            Arch::Riscv64 => "riscv64gc-unknown-none-elf",
            Arch::X86_64 => "x86_64-unknown-none",
        }
    }
    /// The name used in test names and reports.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Riscv64 => "riscv64",
            Arch::X86_64 => "x86_64",
        }
    }
    /// The machine it boots on, for placing manifests ([`manifest::Machine`]).
    pub fn machine(self) -> manifest::Machine {
        match self {
            Arch::Riscv64 => manifest::Machine::RiscvVirt,
            Arch::X86_64 => manifest::Machine::Q35,
        }
    }
}

/// The RISC-V M-mode firmware to boot with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Bios {
    /// Tessera's own firmware (`firmware/`, on the rustsbi crate).
    Rustsbi,
    /// QEMU's bundled OpenSBI.
    Opensbi,
}
