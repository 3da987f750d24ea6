//! Booting Tessera in QEMU: command lines, timeouts, exit statuses and the live decoded log.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::dtb::DtbChanges;
use crate::log::{Kernel, LogLine};
use system_image::disks;
use system_image::system::{self, System};
use tool_base::artifacts::Artifacts;
use tool_base::util;
use tool_base::{Arch, Bios};

/// One QEMU boot.
#[derive(Clone, Debug)]
pub struct Boot {
    /// Guest architecture.
    pub arch: Arch,
    /// RISC-V firmware.
    pub bios: Bios,
    /// Guest memory in MiB.
    pub memory: u32,
    /// Kernel command line.
    pub append: String,
    /// `-icount shift=0,sleep=off`.
    pub icount: bool,
    /// Wait for gdb on :1234.
    pub gdb: bool,
    /// Kill QEMU after this long.
    pub timeout: Duration,
    /// The boot image (`-initrd`), if the boot runs domains.
    pub initrd: Option<PathBuf>,
    /// Boot with QEMU's device tree changed so (`-dtb`, RISC-V; see [`crate::dtb`]).
    pub dtb: Option<DtbChanges>,
    /// Extra devices (each the argument of a `-device`).
    pub devices: Vec<String>,
    /// Drives (each the argument of a `-drive`): the disk images of a manifest
    /// ([`system_image::disks`]).
    pub drives: Vec<String>,
    /// The machine's NICs, in the manifest's order ([`attach`](Self::attach)); each is a port
    /// of QEMU's hub 0 unless it is the one plugged into [`nic`](Self::nic)'s switch.
    pub nics: Vec<NicDevice>,
    /// Every drive made faulty and slow, for tests of drivers' error handling
    /// ([`DiskFaults::drive`]).
    pub disk_faults: Option<DiskFaults>,
    /// The machine's plug into a VDE switch (a cluster's node): the manifest's first NIC goes
    /// there with the plug's MAC, or an unclaimed card if the manifest has none; `None`: the
    /// NICs reach only each other, on QEMU's hub.
    pub nic: Option<Nic>,
    /// Every virtio-net card moves frames at points of virtual time ([`NIC_VIRTUAL_TIME`]):
    /// with `-icount`, a run that sends frames repeats exactly from boot to boot.
    pub nics_on_virtual_time: bool,
}

/// QEMU's properties that make a virtio-net card move its frames at points of virtual time,
/// as `-global` arguments. By default QEMU sends a card's frames from its main loop (a bottom
/// half scheduled by the guest's notification; on PCI the notification itself goes through an
/// event notifier to the main loop), whenever the host's thread gets to it: under `-icount`
/// the frames, and the interrupts they raise in the receiving card, then land a few
/// instructions earlier or later from boot to boot, and the drivers take different paths (a
/// UDP round trip between two driver domains moved by about 1%). Here the notification is
/// handled in the vCPU's thread (`ioeventfd=off`) and the frames are sent by a timer on QEMU's
/// virtual clock 1 µs later (`tx=timer`), which `-icount` runs at an exact instruction.
pub const NIC_VIRTUAL_TIME: [&str; 3] = [
    "virtio-net-device.tx=timer",
    "virtio-net-device.x-txtimer=1000",
    "virtio-net-pci.ioeventfd=off",
];

/// One virtio-net card of a machine: its MAC and its slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NicDevice {
    /// The card's MAC address.
    pub mac: [u8; 6],
    /// Where the card is.
    pub slot: NicSlot,
}

impl NicDevice {
    /// The cards of a placed manifest's NICs, where it put them.
    pub fn of_manifest(nics: &[manifest::NicSpec]) -> Result<Vec<NicDevice>> {
        let card = |n: &manifest::NicSpec| {
            let slot = match n.at {
                Some(manifest::DeviceAddress::Mmio { unit }) => NicSlot::Mmio(unit),
                Some(manifest::DeviceAddress::Pci { bus: 0, slot, function: 0 }) => {
                    NicSlot::Pci(slot)
                }
                at => anyhow::bail!("NIC {}: cannot attach it at {at:?}", n.name),
            };
            Ok(NicDevice { mac: n.mac, slot })
        };
        nics.iter().map(card).collect()
    }
}

