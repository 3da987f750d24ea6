//! The disks of a manifest (`[[system.disk]]`): raw images under `target/disks/<arch>/`, created for
//! each run and attached to QEMU where the manifest's placement says
//! ([`manifest::Machine::disk_address`]), and read back on the host after the run.
//!
//! An image is `target/disks/<manifest stem>-<disk name>.img`, zero-filled and sparse
//! (`set_len`), made fresh for every boot unless kept (`cargo xtask run --keep-disk`), when an
//! existing image of the right size is used as it is (a missing one is an error then, not a
//! fresh blank disk). Every drive reports the host's read and write errors to the guest
//! (`werror=report,rerror=report`): with QEMU's default, a write the host refuses for want of
//! space (`ENOSPC`) would pause the machine, and the run would hang without a word. On RISC-V `virt` a virtio disk `i` is a
//! `virtio-blk-device` on `virtio-mmio-bus.i` (the transport at `0x1000_1000 + i * 0x1000`);
//! on x86_64 `q35` disk `i` is at PCI `00:(0x10 + i).0`: a `virtio-blk-pci`, or an AHCI
//! controller of its own with the disk on port 0.
//!
//! A test manifest may have QEMU fail some of a disk's transfers: a line
//! `# blkdebug: DISK FILE` among the comments at its top attaches disk `DISK` through QEMU's
//! `blkdebug` driver with the rules in `FILE` (relative to the manifest; `[inject-error]`
//! sections, [`inject_faults`]), so the guest's driver sees the device fail those requests.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail, ensure};
use manifest::{DeviceAddress, DiskBus, Manifest, SECTOR_SIZE};

use tool_base::util;

/// A disk image made for a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiskImage {
    /// The disk's name in the manifest.
    pub name: String,
    /// The raw image file.
    pub path: PathBuf,
    /// Its size in bytes.
    pub size: u64,
    /// Its bus.
    pub bus: DiskBus,
    /// Where it is attached (the manifest is placed for the machine).
    pub at: DeviceAddress,
    /// QEMU `blkdebug` rules its transfers go through, failing those they say.
    pub blkdebug: Option<PathBuf>,
}

/// The directory of the disk images of boots on `arch`: `target/disks/<arch>/` (so that the
/// two architectures' boots of one manifest, which the tests run at once, never share an
/// image).
pub fn dir(arch: tool_base::Arch) -> PathBuf {
    util::target_dir().join("disks").join(arch.name())
}

/// The image of disk `disk` of the manifest at `manifest` in `dir`:
/// `<dir>/<manifest stem>-<disk>.img`.
pub fn image_path(dir: &Path, manifest: &Path, disk: &str) -> PathBuf {
    let stem = manifest.file_stem().map_or("manifest".into(), |s| s.to_string_lossy());
    dir.join(format!("{stem}-{disk}.img"))
}

