//! The QEMU suite of driver domains (both architectures): devices granted by the manifest,
//! their registers mapped into the driver domain alone, DMA memory from its guarantee, and
//! their interrupts delivered as events; manifests in `tests/manifests/drivers/`.
//!
//! - `virtio_blk_self_test`: the `virtio-blk` driver domain, granted a virtio disk (MMIO on
//!   RISC-V `virt`, PCI with MSI-X on q35), brings it up and runs 200 transfers of 512 B to
//!   64 KiB at random sectors, each written, read back and checked, one at a time; each
//!   completion is awaited on the interrupt's endpoint (one interrupt per request, never a
//!   poll), and the disk image the host reads afterwards is no longer blank.

use std::time::Duration;

use super::domains::frames_returned;
use super::{QemuTest, expect_ending, expect_line};
use crate::Arch;
use crate::qemu::{Boot, Ending, Outcome};
use crate::system::Spoil;

/// The self-test's transfers, as its manifest gives them.
const TRANSFERS: u64 = 200;

/// The self-test's manifest.
const SELF_TEST: &str = "tests/manifests/drivers/virtio-blk-self-test.toml";

fn self_test(arch: Arch, out: &Outcome) -> Result<(), String> {
    expect_ending(out, Ending::Kernel(0))?;
    expect_line(out, "domain blk: device 0 granted: 1 register window(s), interrupt")?;
    let line = out.line("virtio-blk: self-test: ").ok_or("no self-test report")?;
    let msg = &line.message;
    let n: Vec<u64> =
        msg.split(|c: char| !c.is_ascii_digit()).filter_map(|w| w.parse().ok()).collect();
    let [transfers, interrupts] = n[..] else {
        return Err(format!("unreadable self-test report: {msg}"));
    };
    if transfers != TRANSFERS {
        return Err(format!("{transfers} transfers checked, want {TRANSFERS}"));
    }
    // Two requests a transfer, each completion awaited on the interrupt's endpoint: one
    // interrupt each (none arriving would hang the domain; more would be spurious).
    if interrupts != 2 * TRANSFERS {
        return Err(format!("{interrupts} interrupts for {} requests", 2 * TRANSFERS));
    }
    expect_line(out, "blk: exited with status 0")?;
    // The host reads the image: the transfers left data on it.
    let path =
        crate::disks::image_path(&crate::disks::dir(arch), std::path::Path::new(SELF_TEST), "data");
    let mut written = 0;
    for chunk in 0..(16 << 20) / (64 << 10) {
        let bytes =
            crate::disks::read_sectors(&path, chunk * 128, 128).map_err(|e| format!("{e:#}"))?;
        written += usize::from(bytes.iter().any(|&b| b != 0));
    }
    if written == 0 {
        return Err(format!("{}: the disk is still blank", path.display()));
    }
    frames_returned(out)
}

/// The suite's tests on `arch`.
pub(super) fn drivers_tests(p: &str, arch: Arch) -> Vec<QemuTest> {
    let mut boot = Boot::new(arch);
    boot.icount = true;
    boot.timeout = Duration::from_secs(120);
    vec![QemuTest {
        name: format!("{p}drivers::virtio_blk_self_test"),
        boot,
        system: Some((SELF_TEST.into(), Spoil::Nothing)),
        expected: &[],
        check: Box::new(move |out| self_test(arch, out)),
    }]
}
