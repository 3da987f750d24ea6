//! Tessera's bootable systems, made on the host: a QoS manifest read, checked and placed for the
//! machine it boots on ([`system`]), its apps built and relocated into their image slots and
//! packed with the compiled manifest into the boot image ([`apps`]), its disk images made and
//! read back ([`disks`]), and the generated manifests with many domains ([`many_domains`]).
//!
//! Invariants: nothing here starts QEMU (a boot attaches a [`system::System`], `qemu_run` builds
//! on this crate, never the other way round); every file it writes is under `target/`, and a
//! manifest that cannot boot is refused here, on the host, with the file, line and key.

pub mod apps;
pub mod disks;
pub mod many_domains;
pub mod system;