/// Makes the image of every disk of `m` (placed for a machine) in `dir`, named after the
/// manifest file `source`: zero-filled and sparse, fresh unless `keep`, when the image an
/// earlier run left must be there at the disk's size (one missing or of another size is an
/// error, not made or resized; so is `keep` for a manifest without disks).
pub fn create(dir: &Path, source: &Path, m: &Manifest, keep: bool) -> Result<Vec<DiskImage>> {
    if m.disks.is_empty() {
        ensure!(!keep, "--keep-disk: {} has no disks to keep", source.display());
        return Ok(Vec::new());
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut out = Vec::with_capacity(m.disks.len());
    for d in &m.disks {
        let Some(at) = d.at else {
            bail!("disk {}: the manifest is not placed for a machine", d.name)
        };
        let path = image_path(dir, source, &d.name);
        let existing = std::fs::metadata(&path).ok().map(|meta| meta.len());
        match existing {
            None if keep => bail!(
                "{}: --keep-disk, but no earlier run left an image of disk {:?} there: run once \
                 without --keep-disk to make it",
                path.display(),
                d.name
            ),
            Some(len) if keep => ensure!(
                len == d.size,
                "{}: kept image is {} but disk {:?} is {} in the manifest: run without \
                 --keep-disk for a fresh image",
                path.display(),
                manifest::Bytes(len),
                d.name,
                manifest::Bytes(d.size)
            ),
            _ => {
                if existing.is_some() {
                    std::fs::remove_file(&path)
                        .with_context(|| format!("removing {}", path.display()))?;
                }
                let file =
                    File::create(&path).with_context(|| format!("creating {}", path.display()))?;
                file.set_len(d.size).with_context(|| format!("sizing {}", path.display()))?;
            }
        }
        out.push(DiskImage {
            name: d.name.clone(),
            path,
            size: d.size,
            bus: d.bus,
            at,
            blkdebug: None,
        });
    }
    Ok(out)
}

/// Attaches the disks that the comments at the top of the manifest `text` (read from
/// `manifest`) name in lines `# blkdebug: DISK FILE` through QEMU's `blkdebug` driver with the
/// rules in `FILE`, relative to the manifest. A disk the manifest does not have, or a file
/// that is not there, is an error.
pub fn inject_faults(images: &mut [DiskImage], manifest: &Path, text: &str) -> Result<()> {
    let comments = text.lines().take_while(|l| l.trim().is_empty() || l.starts_with('#'));
    for line in comments.filter_map(|l| l.strip_prefix("# blkdebug:")) {
        let mut words = line.split_whitespace();
        let (Some(disk), Some(file), None) = (words.next(), words.next(), words.next()) else {
            bail!("{}: `# blkdebug: DISK FILE`, not `{line}`", manifest.display())
        };
        let rules = manifest.parent().unwrap_or(Path::new(".")).join(file);
        ensure!(
            rules.is_file(),
            "{}: no blkdebug rules at {}",
            manifest.display(),
            rules.display()
        );
        let Some(image) = images.iter_mut().find(|d| d.name == disk) else {
            bail!(
                "{}: blkdebug rules for disk {disk:?}, which it does not have",
                manifest.display()
            )
        };
        image.blkdebug = Some(rules);
    }
    Ok(())
}

/// QEMU hands the host's read and write errors to the guest instead of pausing the machine,
/// which it does by default on `ENOSPC` and which would leave a run hanging.
const REPORT_ERRORS: &str = "werror=report,rerror=report";

/// The `-drive` argument of `d` as drive `id`: its raw image, through `blkdebug` if it has
/// rules, reporting the host's errors ([`REPORT_ERRORS`]).
fn drive_arg(d: &DiskImage, id: &str) -> String {
    match &d.blkdebug {
        None => format!("file={},if=none,format=raw,id={id},{REPORT_ERRORS}", d.path.display()),
        Some(rules) => format!(
            "if=none,format=raw,id={id},{REPORT_ERRORS},file.driver=blkdebug,file.config={},\
             file.image.filename={}",
            rules.display(),
            d.path.display()
        ),
    }
}

/// The QEMU arguments that attach `images`: `(-drive arguments, -device arguments)`. Drive
/// `i` is `disk<i>`, and hands the host's read and write errors to the guest
/// (`werror=report,rerror=report`) instead of pausing the machine, which QEMU does by default
/// on `ENOSPC` and which would leave a run hanging; every device is at the address the
/// manifest gives it.
pub fn qemu_args(images: &[DiskImage]) -> Result<(Vec<String>, Vec<String>)> {
    let mut drives = Vec::new();
    let mut devices = Vec::new();
    for (i, d) in images.iter().enumerate() {
        let id = format!("disk{i}");
        drives.push(drive_arg(d, &id));
        match (d.bus, d.at) {
            (DiskBus::Virtio, DeviceAddress::Mmio { unit }) => {
                devices.push(format!("virtio-blk-device,drive={id},bus=virtio-mmio-bus.{unit}"));
            }
            (DiskBus::Virtio, DeviceAddress::Pci { bus: 0, slot, function: 0 }) => {
                devices.push(format!("virtio-blk-pci,drive={id},addr={slot:#x}"));
            }
            (DiskBus::Ahci, DeviceAddress::Pci { bus: 0, slot, function: 0 }) => {
                devices.push(format!("ahci,id=ahci{i},addr={slot:#x}"));
                devices.push(format!("ide-hd,drive={id},bus=ahci{i}.0"));
            }
            (bus, at) => bail!("disk {}: cannot attach a {} disk at {at:?}", d.name, bus.name()),
        }
    }
    Ok((drives, devices))
}

/// Reads `count` sectors of 512 bytes from sector `lba` of the raw image at `path`: for checks
/// on the host after a run (the image of a manifest's disk is [`image_path`] in [`dir`], or
/// [`DiskImage::path`] of [`crate::system::System::disks`]).
pub fn read_sectors(path: &Path, lba: u64, count: u64) -> Result<Vec<u8>> {
    let mut f = OpenOptions::new()
        .read(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    let len = f.metadata()?.len();
    let end = lba.checked_add(count).and_then(|e| e.checked_mul(SECTOR_SIZE));
    ensure!(
        end.is_some_and(|e| e <= len),
        "{}: sectors {lba}..{lba}+{count} are beyond the image's {len} bytes",
        path.display()
    );
    f.seek(SeekFrom::Start(lba * SECTOR_SIZE))?;
    let mut buf = vec![0; (count * SECTOR_SIZE) as usize];
    f.read_exact(&mut buf).with_context(|| format!("reading {}", path.display()))?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use manifest::Machine;
    use std::io::Write;

    const TEXT: &str = r#"
[system]
memory = "64M"

[[system.disk]]
name = "data"
size = "2M"
bus = "virtio"

[[system.disk]]
name = "sata"
size = "1M"
bus = "ahci"

[[domain]]
name = "blk"
app = "hello"
memory = { guaranteed = "256K" }
driver = true
devices = [{ disk = "data" }]
"#;

    fn placed(text: &str, machine: Machine) -> Manifest {
        manifest::parse_for("t.toml", text, &["hello"], machine).unwrap()
    }

    fn test_dir(name: &str) -> PathBuf {
        let dir = util::target_dir().join("disks-test").join(name);
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn qemu_arguments_put_each_disk_where_the_manifest_says() {
        let m = placed(TEXT, Machine::Q35);
        let dir = test_dir("args");
        let images = create(&dir, Path::new("tests/manifests/disks.toml"), &m, false).unwrap();
        let (drives, devices) = qemu_args(&images).unwrap();
        let data = dir.join("disks-data.img");
        let sata = dir.join("disks-sata.img");
        assert_eq!(
            drives,
            [
                format!(
                    "file={},if=none,format=raw,id=disk0,werror=report,rerror=report",
                    data.display()
                ),
                format!(
                    "file={},if=none,format=raw,id=disk1,werror=report,rerror=report",
                    sata.display()
                ),
            ]
        );
        assert_eq!(
            devices,
            [
                "virtio-blk-pci,drive=disk0,addr=0x10",
                "ahci,id=ahci1,addr=0x11",
                "ide-hd,drive=disk1,bus=ahci1.0",
            ]
        );
        let riscv = TEXT.replace("\"ahci\"", "\"virtio\"");
        let m = placed(&riscv, Machine::RiscvVirt);
        let images = create(&dir, Path::new("disks.toml"), &m, false).unwrap();
        let (_, devices) = qemu_args(&images).unwrap();
        assert_eq!(
            devices,
            [
                "virtio-blk-device,drive=disk0,bus=virtio-mmio-bus.0",
                "virtio-blk-device,drive=disk1,bus=virtio-mmio-bus.1",
            ]
        );
        // Disks a manifest names in `# blkdebug: DISK FILE` go through QEMU's blkdebug.
        let mut images = create(&dir, Path::new("disks.toml"), &m, false).unwrap();
        let rules = dir.join("errors.blkdebug");
        std::fs::write(&rules, "[inject-error]\n").unwrap();
        let manifest = dir.join("disks.toml");
        inject_faults(&mut images, &manifest, "# blkdebug: sata errors.blkdebug\n").unwrap();
        let (drives, _) = qemu_args(&images).unwrap();
        assert_eq!(
            drives[0],
            format!(
                "file={},if=none,format=raw,id=disk0,werror=report,rerror=report",
                images[0].path.display()
            )
        );
        assert_eq!(
            drives[1],
            format!(
                "if=none,format=raw,id=disk1,werror=report,rerror=report,file.driver=blkdebug,\
                 file.config={},file.image.filename={}",
                rules.display(),
                images[1].path.display()
            )
        );
        for bad in
            ["# blkdebug: other errors.blkdebug", "# blkdebug: sata none", "# blkdebug: sata"]
        {
            assert!(inject_faults(&mut images, &manifest, bad).is_err(), "{bad}");
        }
        // A manifest not placed has nothing to attach.
        let unplaced = manifest::parse("t.toml", TEXT, &["hello"]).unwrap();
        assert!(create(&dir, Path::new("x.toml"), &unplaced, false).is_err());
    }

    #[test]
    fn images_are_fresh_unless_kept() {
        let m = placed(TEXT, Machine::Q35);
        let dir = test_dir("keep");
        let source = Path::new("manifests/m.toml");
        // Nothing to keep before a first run: an error naming the image, and no image made.
        let e = create(&dir, source, &m, true).unwrap_err().to_string();
        let want = format!(
            "{}: --keep-disk, but no earlier run left an image of disk \"data\" there",
            dir.join("m-data.img").display()
        );
        assert!(e.starts_with(&want), "{e}");
        assert!(!dir.join("m-data.img").exists() && !dir.join("m-sata.img").exists());
        // Nor for a manifest without disks.
        let diskless = "[system]\nmemory = \"64M\"\n\n[[domain]]\nname = \"a\"\napp = \"hello\"\n\
                        memory = { guaranteed = \"256K\" }\n";
        let diskless = placed(diskless, Machine::Q35);
        let e = create(&dir, source, &diskless, true).unwrap_err().to_string();
        assert_eq!(e, "--keep-disk: manifests/m.toml has no disks to keep");
        assert!(create(&dir, source, &diskless, false).unwrap().is_empty());
        let images = create(&dir, source, &m, false).unwrap();
        assert_eq!(images[0].path, dir.join("m-data.img"));
        assert_eq!(std::fs::metadata(&images[0].path).unwrap().len(), 2 << 20);
        assert_eq!(read_sectors(&images[1].path, 0, 2048).unwrap(), vec![0; 1 << 20]);
        // Something written into it (as a run would)...
        let mut f = OpenOptions::new().write(true).open(&images[0].path).unwrap();
        f.seek(SeekFrom::Start(512 * 7)).unwrap();
        f.write_all(b"tessera").unwrap();
        drop(f);
        assert_eq!(&read_sectors(&images[0].path, 7, 1).unwrap()[..7], b"tessera");
        // ...is kept with `keep`...
        let kept = create(&dir, source, &m, true).unwrap();
        assert_eq!(kept, images);
        assert_eq!(&read_sectors(&kept[0].path, 7, 1).unwrap()[..7], b"tessera");
        // ...and gone in a fresh image.
        create(&dir, source, &m, false).unwrap();
        assert_eq!(read_sectors(&images[0].path, 7, 1).unwrap(), vec![0; 512]);
        // A kept image of another size is refused, not resized.
        let bigger = placed(&TEXT.replace("\"2M\"", "\"4M\""), Machine::Q35);
        let e = create(&dir, source, &bigger, true).unwrap_err().to_string();
        assert!(e.contains("kept image is 2M but disk \"data\" is 4M"), "{e}");
        // Reading beyond the end is an error.
        assert!(read_sectors(&images[1].path, 2047, 2).is_err());
    }
}
