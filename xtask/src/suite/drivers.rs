//! The QEMU suite of driver domains (both architectures): devices granted by the manifest,
//! their registers mapped into the driver domain alone, DMA memory from its guarantee, and
//! their interrupts delivered as events; manifests in `tests/manifests/drivers/`.
//!
//! - `virtio_blk_self_test`: the `virtio-blk` driver domain, granted a virtio disk (MMIO on
//!   RISC-V `virt`, PCI with MSI-X on q35), brings it up and runs 200 transfers of 512 B to
//!   64 KiB at random sectors, each written, read back and checked, one at a time; each
//!   completion is awaited on the interrupt's endpoint (one interrupt per request, never a
//!   poll), and the disk image the host reads afterwards is no longer blank.
//! - `virtio_blk_two_clients`: two `blkbench` domains at once run 10,000 random transfers
//!   each (512 B to 64 KiB, up to 8 in flight) through the driver, every block read checked;
//!   one first sends a request of each kind the driver must refuse (before its Open; out of
//!   range; past the end; misaligned; zero length; outside its data area) and gets each
//!   documented error; after the run the host replays both workloads (`blk::workload`) and
//!   checks every sector of both regions of the disk image, and finds the sectors the refused
//!   writes aimed at still zero.
//! - `virtio_blk_client_killed`: one client is killed mid-stream, transfers in flight; the
//!   driver forgets them and serves the other to the end, whose region the host checks.
//! - `virtio_blk_driver_killed`: the driver is killed mid-stream; both clients learn it from
//!   their channels (closed), exit with status 3, and the run ends: nobody hangs.

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

