//! The QEMU suite of block driver domains: devices granted by the manifest, their registers
//! mapped into the driver domain alone, DMA memory from its guarantee, and their interrupts
//! delivered as events; manifests in `tests/manifests/drivers/`, `DRIVER-CHECK.toml`.
//!
//! The same six checks run for each driver of [`DRIVERS`]: `virtio_blk_*` on both
//! architectures (a virtio disk: MMIO on RISC-V `virt`, PCI with MSI-X on q35), `ahci_*` on
//! x86_64 (a SATA disk on port 0 of an AHCI controller of its own on q35, MSI, native command
//! queuing).
//!
//! - `*_self_test`: the driver domain, granted its disk, brings it up (its start-up line naming
//!   the disk's sectors) and runs 200 transfers of 512 B to 64 KiB at random sectors, each
//!   written, read back and checked, one at a time; each completion is awaited on the
//!   interrupt's endpoint (one interrupt per request, never a poll), and the disk image the
//!   host reads afterwards is no longer blank; then a read past the end of the disk, sent
//!   straight to the device, fails with a device error and the driver recovers.
//! - `*_two_clients`: two `blkbench` domains at once run 10,000 random transfers each (512 B
//!   to 64 KiB, up to 8 in flight) through the driver, every block read checked; one first
//!   sends a request of each kind the driver must refuse (before its Open; out of range; past
//!   the end; misaligned; zero length; outside its data area) and gets each documented error;
//!   after the run the host replays both workloads (`blk_workloads::workload`) and checks every sector
//!   of both regions of the disk image, and finds the sectors the refused writes aimed at
//!   still zero.
//! - `*_client_killed`: one client is killed mid-stream, transfers in flight; the driver
//!   forgets them and serves the other to the end, whose region the host checks.
//! - `*_driver_killed`: the driver is killed mid-stream; both clients learn it from their
//!   channels (closed), exit with status 3, and the run ends: nobody hangs.
//! - `*_diskread`: four `diskread` clients at once, each in its own part of the disk for one
//!   second by its own clock: a sequential reader with a think time, one reading every other
//!   block and writing every 4th, the bursts-and-pauses adversary, and a hog with 8 random
//!   requests in flight, writing every 8th, running 100 ms longer so that the other writer's
//!   flush comes while its requests are in flight; each reports what it read and wrote, and
//!   the driver answers every request without error.
//! - `*_idle`: interrupt-driven, not polling: a client makes 60 transfers one at a time,
//!   sleeping 20 ms after every 6, beside a CPU-bound neighbour; the driver (which may run in
//!   slack time) uses at most 3 ms of CPU in the whole run (the kernel's accounts), sees every
//!   interrupt within its 200 µs latency hint of the kernel's signal (by its own clock against
//!   the kernel's stamp in its control block), and takes one interrupt per request.
//!
//! And the disk scheduled, under each scheduler (`*_scheduled_POLICY`: every scheduler on
//! `virtio_blk` on RISC-V and on `ahci`; USD and Aged-SPTF on `virtio_blk` on x86_64): the
//! driver's disk has a model and every Read and Write goes through the scheduler
//! (`{app}-scheduled.toml`, its `--scheduler` replaced for each), the clients streams under
//! disk-time contracts. Two clients run 600 random transfers each, checked as in
//! `two_clients` (every block read, the image on the host, the refused requests); no wait of
//! the scheduler ended more than the driver's CPU period (10 ms) after its timeout, by the
//! driver's clock (they end up to 2.4 ms late: the driver is not always back within its
//! latency hint beside these clients); and under USD the stream without extra time never got
//! more than its slice of disk time in a period.
//!
//! `ahci_bad_sector`: a disk that cannot read sector 1000 (the image opened through QEMU's
//! blkdebug, and throttled so that requests wait at the device): a client runs 3,000 random
//! transfers, up to 8 in flight, over sectors 0-2047; exactly the reads of the bad sector fail
//! with a device error (the client's checks), the driver fails as many requests as the client
//! saw fail and at least once issues the other requests at the device again, and the host finds
//! the region as the workload wrote it.
//!
//! `virtio_blk_usd`: a sequential stream and a disk hog under USD on the Deskstar model at its
//! real size (`diskread`, 2 s each): neither stream gets more than its slice in a period; each
//! client's own reading of its accounts agrees with the driver's period records; no wait
//! outlived its timeout; the sequential stream reads at least 0.9 x its share x its bandwidth
//! alone (Argon's bar).