/// Where a virtio-net card sits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NicSlot {
    /// On `virt`'s virtio-mmio transport `U` (`virtio-mmio-bus.U`), where the manifest put it.
    Mmio(u16),
    /// At q35's PCI slot `00:S.0`, where the manifest put it.
    Pci(u8),
    /// On a free transport or slot: the card of a cluster's node whose manifest has no NIC.
    Free,
}

/// A machine's plug into a VDE switch (`-netdev vde`), taken by its first NIC ([`nic_args`]).
/// Only a Unix socket: nothing on the host's interfaces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nic {
    /// The switch's socket folder (`vde_switch -s DIR`).
    pub switch: PathBuf,
    /// The card's MAC address; every card on a switch needs its own.
    pub mac: [u8; 6],
}

impl Nic {
    /// The MAC of the `index`-th card of a cluster: `52:54:00:12:34:NN` with `NN` = `index`
    /// + 1 (QEMU's own default, `...:56`, is left to lone boots).
    pub fn mac_of(index: u8) -> [u8; 6] {
        [0x52, 0x54, 0x00, 0x12, 0x34, index.wrapping_add(1)]
    }

    /// The MAC as QEMU writes it, `52:54:00:12:34:01`.
    pub fn mac_text(&self) -> String {
        self.mac.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
    }
}

/// How a boot's drives misbehave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiskFaults {
    /// A rules file of QEMU's `blkdebug` driver, through which each image is opened
    /// (`file=blkdebug:RULES:IMAGE`): the errors it injects reach the guest as the disk's.
    pub rules: PathBuf,
    /// At most this many requests a second (QEMU's `throttling.iops-total`), so that requests
    /// wait at the device, as on a disk with moving parts, while one of them fails. The
    /// throttle runs by the host's clock, so this makes a run's timing the host's.
    pub iops: Option<u32>,
}

impl DiskFaults {
    /// `drive` (a `-drive` argument naming its image with `file=`) with these faults; a drive
    /// without `file=` gets only the throttle.
    pub fn drive(&self, drive: &str) -> String {
        let opened = |rest: &str| format!("file=blkdebug:{}:{rest}", self.rules.display());
        let mut out = match drive.split_once("file=") {
            Some(("", rest)) => opened(rest),
            Some((before, rest)) if before.ends_with(',') => format!("{before}{}", opened(rest)),
            _ => drive.to_string(),
        };
        if let Some(iops) = self.iops {
            out.push_str(&format!(",throttling.iops-total={iops}"));
        }
        out
    }
}

impl Boot {
    /// A boot of `arch` with defaults: own firmware, 128 MiB, no arguments, 60 s timeout.
    pub fn new(arch: Arch) -> Self {
        Boot {
            arch,
            bios: Bios::Rustsbi,
            memory: 128,
            append: String::new(),
            icount: false,
            gdb: false,
            timeout: Duration::from_secs(60),
            initrd: None,
            dtb: None,
            devices: Vec::new(),
            drives: Vec::new(),
            nics: Vec::new(),
            disk_faults: None,
            nic: None,
            nics_on_virtual_time: false,
        }
    }

    /// Sets this boot up to run `system`: its boot image, its guest memory, and its disks and
    /// NICs attached where the manifest places them.
    pub fn attach(&mut self, system: &System) -> Result<()> {
        self.initrd = Some(system.image.clone());
        self.memory = system.memory_mib();
        let (drives, devices) = disks::qemu_args(&system.disks)?;
        self.drives.extend(drives);
        self.devices.extend(devices);
        self.nics.extend(NicDevice::of_manifest(&system.manifest.nics)?);
        Ok(())
    }