/// A client's workload as its manifest gives it: name, seed, first sector, sectors, transfers.
type Workload = (&'static str, u64, u64, u64, u64);

const ALPHA: Workload = ("alpha", 1, 0, 16384, 10_000);
const BETA: Workload = ("beta", 2, 16384, 16384, 10_000);

/// Checks client `w`'s report and, on the image of `manifest`'s disk, every sector of its region
/// against the replay of its workload.
fn client_done(arch: Arch, out: &Outcome, manifest: &str, w: Workload) -> Result<(), String> {
    let (name, seed, first, sectors, transfers) = w;
    let want = format!(
        "[{name}] blkbench: done transfers={transfers} writes=* reads=* seed={seed} first={first} sectors={sectors} written_sectors=*"
    );
    let line = out
        .log
        .iter()
        .find(|l| crate::expected::glob(&want, &l.message))
        .ok_or(format!("no report from {name} like {want:?}"))?;
    let written =
        crate::log::field(&line.message, "written_sectors").ok_or("no written_sectors")?;
    let expected = blk::workload::Expected::after(seed, first, sectors, transfers);
    if expected.written() as u64 != written {
        return Err(format!(
            "{name} reports {written} sectors written, the replay {}",
            expected.written()
        ));
    }
    let path =
        crate::disks::image_path(&crate::disks::dir(arch), std::path::Path::new(manifest), "data");
    let region = crate::disks::read_sectors(&path, first, sectors).map_err(|e| format!("{e:#}"))?;
    if let Some(bad) = expected.first_mismatch(&region) {
        return Err(format!(
            "{}: sector {bad} of {name}'s region does not hold what its workload wrote",
            path.display()
        ));
    }
    Ok(())
}

const TWO_CLIENTS: &str = "tests/manifests/drivers/virtio-blk-two-clients.toml";
const CLIENT_KILLED: &str = "tests/manifests/drivers/virtio-blk-client-killed.toml";
const DRIVER_KILLED: &str = "tests/manifests/drivers/virtio-blk-driver-killed.toml";

fn two_clients(arch: Arch, out: &Outcome) -> Result<(), String> {
    expect_ending(out, Ending::Kernel(0))?;
    for what in [
        "before open: refused with UnknownClient",
        "out of range: refused with OutOfRange",
        "past the end: refused with OutOfRange",
        "misaligned: refused with Misaligned",
        "zero length: refused with ZeroLength",
        "outside the area: refused with OutsideDataArea",
    ] {
        expect_line(out, &format!("[beta] blkbench: {what}"))?;
    }
    // The refused writes aimed at the last megabyte, which no workload touches: still zero.
    let path = crate::disks::image_path(
        &crate::disks::dir(arch),
        std::path::Path::new(TWO_CLIENTS),
        "data",
    );
    let tail = crate::disks::read_sectors(&path, 32768, 2048).map_err(|e| format!("{e:#}"))?;
    if let Some(at) = tail.iter().position(|&b| b != 0) {
        return Err(format!(
            "{}: sector {} was written by a refused request",
            path.display(),
            32768 + at / 512
        ));
    }
    client_done(arch, out, TWO_CLIENTS, ALPHA)?;
    client_done(arch, out, TWO_CLIENTS, BETA)?;
    // 20,000 transfers and the two flushes went to the device; the six bad requests did not.
    expect_line(out, "virtio-blk: every client gone: 20002 requests served, 6 rejected")?;
    expect_line(out, "blk: exited with status 0")?;
    frames_returned(out)
}

fn client_killed(arch: Arch, out: &Outcome) -> Result<(), String> {
    expect_ending(out, Ending::Kernel(0))?;
    expect_line(out, "alpha: terminated (store page fault)")?;
    expect_line(out, "virtio-blk: client alpha-req gone")?;
    client_done(arch, out, CLIENT_KILLED, BETA)?;
    expect_line(out, "blk: exited with status 0")?;
    frames_returned(out)
}

fn driver_killed(out: &Outcome) -> Result<(), String> {
    expect_ending(out, Ending::Kernel(0))?;
    expect_line(out, "blk: terminated (store page fault)")?;
    for name in ["alpha", "beta"] {
        expect_line(out, &format!("[{name}] blkbench: the driver is gone"))?;
        expect_line(out, &format!("{name}: exited with status 3"))?;
    }
    frames_returned(out)
}

/// The suite's tests on `arch`.
pub(super) fn drivers_tests(p: &str, arch: Arch) -> Vec<QemuTest> {
    let mut boot = Boot::new(arch);
    boot.icount = true;
    boot.timeout = Duration::from_secs(120);
    let test = |name: &str, manifest: &str, timeout: u64, expected, check: super::Check| {
        let mut boot = Boot::new(arch);
        boot.icount = true;
        boot.timeout = Duration::from_secs(timeout);
        QemuTest {
            name: format!("{p}drivers::{name}"),
            boot,
            system: Some((manifest.into(), Spoil::Nothing)),
            expected,
            check,
        }
    };
    const KILLED_CLIENT: &[&str] = &[
        "domain alpha: store page fault at address 0x10, *",
        "domain alpha: the address is outside the user half",
        "domain alpha terminated: store page fault",
    ];
    const KILLED_DRIVER: &[&str] = &[
        "domain blk: store page fault at address 0x10, *",
        "domain blk: the address is outside the user half",
        "domain blk terminated: store page fault",
    ];
    vec![
        test(
            "virtio_blk_self_test",
            SELF_TEST,
            120,
            &[],
            Box::new(move |out| self_test(arch, out)),
        ),
        test(
            "virtio_blk_two_clients",
            TWO_CLIENTS,
            300,
            &[],
            Box::new(move |out| two_clients(arch, out)),
        ),
        test(
            "virtio_blk_client_killed",
            CLIENT_KILLED,
            300,
            KILLED_CLIENT,
            Box::new(move |out| client_killed(arch, out)),
        ),
        test(
            "virtio_blk_driver_killed",
            DRIVER_KILLED,
            300,
            KILLED_DRIVER,
            Box::new(driver_killed),
        ),
    ]
}