use std::time::Duration;

use super::domains::frames_returned;
use crate::harness::{QemuTest, expect_ending, expect_exit, expect_line, expect_terminated};
use qemu_run::qemu::{Boot, DiskFaults, Ending, Outcome};
use system_image::system::Spoil;
use tool_base::Arch;

/// A block driver domain the suite tests.
struct Driver {
    /// Its app, the prefix of its messages and of its manifests' names.
    app: &'static str,
    /// The prefix of its tests' names.
    test: &'static str,
    /// The architectures it runs on.
    arches: &'static [Arch],
    /// What its start-up line says of the 16 MiB disk of the self-test.
    startup: &'static str,
    /// How it refuses a read past the end of the disk: the device fails it (virtio-blk), or
    /// the driver's own range check refuses it before the device sees it (AHCI).
    past_the_end: &'static str,
}

/// The drivers the suite tests.
const DRIVERS: &[Driver] = &[
    Driver {
        app: "virtio-blk",
        test: "virtio_blk",
        arches: &[Arch::Riscv64, Arch::X86_64],
        startup: "virtio-blk: 32768 sectors of 512 bytes, queue of ",
        past_the_end: "device I/O error, 1 interrupt",
    },
    Driver {
        app: "ahci",
        test: "ahci",
        arches: &[Arch::X86_64],
        startup: "ahci: port 0: QEMU HARDDISK, 32768 sectors of 512 bytes, NCQ depth 32, interrupt on endpoint ",
        past_the_end: "request rejected by the device, 0 interrupts",
    },
];

impl Driver {
    /// The manifest of check `check` (`self-test`, `two-clients`, ...).
    fn manifest(&self, check: &str) -> String {
        format!("tests/manifests/drivers/{}-{check}.toml", self.app)
    }
}

/// The self-test's transfers, as its manifest gives them.
const TRANSFERS: u64 = 200;