    /// The QEMU command line.
    pub fn command(&self, a: &Artifacts) -> Command {
        self.command_dumping(a, None)
    }

    /// The command line that makes QEMU write the device tree it would give this boot to
    /// `file` (without any `-dtb` change) and exit (RISC-V).
    pub fn dump_dtb_command(&self, a: &Artifacts, file: &Path) -> Command {
        self.command_dumping(a, Some(file))
    }

    fn command_dumping(&self, a: &Artifacts, dump: Option<&Path>) -> Command {
        let mut c = match self.arch {
            Arch::Riscv64 => {
                let mut c = Command::new("qemu-system-riscv64");
                let machine = match dump {
                    Some(file) => format!("virt,dumpdtb={}", file.display()),
                    None => "virt".into(),
                };
                c.args(["-machine", &machine, "-smp", "1", "-bios"]);
                match (self.bios, &a.firmware) {
                    (Bios::Rustsbi, Some(fw)) => c.arg(fw),
                    _ => c.arg("default"),
                };
                c
            }
            Arch::X86_64 => {
                let mut c = Command::new("qemu-system-x86_64");
                c.args(["-machine", "q35", "-cpu", "max"]);
                c.args(["-device", "isa-debug-exit,iobase=0xf4,iosize=0x04"]);
                c
            }
        };
        c.arg("-m").arg(format!("{}M", self.memory));
        c.arg("-kernel").arg(&a.kernel);
        c.arg("-append").arg(&self.append);
        if let Some(initrd) = &self.initrd {
            c.arg("-initrd").arg(initrd);
        }
        if let (Some(changes), None) = (&self.dtb, dump) {
            c.arg("-dtb").arg(crate::dtb::path(changes));
        }
        c.args(["-display", "none", "-serial", "stdio", "-monitor", "none", "-no-reboot"]);
        c.args(["-nic", "none"]);
        for drive in &self.drives {
            match &self.disk_faults {
                Some(faults) => c.arg("-drive").arg(faults.drive(drive)),
                None => c.arg("-drive").arg(drive),
            };
        }
        for device in &self.devices {
            c.arg("-device").arg(device);
        }
        let (netdevs, devices) = nic_args(self.arch, &self.nics, self.nic.as_ref());
        for (netdev, device) in netdevs.iter().zip(&devices) {
            c.arg("-netdev").arg(netdev);
            c.arg("-device").arg(device);
        }
        if self.icount {
            c.args(["-icount", "shift=0,sleep=off"]);
        }
        if self.nics_on_virtual_time {
            for global in NIC_VIRTUAL_TIME {
                c.args(["-global", global]);
            }
        }
        if self.gdb {
            c.args(["-s", "-S"]);
        }
        c
    }

    /// Firmware description for reports.
    pub fn firmware_name(&self) -> &'static str {
        match (self.arch, self.bios) {
            (Arch::Riscv64, Bios::Rustsbi) => "Tessera firmware (RustSBI)",
            (Arch::Riscv64, Bios::Opensbi) => "QEMU's OpenSBI",
            (Arch::X86_64, _) => "PVH (QEMU -kernel)",
        }
    }
}

/// The `-netdev` and `-device` arguments of a machine's NICs. Every NIC is a port of QEMU's
/// hub 0 (`hubport`), so the NICs of one machine reach each other and nothing else (no host
/// network, no socket), to the instruction under `-icount` only with
/// [`Boot::nics_on_virtual_time`] (QEMU's defaults move frames from its main loop, when the
/// host gets to it); with a `plug`, the first NIC is
/// plugged into the plug's VDE switch instead, with the plug's MAC (a Unix socket: nothing on
/// the host's interfaces), an unclaimed card if the machine has none. A card is
/// `virtio-net-device` on `virt` (on `virtio-mmio-bus.U` where the manifest put it) or
/// `virtio-net-pci` on q35 (at `addr=` where the manifest put it, its option ROM left out:
/// nothing boots from it).
pub fn nic_args(arch: Arch, nics: &[NicDevice], plug: Option<&Nic>) -> (Vec<String>, Vec<String>) {
    let unclaimed = [NicDevice { mac: [0; 6], slot: NicSlot::Free }];
    let nics = match (nics.is_empty(), plug) {
        (true, Some(_)) => &unclaimed[..],
        _ => nics,
    };
    let mut netdevs = Vec::new();
    let mut devices = Vec::new();
    for (i, n) in nics.iter().enumerate() {
        let id = format!("nic{i}");
        let (netdev, mac) = match plug {
            Some(p) if i == 0 => (format!("vde,id={id},sock={}", p.switch.display()), p.mac),
            _ => (format!("hubport,id={id},hubid=0"), n.mac),
        };
        let mac = manifest::Mac(mac);
        netdevs.push(netdev);
        devices.push(match (arch, n.slot) {
            (_, NicSlot::Mmio(unit)) => {
                format!("virtio-net-device,netdev={id},mac={mac},bus=virtio-mmio-bus.{unit}")
            }
            (_, NicSlot::Pci(slot)) => {
                format!("virtio-net-pci,netdev={id},mac={mac},addr={slot:#x},romfile=")
            }
            (Arch::Riscv64, NicSlot::Free) => format!("virtio-net-device,netdev={id},mac={mac}"),
            (Arch::X86_64, NicSlot::Free) => format!("virtio-net-pci,netdev={id},mac={mac}"),
        });
    }
    (netdevs, devices)
}

/// How a boot ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ending {
    /// The kernel exited with this code (0 success, 1 test failure, 2 panic).
    Kernel(u8),
    /// QEMU exited with a status the kernel cannot produce (a crash, a triple fault).
    Other(Option<i32>),
    /// Killed after the timeout.
    Timeout,
    /// Stopped with Ctrl-C.
    Interrupted,
}

/// The result of a boot.
pub struct Outcome {
    /// How it ended.
    pub ending: Ending,
    /// The decoded log.
    pub log: Vec<LogLine>,
    /// What QEMU wrote to stderr.
    pub stderr: String,
    /// Wall-clock time from spawn to exit.
    pub wall: Duration,
}

impl Outcome {
    /// Does any line contain `text`?
    pub fn has(&self, text: &str) -> bool {
        self.log.iter().any(|l| l.message.contains(text))
    }

    /// The first line containing `text`.
    pub fn line(&self, text: &str) -> Option<&LogLine> {
        self.log.iter().find(|l| l.message.contains(text))
    }

    /// The log as text, one line each.
    pub fn log_text(&self) -> String {
        let mut s: String = self.log.iter().map(|l| format!("{l}\n")).collect();
        if !self.stderr.is_empty() {
            s.push_str("--- qemu stderr ---\n");
            s.push_str(&self.stderr);
        }
        s
    }
}

fn ending(arch: Arch, status: Option<i32>) -> Ending {
    match (arch, status) {
        (Arch::Riscv64, Some(s)) if (0..=3).contains(&s) => Ending::Kernel(s as u8),
        // isa-debug-exit: the kernel writes 0x10 + code, QEMU exits with (value << 1) | 1.
        (Arch::X86_64, Some(s)) if (33..=39).contains(&s) && s % 2 == 1 => {
            Ending::Kernel(((s - 33) / 2) as u8)
        }
        (_, s) => Ending::Other(s),
    }
}