fn self_test(d: &Driver, arch: Arch, out: &Outcome) -> Result<(), String> {
    expect_ending(out, Ending::Kernel(0))?;
    expect_line(out, "domain blk: device 0 granted: 1 register window(s), interrupt")?;
    expect_line(out, d.startup)?;
    let report = format!("{}: self-test: {TRANSFERS} transfers", d.app);
    let line = out.line(&report).ok_or("no self-test report")?;
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
    // interrupt each (none arriving would hang the domain; more would be spurious). Both
    // devices interrupt once per request: virtio-blk with a used buffer notification, the AHCI
    // controller with one MSI per set device bits FIS (its status is cleared before the next
    // request is issued, so nothing coalesces).
    if interrupts != 2 * TRANSFERS {
        return Err(format!("{interrupts} interrupts for {} requests", 2 * TRANSFERS));
    }
    // A read past the end, which the block server never sends, goes straight to the driver:
    // it fails with a device error, and the driver then serves a sector written and read back.
    expect_line(
        out,
        &format!(
            "{}: self-test: a read past the end failed ({}), and the disk serves again",
            d.app, d.past_the_end
        ),
    )?;
    expect_exit(out, "blk", 0)?;
    // The host reads the image: the transfers left data on it.
    let manifest = d.manifest("self-test");
    let path = system_image::disks::image_path(
        &system_image::disks::dir(arch),
        std::path::Path::new(&manifest),
        "data",
    );
    let mut written = 0;
    for chunk in 0..(16 << 20) / (64 << 10) {
        let bytes = system_image::disks::read_sectors(&path, chunk * 128, 128)
            .map_err(|e| format!("{e:#}"))?;
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
const SCHEDULED_ALPHA: Workload = ("alpha", 1, 0, 16384, 600);
const SCHEDULED_BETA: Workload = ("beta", 2, 16384, 16384, 600);
/// beta's disk-time slice in the scheduled manifests (no extra time).
const SCHEDULED_BETA_SLICE_NS: u64 = 60_000_000;

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
        .find(|l| qemu_run::expected::glob(&want, &l.message))
        .ok_or(format!("no report from {name} like {want:?}"))?;
    let written =
        qemu_run::log::field(&line.message, "written_sectors").ok_or("no written_sectors")?;
    let expected = blk_workloads::workload::Expected::after(seed, first, sectors, transfers);
    if expected.written() as u64 != written {
        return Err(format!(
            "{name} reports {written} sectors written, the replay {}",
            expected.written()
        ));
    }
    let path = system_image::disks::image_path(
        &system_image::disks::dir(arch),
        std::path::Path::new(manifest),
        "data",
    );
    let region =
        system_image::disks::read_sectors(&path, first, sectors).map_err(|e| format!("{e:#}"))?;
    if let Some(bad) = expected.first_mismatch(&region) {
        return Err(format!(
            "{}: sector {bad} of {name}'s region does not hold what its workload wrote",
            path.display()
        ));
    }
    Ok(())
}

fn two_clients(d: &Driver, arch: Arch, out: &Outcome) -> Result<(), String> {
    let manifest = d.manifest("two-clients");
    both_clients(d, arch, out, &manifest, [ALPHA, BETA])
}

/// The checks of two clients' run on `manifest` (see [`two_clients`]) with workloads `w`.
fn both_clients(
    d: &Driver,
    arch: Arch,
    out: &Outcome,
    manifest: &str,
    w: [Workload; 2],
) -> Result<(), String> {
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
    let path = system_image::disks::image_path(
        &system_image::disks::dir(arch),
        std::path::Path::new(manifest),
        "data",
    );
    let tail =
        system_image::disks::read_sectors(&path, 32768, 2048).map_err(|e| format!("{e:#}"))?;
    if let Some(at) = tail.iter().position(|&b| b != 0) {
        return Err(format!(
            "{}: sector {} was written by a refused request",
            path.display(),
            32768 + at / 512
        ));
    }
    client_done(arch, out, manifest, w[0])?;
    client_done(arch, out, manifest, w[1])?;
    // The transfers and the two flushes went to the device; the six bad requests did not.
    let served = w[0].4 + w[1].4 + 2;
    expect_line(
        out,
        &format!("{}: every client gone: {served} requests served, 6 rejected", d.app),
    )?;
    expect_exit(out, "blk", 0)?;
    frames_returned(out)
}

/// The USD check's streams: name, slice (ns) in each 1 s period, all without extra time.
const USD_STREAMS: [(&str, u64); 2] = [("r0", 500_000_000), ("r1", 400_000_000)];
/// What r0 reads alone on the model (`cargo xtask bench disk`, run `a-alone`), MB/s.
const USD_ALONE_MBPS: f64 = 21.17;

/// The USD check (`virtio-blk-usd.toml`): slices kept, the clients' own accounts agree with
/// the driver's period records, no wait past its timeout, and r0 keeps its locality beside the
/// hog.
fn usd(out: &Outcome) -> Result<(), String> {
    expect_ending(out, Ending::Kernel(0))?;
    let periods = qemu_run::disk_trace::periods(&out.log);
    for (name, slice) in USD_STREAMS {
        expect_exit(out, name, 0)?;
        let mine: Vec<_> = periods.iter().filter(|p| p.stream == name).collect();
        if mine.is_empty() {
            return Err(format!("no `disk period:` record of {name}"));
        }
        if let Some(p) = mine.iter().find(|p| p.guaranteed + p.extra > slice) {
            return Err(format!("{name} got more than its slice in a period: {p:?}"));
        }
        // The client's own reading of its accounts, taken just before its report.
        let want = format!("[{name}] diskread {name}: disk accounts ");
        let line = out.line(&want).ok_or(format!("no line like `{want}`"))?;
        let field = |k| qemu_run::log::field(&line.message, k).ok_or(format!("no {k} in {want}"));
        let (g, x, n) = (field("guaranteed_ns")?, field("extra_ns")?, field("periods")?);
        let recorded: u64 = mine.iter().map(|p| p.guaranteed + p.extra).sum();
        // Its accounts hold every completed period, and at most one slice more (the current).
        if n.abs_diff(mine.len() as u64) > 1 || g + x < recorded || g + x > recorded + slice {
            return Err(format!(
                "{name}'s accounts ({} ns in {n} periods) disagree with the driver's {} records ({recorded} ns)",
                g + x,
                mine.len()
            ));
        }
    }
    let waits = out.line("disk waits: ").ok_or("no `disk waits:` line")?;
    if qemu_run::log::field(&waits.message, "exceeded") != Some(0) {
        return Err(format!("a wait outlived its timeout: {}", waits.message));
    }
    // r0 keeps its seek locality: at least 0.9 x its share (half) x what it reads alone.
    let done = out.line("[r0] diskread r0: done ").ok_or("no report from r0")?;
    let bytes = qemu_run::log::field(&done.message, "bytes").ok_or("no bytes")?;
    let elapsed = qemu_run::log::field(&done.message, "elapsed_ns").ok_or("no elapsed_ns")?;
    let mbps = bytes as f64 / (elapsed.max(1) as f64 / 1e9) / 1e6;
    let bar = 0.9 * 0.5 * USD_ALONE_MBPS;
    if mbps < bar {
        return Err(format!("r0 read {mbps:.2} MB/s beside the hog, under the bar of {bar:.2}"));
    }
    Ok(())
}

/// The manifest of the scheduled check under `policy`, from the repository's root: written by
/// [`write_scheduled_manifest`].
fn scheduled_manifest(d: &Driver, policy: &str) -> String {
    format!("target/manifests/drivers/{}-scheduled-{policy}.toml", d.app)
}

/// Writes the scheduled check's manifest under `policy`: `{app}-scheduled.toml` with its
/// `--scheduler` replaced; its path.
fn write_scheduled_manifest(d: &Driver, policy: &str) -> String {
    let template = d.manifest("scheduled");
    let rel = scheduled_manifest(d, policy);
    let write = || -> std::io::Result<()> {
        let text = std::fs::read_to_string(tool_base::util::root().join(&template))?;
        let text = text.replace(
            "args = [\"--scheduler\", \"usd\"]",
            &format!("args = [\"--scheduler\", \"{policy}\"]"),
        );
        let path = tool_base::util::root().join(&rel);
        std::fs::create_dir_all(path.parent().unwrap_or(&path))?;
        std::fs::write(path, text)
    };
    // A manifest that could not be written fails its boot, which names it.
    let _ = write();
    rel
}

/// The CPU period of the driver of `{app}-scheduled.toml` (10 ms), in ns.
const SCHEDULED_DRIVER_PERIOD_NS: u64 = 10_000_000;

fn scheduled(d: &Driver, arch: Arch, policy: &str, out: &Outcome) -> Result<(), String> {
    let manifest = scheduled_manifest(d, policy);
    both_clients(d, arch, out, &manifest, [SCHEDULED_ALPHA, SCHEDULED_BETA])?;
    expect_line(out, &format!("{}: disk scheduled by {policy} ", d.app))?;
    // Beside two clients whose CPU work makes them miss deadlines, the driver is not always
    // back within its 500 us latency hint when a wait's timer fires (its waits end up to
    // 2.4 ms late here); its CPU contract still runs it within the period in which it woke.
    let waits = out.line("disk waits: ").ok_or("no `disk waits:` line")?;
    let late = qemu_run::log::field(&waits.message, "late_max_ns").ok_or("no late_max_ns")?;
    if late > SCHEDULED_DRIVER_PERIOD_NS {
        return Err(format!(
            "a wait ended more than the driver's CPU period after its timeout: {}",
            waits.message
        ));
    }
    if policy == "usd" {
        let beta: Vec<_> = qemu_run::disk_trace::periods(&out.log)
            .into_iter()
            .filter(|p| p.stream == "beta")
            .collect();
        if beta.is_empty() {
            return Err("no `disk period:` record of beta".into());
        }
        if let Some(p) = beta.iter().find(|p| p.guaranteed + p.extra > SCHEDULED_BETA_SLICE_NS) {
            return Err(format!("beta got more than its slice in a period: {p:?}"));
        }
    }
    Ok(())
}

fn client_killed(d: &Driver, arch: Arch, out: &Outcome) -> Result<(), String> {
    expect_ending(out, Ending::Kernel(0))?;
    expect_terminated(out, "alpha", "store page fault")?;
    expect_line(out, &format!("{}: client alpha-req gone", d.app))?;
    client_done(arch, out, &d.manifest("client-killed"), BETA)?;
    expect_exit(out, "blk", 0)?;
    frames_returned(out)
}

fn driver_killed(out: &Outcome) -> Result<(), String> {
    expect_ending(out, Ending::Kernel(0))?;
    expect_terminated(out, "blk", "store page fault")?;
    for name in ["alpha", "beta"] {
        expect_line(out, &format!("[{name}] blkbench: the driver is gone"))?;
        expect_exit(out, name, 3)?;
    }
    frames_returned(out)
}

/// The `diskread` check's clients: name, and whether it writes (as its manifest gives them).
const READERS: [(&str, bool); 4] = [("seq", false), ("alt", true), ("adv", false), ("hog", true)];

fn diskread(d: &Driver, out: &Outcome) -> Result<(), String> {
    expect_ending(out, Ending::Kernel(0))?;
    for (name, writes) in READERS {
        let want = format!("[{name}] diskread {name}: done reads=");
        let Some(line) = out.line(&want) else {
            let error = out.line(&format!("[{name}] diskread {name}: error"));
            return Err(error.map_or(format!("no report from {name}"), |l| l.message.clone()));
        };
        let msg = &line.message;
        let field = |key| qemu_run::log::field(msg, key).ok_or(format!("no {key} in `{msg}`"));
        let (reads, written, elapsed) = (field("reads")?, field("writes")?, field("elapsed_ns")?);
        for key in ["bytes", "first_ns", "last_ns", "mean_latency_ns", "max_latency_ns"] {
            field(key)?;
        }
        if reads == 0 || (written > 0) != writes || elapsed == 0 {
            return Err(format!("{name}: an unlikely report: {msg}"));
        }
        expect_exit(out, name, 0)?;
    }
    // No request failed: in particular, a flush meeting requests in flight took none's place.
    let gone = format!("{}: every client gone: ", d.app);
    let line = out.line(&gone).ok_or("the driver never saw every client gone")?;
    if !line.message.contains(" requests served, 0 rejected") {
        return Err(format!("requests failed: {}", line.message));
    }
    expect_exit(out, "blk", 0)?;
    frames_returned(out)
}

/// The blkdebug rules of the bad-sector check: every read of [`BAD_SECTOR`] fails.
const BAD_SECTOR_RULES: &str = "tests/manifests/drivers/ahci-bad-sector.blkdebug";
/// The bad-sector check's disk serves at most this many requests a second (by the host's
/// clock): the client's other requests wait at the device while the bad read fails, as on a
/// disk with moving parts (unthrottled, QEMU has finished them before the driver looks).
const BAD_SECTOR_IOPS: u32 = 1000;

/// The bad-sector check's client (as `ahci-bad-sector.toml` gives it): name, seed, first
/// sector, sectors, transfers; and the sector the disk cannot read.
const BAD_SECTOR_CLIENT: Workload = ("alpha", 3, 0, 2048, 3000);
const BAD_SECTOR: u64 = 1000;

/// The bad-sector check (`ahci-bad-sector.toml`, the image opened through QEMU's blkdebug with
/// the rules of `ahci-bad-sector.blkdebug`, throttled): with native-queued commands in flight,
/// every read of the bad sector failed with a device error and nothing else did (the client's
/// own checks, every block it read included), the driver failed exactly as many requests as the
/// client saw fail and at least once met the error with other requests at the device, which it
/// issued again, and the image holds what the workload (after its prefill) wrote.
fn bad_sector(d: &Driver, arch: Arch, out: &Outcome) -> Result<(), String> {
    expect_ending(out, Ending::Kernel(0))?;
    let (name, seed, first, sectors, transfers) = BAD_SECTOR_CLIENT;
    let report = format!("[{name}] blkbench: bad sector {BAD_SECTOR}: ");
    let line = out.line(&report).ok_or(format!("no line like `{report}`"))?;
    let failed: u64 = line
        .message
        .strip_prefix(&report)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .ok_or(format!("unreadable report: {}", line.message))?;
    if failed == 0 {
        return Err(format!("no read of sector {BAD_SECTOR} was made: the check checked nothing"));
    }
    expect_exit(out, name, 0)?;
    let driver = |what: &str| {
        out.log
            .iter()
            .filter(|l| l.message.starts_with(&format!("[blk] {}: ", d.app)))
            .filter(|l| l.message.contains(what))
            .count() as u64
    };
    let driver_failed = driver(" failed (PxIS ");
    if driver_failed != failed {
        return Err(format!(
            "the driver failed {driver_failed} requests, the client saw {failed} fail"
        ));
    }
    // With others at the device: the error log named the failed one and they went again at
    // once, or (QEMU's disk has no such log) each was retried alone.
    let shared = driver(" other request(s) issued again") + driver(" each is retried alone");
    if shared == 0 {
        return Err(
            "no error met other requests at the device: the check checked too little".into()
        );
    }
    let manifest = d.manifest("bad-sector");
    let shape = blk_workloads::workload::Shape::MIXED;
    let expected = blk_workloads::workload::Expected::after_shaped(
        seed, first, sectors, shape, true, transfers,
    );
    let path = system_image::disks::image_path(
        &system_image::disks::dir(arch),
        std::path::Path::new(&manifest),
        "data",
    );
    let region =
        system_image::disks::read_sectors(&path, first, sectors).map_err(|e| format!("{e:#}"))?;
    if let Some(bad) = expected.first_mismatch(&region) {
        return Err(format!(
            "{}: sector {bad} of {name}'s region does not hold what its workload wrote",
            path.display()
        ));
    }
    expect_exit(out, "blk", 0)?;
    frames_returned(out)
}

/// The idle check's client: its transfers and its pauses (as its manifest gives them), and
/// the driver's latency hint.
const IDLE_TRANSFERS: u64 = 60;
const IDLE_PAUSED_NS: u64 = 9 * 20_000_000;
const IDLE_LATENCY_NS: u64 = 200_000;
/// The most CPU the driver may use in the idle check (start-up included): a driver that
/// polled would have its 2 ms slice in each of the 18 periods of the pauses, and slack beside.
const IDLE_DRIVER_CPU_US: u64 = 3_000;

fn idle(d: &Driver, out: &Outcome) -> Result<(), String> {
    expect_ending(out, Ending::Kernel(0))?;
    expect_exit(out, "client", 0)?;
    expect_exit(out, "busy", 0)?;
    let report = format!("{}: every client gone: ", d.app);
    let line = out.line(&report).ok_or(format!("no line like `{report}`"))?;
    let n: Vec<u64> =
        line.message.split(|c: char| !c.is_ascii_digit()).filter_map(|w| w.parse().ok()).collect();
    let [served, rejected, interrupts, wake_ns] = n[..] else {
        return Err(format!("unreadable report: {}", line.message));
    };
    // The transfers and the final flush, one interrupt each.
    if (served, rejected) != (IDLE_TRANSFERS + 1, 0) || interrupts != served {
        return Err(format!("{served} served, {rejected} rejected, {interrupts} interrupts"));
    }
    // Woken by each completion within its latency hint, by its own clock.
    if wake_ns == 0 || wake_ns > IDLE_LATENCY_NS {
        return Err(format!(
            "the driver saw an interrupt {wake_ns} ns after the kernel signalled it (hint {IDLE_LATENCY_NS} ns)"
        ));
    }
    let idle_line = out.line("kernel: idle ").ok_or("no idle line in the run summary")?;
    let run_ns = idle_line
        .message
        .split_whitespace()
        .filter_map(|w| w.parse::<u64>().ok())
        .nth(1)
        .ok_or("an unreadable idle line")?;
    if run_ns < IDLE_PAUSED_NS {
        return Err(format!("the run lasted {run_ns} ns, less than the client's pauses"));
    }
    let accounts = qemu_run::cpu::summary_accounts(out);
    let driver = accounts.iter().find(|a| a.domain == "blk").ok_or("no account of blk")?;
    let cpu_us = driver.guaranteed_us + driver.extra_us;
    if cpu_us == 0 || cpu_us > IDLE_DRIVER_CPU_US {
        return Err(format!(
            "the driver used {cpu_us} us of CPU in a run of {} ms, {} of them idle for it (at most {IDLE_DRIVER_CPU_US} us)",
            run_ns / 1_000_000,
            IDLE_PAUSED_NS / 1_000_000
        ));
    }
    Ok(())
}

/// The suite's tests on `arch`: the six checks of each driver that runs on it, its scheduled
/// checks, and those of one driver alone (`virtio_blk_usd`, `ahci_bad_sector`).
pub(super) fn drivers_tests(p: &str, arch: Arch) -> Vec<QemuTest> {
    let test = |d: &Driver, check: &str, timeout: u64, expected, f: crate::harness::Check| {
        let mut boot = Boot::new(arch);
        boot.icount = true;
        boot.timeout = Duration::from_secs(timeout);
        QemuTest {
            name: format!("{p}drivers::{}_{}", d.test, check.replace('-', "_")),
            boot,
            system: Some((d.manifest(check), Spoil::Nothing)),
            expected,
            check: f,
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
    let mut tests = Vec::new();
    for d in DRIVERS.iter().filter(|d| d.arches.contains(&arch)) {
        tests.extend([
            test(d, "self-test", 120, &[], Box::new(move |out| self_test(d, arch, out))),
            test(d, "two-clients", 300, &[], Box::new(move |out| two_clients(d, arch, out))),
            test(
                d,
                "client-killed",
                300,
                KILLED_CLIENT,
                Box::new(move |out| client_killed(d, arch, out)),
            ),
            test(d, "driver-killed", 300, KILLED_DRIVER, Box::new(driver_killed)),
            test(d, "diskread", 300, &[], Box::new(move |out| diskread(d, out))),
            test(d, "idle", 120, &[], Box::new(move |out| idle(d, out))),
        ]);
        let policies: &[&'static str] = match (d.test, arch) {
            ("virtio_blk", Arch::X86_64) => &["usd", "aged-sptf"],
            _ => &["fcfs", "sstf", "sptf", "aged-sptf", "cscan", "stride", "usd"],
        };
        if d.test == "virtio_blk" {
            tests.push(test(d, "usd", 300, &[], Box::new(usd)));
        }
        if d.test == "ahci" {
            let mut t =
                test(d, "bad-sector", 300, &[], Box::new(move |out| bad_sector(d, arch, out)));
            t.boot.disk_faults = Some(DiskFaults {
                rules: tool_base::util::root().join(BAD_SECTOR_RULES),
                iops: Some(BAD_SECTOR_IOPS),
            });
            tests.push(t);
        }
        for &policy in policies {
            let mut t = test(
                d,
                "scheduled",
                300,
                &[],
                Box::new(move |out| scheduled(d, arch, policy, out)),
            );
            t.name = format!("{p}drivers::{}_scheduled_{}", d.test, policy.replace('-', "_"));
            t.system = Some((write_scheduled_manifest(d, policy), Spoil::Nothing));
            tests.push(t);
        }
    }
    tests
}