/// Boots `boot`, calling `on_line` for each decoded line as it arrives.
pub fn boot(
    boot: &Boot,
    a: &Artifacts,
    kernel: &Kernel,
    stop: Option<&AtomicBool>,
    on_line: &mut dyn FnMut(&LogLine),
) -> Result<Outcome> {
    if let Some(changes) = &boot.dtb {
        crate::dtb::build(|out| boot.dump_dtb_command(a, out), changes)?;
    }
    let mut cmd = boot.command(a);
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = cmd.spawn().with_context(|| format!("starting {cmd:?}"))?;
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel::<Vec<u8>>();
    let reader = std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let mut decoder = kernel.decoder();
    let mut log = Vec::new();
    let mut forced = None;
    let status = loop {
        match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(bytes) => {
                for line in decoder.feed(&bytes) {
                    on_line(&line);
                    log.push(line);
                }
                continue;
            }
            Err(mpsc::RecvTimeoutError::Timeout) | Err(mpsc::RecvTimeoutError::Disconnected) => {}
        }
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if start.elapsed() > boot.timeout {
            forced = Some(Ending::Timeout);
        } else if stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
            forced = Some(Ending::Interrupted);
        }
        if forced.is_some() {
            let _ = child.kill();
            break child.wait()?;
        }
    };
    let wall = start.elapsed();
    let _ = reader.join();
    for bytes in rx.try_iter() {
        for line in decoder.feed(&bytes) {
            on_line(&line);
            log.push(line);
        }
    }
    for line in decoder.finish() {
        on_line(&line);
        log.push(line);
    }
    let stderr = err_reader.join().unwrap_or_default();
    // A status the kernel could have produced counts as the kernel's only if it said so: QEMU
    // also exits with 0 when gdb kills it, or on a triple fault with -no-reboot.
    let said_shutdown = log.iter().any(|l| l.message.starts_with("shutdown: "));
    let ending = match forced.unwrap_or_else(|| ending(boot.arch, status.code())) {
        Ending::Kernel(_) if !said_shutdown => Ending::Other(status.code()),
        e => e,
    };
    Ok(Outcome { ending, log, stderr, wall })
}

/// The installed QEMU's version line, for reports.
pub fn version(arch: Arch) -> String {
    let program = match arch {
        Arch::Riscv64 => "qemu-system-riscv64",
        Arch::X86_64 => "qemu-system-x86_64",
    };
    Command::new(program)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.lines().next().map(str::to_string))
        .unwrap_or_else(|| "unknown".into())
}

/// Where failing boots' logs are kept.
pub fn log_dir() -> PathBuf {
    util::target_dir().join("qemu-logs")
}

/// A manifest ready to boot on RISC-V under `-icount shift=0,sleep=off`, as many times as
/// wanted: the boot and a kernel that symbolizes its apps' addresses.
pub struct IcountBoot {
    /// The QEMU boot (image, memory, command line).
    pub boot: Boot,
    kernel: Kernel,
}

impl IcountBoot {
    /// Prepares `manifest` (relative to the workspace) for the kernel of `a` (and its
    /// architecture), with `append` on the kernel command line.
    pub fn new(a: &Artifacts, manifest: &str, append: &str) -> Result<Self> {
        let s = system::prepare(&util::root().join(manifest), system::Spoil::Nothing, a.arch)?;
        let mut kernel = Kernel::load(&a.kernel)?;
        kernel.add_instances(&s.instances)?;
        let mut boot = Boot::new(a.arch);
        boot.attach(&s)?;
        boot.icount = true;
        boot.append = append.to_string();
        Ok(IcountBoot { boot, kernel })
    }

    /// Boots it once.
    pub fn run(&self, a: &Artifacts) -> Result<Outcome> {
        boot(&self.boot, a, &self.kernel, None, &mut |_| {})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_statuses_map_back_to_kernel_codes() {
        assert_eq!(ending(Arch::Riscv64, Some(0)), Ending::Kernel(0));
        assert_eq!(ending(Arch::Riscv64, Some(2)), Ending::Kernel(2));
        assert_eq!(ending(Arch::Riscv64, Some(3)), Ending::Kernel(3));
        assert_eq!(ending(Arch::Riscv64, Some(4)), Ending::Other(Some(4)));
        assert_eq!(ending(Arch::X86_64, Some(33)), Ending::Kernel(0));
        assert_eq!(ending(Arch::X86_64, Some(35)), Ending::Kernel(1));
        assert_eq!(ending(Arch::X86_64, Some(37)), Ending::Kernel(2));
        // A triple fault with -no-reboot exits 0 on x86_64: not the kernel's doing.
        assert_eq!(ending(Arch::X86_64, Some(0)), Ending::Other(Some(0)));
        assert_eq!(ending(Arch::X86_64, None), Ending::Other(None));
    }

    #[test]
    fn nics_are_hub_ports_where_the_manifest_places_them() {
        let text = "[system]\nmemory = \"64M\"\n[[system.disk]]\nname = \"d\"\nsize = \"1M\"\n\
                    bus = \"virtio\"\n[[system.nic]]\nname = \"a\"\n[[system.nic]]\n\
                    name = \"b\"\nmac = \"52:54:00:aa:bb:cc\"\n[[domain]]\nname = \"x\"\n\
                    app = \"hello\"\nmemory = { guaranteed = \"256K\" }\n";
        let boot = |arch, machine| {
            let m = manifest::parse_for("t.toml", text, &["hello"], machine).unwrap();
            let mut b = Boot::new(arch);
            b.nics = NicDevice::of_manifest(&m.nics).unwrap();
            b
        };
        let b = boot(Arch::Riscv64, manifest::Machine::RiscvVirt);
        let (netdevs, devices) = nic_args(b.arch, &b.nics, None);
        assert_eq!(netdevs, ["hubport,id=nic0,hubid=0", "hubport,id=nic1,hubid=0"]);
        assert_eq!(
            devices,
            [
                "virtio-net-device,netdev=nic0,mac=52:54:00:12:35:00,bus=virtio-mmio-bus.1",
                "virtio-net-device,netdev=nic1,mac=52:54:00:aa:bb:cc,bus=virtio-mmio-bus.2",
            ]
        );
        let mut x = boot(Arch::X86_64, manifest::Machine::Q35);
        let (_, devices) = nic_args(x.arch, &x.nics, None);
        assert_eq!(
            devices[1],
            "virtio-net-pci,netdev=nic1,mac=52:54:00:aa:bb:cc,addr=0x19,romfile="
        );
        // A cluster's node: its first NIC goes to the switch with the node's MAC.
        x.nic = Some(Nic { switch: "/t/sw1".into(), mac: Nic::mac_of(0) });
        let (netdevs, devices) = nic_args(x.arch, &x.nics, x.nic.as_ref());
        assert_eq!(netdevs, ["vde,id=nic0,sock=/t/sw1", "hubport,id=nic1,hubid=0"]);
        assert!(devices[0].starts_with("virtio-net-pci,netdev=nic0,mac=52:54:00:12:34:01,addr="));
    }

    #[test]
    fn command_lines_carry_the_boot_settings() {
        let a = Artifacts { arch: Arch::Riscv64, kernel: "k".into(), firmware: Some("fw".into()) };
        let mut b = Boot::new(Arch::Riscv64);
        b.memory = 256;
        b.icount = true;
        b.append = "test=all".into();
        let args: Vec<String> =
            b.command(&a).get_args().map(|s| s.to_string_lossy().into_owned()).collect();
        let joined = args.join(" ");
        assert!(joined.contains("-bios fw"), "{joined}");
        assert!(joined.contains("-m 256M"), "{joined}");
        assert!(joined.contains("-icount shift=0,sleep=off"), "{joined}");
        assert!(joined.contains("-append test=all"), "{joined}");
        b.bios = Bios::Opensbi;
        let joined: Vec<String> =
            b.command(&a).get_args().map(|s| s.to_string_lossy().into_owned()).collect();
        assert!(joined.join(" ").contains("-bios default"));
        let x = Boot::new(Arch::X86_64);
        let joined: Vec<String> =
            x.command(&a).get_args().map(|s| s.to_string_lossy().into_owned()).collect();
        assert!(joined.join(" ").contains("isa-debug-exit,iobase=0xf4,iosize=0x04"));
        assert!(joined.join(" ").contains("-machine q35 -cpu max"));
    }

    #[test]
    fn a_machine_without_nics_plugs_an_unclaimed_card_into_its_vde_switch() {
        let a = Artifacts { arch: Arch::Riscv64, kernel: "k".into(), firmware: None };
        let args = |b: &Boot| {
            b.command(&a).get_args().map(|s| s.to_string_lossy().into_owned()).collect::<Vec<_>>()
        };
        let mut b = Boot::new(Arch::Riscv64);
        let joined = args(&b).join(" ");
        assert!(joined.contains("-nic none") && !joined.contains("-netdev"), "{joined}");
        b.devices = vec!["virtio-blk-device,drive=disk0".into()];
        b.nic = Some(Nic { switch: "/t/sw0".into(), mac: Nic::mac_of(2) });
        let joined = args(&b).join(" ");
        assert!(
            joined.ends_with(
                "-device virtio-blk-device,drive=disk0 -netdev vde,id=nic0,sock=/t/sw0 \
                 -device virtio-net-device,netdev=nic0,mac=52:54:00:12:34:03"
            ),
            "{joined}"
        );
        let mut x = Boot::new(Arch::X86_64);
        x.nic = Some(Nic { switch: "/t/sw1".into(), mac: Nic::mac_of(0) });
        let joined = args(&x).join(" ");
        assert!(joined.contains("-device virtio-net-pci,netdev=nic0,mac=52:54:00:12:34:01"));
    }

    #[test]
    fn nics_on_virtual_time_are_asked_for_by_the_boot() {
        let a = Artifacts { arch: Arch::X86_64, kernel: "k".into(), firmware: None };
        let mut b = Boot::new(Arch::X86_64);
        let joined = |b: &Boot| {
            b.command(&a).get_args().map(|s| s.to_string_lossy()).collect::<Vec<_>>().join(" ")
        };
        assert!(!joined(&b).contains("-global"), "{}", joined(&b));
        b.nics_on_virtual_time = true;
        assert!(
            joined(&b).contains(
                "-global virtio-net-device.tx=timer -global virtio-net-device.x-txtimer=1000 \
                 -global virtio-net-pci.ioeventfd=off"
            ),
            "{}",
            joined(&b)
        );
    }

    #[test]
    fn faulty_disks_open_each_image_through_blkdebug_throttled() {
        let mut faults = DiskFaults { rules: "/t/bad.blkdebug".into(), iops: None };
        assert_eq!(
            faults.drive("file=/t/d.img,if=none,format=raw,id=disk0"),
            "file=blkdebug:/t/bad.blkdebug:/t/d.img,if=none,format=raw,id=disk0"
        );
        assert_eq!(
            faults.drive("if=none,file=/t/d.img,id=disk0"),
            "if=none,file=blkdebug:/t/bad.blkdebug:/t/d.img,id=disk0"
        );
        // A `file=` inside another option's name is no image.
        assert_eq!(faults.drive("if=none,xfile=/t/d.img"), "if=none,xfile=/t/d.img");
        faults.iops = Some(1000);
        let a = Artifacts { arch: Arch::X86_64, kernel: "k".into(), firmware: None };
        let mut b = Boot::new(Arch::X86_64);
        b.drives = vec!["file=/t/d.img,if=none,id=disk0".into()];
        b.disk_faults = Some(faults);
        let args: Vec<String> =
            b.command(&a).get_args().map(|s| s.to_string_lossy().into_owned()).collect();
        assert!(
            args.join(" ").contains(
                "-drive file=blkdebug:/t/bad.blkdebug:/t/d.img,if=none,id=disk0,throttling.iops-total=1000"
            ),
            "{args:?}"
        );
    }
}
