//! The manifest of each run of `bench disk`, generated from its description
//! ([`super::experiments::Run`]) for a device: one disk on the Deskstar model, the driver domain
//! with the run's `--scheduler` (and `--no-anticipation`), and a `diskread` client domain per
//! reader, with its channels and, if it has one, its disk contract.

use super::experiments::{Client, Pattern, READ_BYTES, Run, client_name};
use tool_base::Arch;

/// A device the driver domain drives: its key, its manifest bus, its app.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Device {
    /// Its key in file names and headings.
    pub key: &'static str,
    /// The disk's `bus`.
    pub bus: &'static str,
    /// The driver domain's app.
    pub app: &'static str,
}

/// The devices: virtio-blk on both architectures, AHCI on x86_64.
pub const DEVICES: [Device; 2] = [
    Device { key: "virtio", bus: "virtio", app: "virtio-blk" },
    Device { key: "ahci", bus: "ahci", app: "ahci" },
];

impl Device {
    /// Whether `arch` has it.
    pub fn on(&self, arch: Arch) -> bool {
        self.bus != "ahci" || arch == Arch::X86_64
    }
}

/// The disk model's name in the manifest.
pub const MODEL: &str = "deskstar-34gxp";

/// The disk's size in bytes: the Deskstar 34GXP's own capacity (the model's), so that
/// distances in GB are the paper's. Images are sparse.
pub fn disk_bytes() -> u64 {
    disk_model::DiskParams::deskstar_34gxp().capacity * 512
}

/// `diskread`'s arguments for client `i`, reading for `duration_ms`. The manifest takes at
/// most 16 arguments a domain: defaults are left out (`--start 0`, `--think 0`, `--depth 1`,
/// and the seed of a pattern that draws nothing).
pub fn client_args(i: usize, c: &Client, duration_ms: u64) -> Vec<String> {
    let mut a: Vec<String> = vec!["--channel".into(), client_name(i), "--pattern".into()];
    let (pattern, span) = match c.pattern {
        Pattern::Sequential => ("sequential", None),
        Pattern::Alternate => ("alternate", None),
        Pattern::Random { span } => ("random", Some(span)),
        Pattern::Bursts { .. } => ("bursts", None),
        Pattern::Hog { span } => ("hog", Some(span)),
    };
    a.push(pattern.into());
    if c.start != 0 {
        a.extend(["--start".into(), c.start.to_string()]);
    }
    if let Some(span) = span {
        a.extend(["--span".into(), span.to_string()]);
    }
    a.extend(["--size".into(), READ_BYTES.to_string()]);
    if c.think_us != 0 {
        a.extend(["--think".into(), c.think_us.to_string()]);
    }
    if let Pattern::Bursts { burst, pause_us } = c.pattern {
        a.extend(["--burst".into(), burst.to_string(), "--pause".into(), pause_us.to_string()]);
    }
    a.extend(["--duration".into(), duration_ms.to_string()]);
    if span.is_some() {
        a.extend(["--seed".into(), (i + 1).to_string()]);
    }
    a
}

/// A TOML array of strings.
fn array(items: &[String]) -> String {
    items.iter().map(|a| format!("{a:?}")).collect::<Vec<_>>().join(", ")
}

/// The manifest of `run` on `dev`.
pub fn manifest(run: &Run, dev: &Device) -> String {
    let mut driver_args = vec!["--scheduler".to_string(), run.scheduler.name().to_string()];
    if !run.anticipation {
        driver_args.push("--no-anticipation".into());
    }
    let machine = if dev.bus == "ahci" { "# machine: x86_64\n" } else { "" };
    let mut t = format!(
        "# `cargo xtask bench disk`: run {key} on {dev} ({sched}, anticipation {on}), {n} \
         reader(s) for {ms} ms.\n{machine}\
         [system]\nmemory = \"128M\"\n\n\
         [[system.disk]]\nname = \"data\"\nsize = \"{size}\"\nbus = \"{bus}\"\nmodel = \"{MODEL}\"\n\n\
         [[domain]]\nname = \"blk\"\napp = \"{app}\"\nargs = [{args}]\n\
         memory = {{ guaranteed = \"8M\" }}\n\
         cpu = {{ period = \"10ms\", slice = \"3ms\", extra = true, latency = \"100us\" }}\n\
         driver = true\ndevices = [{{ disk = \"data\" }}]\n",
        key = run.key,
        dev = dev.key,
        sched = run.scheduler.name(),
        on = if run.anticipation { "on" } else { "off" },
        n = run.clients.len(),
        ms = run.duration_ms,
        size = disk_bytes(),
        bus = dev.bus,
        app = dev.app,
        args = array(&driver_args),
    );
    for (i, c) in run.clients.iter().enumerate() {
        let name = client_name(i);
        // Eight readers and the driver fit the CPU's admission: 5% each, slack beyond.
        t.push_str(&format!(
            "\n[[domain]]\nname = \"{name}\"\napp = \"diskread\"\nargs = [{}]\n\
             memory = {{ guaranteed = \"2M\" }}\n\
             cpu = {{ period = \"10ms\", slice = \"500us\", extra = true }}\n",
            array(&client_args(i, c, run.duration_ms))
        ));
        if let Some(k) = c.contract {
            t.push_str(&format!(
                "disk = {{ period = \"{}ms\", slice = \"{}ms\", extra = {}, latency = \"{}ms\" }}\n",
                k.period_ms, k.slice_ms, k.extra, k.latency_ms
            ));
        }
    }
    for i in 0..run.clients.len() {
        let name = client_name(i);
        t.push_str(&format!(
            "\n[[channel]]\nname = \"{name}-req\"\nfrom = \"{name}\"\nto = \"blk\"\n\n\
             [[channel]]\nname = \"{name}-resp\"\nfrom = \"blk\"\nto = \"{name}\"\n"
        ));
    }
    t
}

/// The manifest's path relative to the workspace.
pub fn path(run: &Run, dev: &Device) -> String {
    format!("target/bench/disk/manifests/{}-{}.toml", dev.key, run.key)
}

#[cfg(test)]
mod tests {
    use super::super::experiments::{Size, plan};
    use super::*;

    #[test]
    fn every_manifest_parses_with_its_model_and_contracts() {
        let known = ["virtio-blk", "ahci", "diskread"];
        let ms = |ms: u64| ms * 1_000_000;
        let (runs, _) = plan(Size::Full);
        for dev in &DEVICES {
            let machine = if dev.bus == "ahci" {
                manifest::Machine::Q35
            } else {
                manifest::Machine::RiscvVirt
            };
            for run in runs.iter().filter(|r| !r.host_only) {
                let text = manifest(run, dev);
                let m = manifest::parse_for(&path(run, dev), &text, &known, machine)
                    .unwrap_or_else(|e| panic!("{}: {e}\n{text}", run.key));
                assert_eq!(m.domains.len(), run.clients.len() + 1, "{}", run.key);
                // The one disk, on the model by its manifest name.
                assert_eq!(m.disks.len(), 1, "{}", run.key);
                assert_eq!(m.disks[0].model.map(|d| d.name()), Some(MODEL), "{}", run.key);
                assert_eq!(m.disks[0].size, disk_bytes(), "{}", run.key);
                // The driver has no disk contract; each client the run's, to the nanosecond.
                assert_eq!(m.domains[0].disk, None, "{}", run.key);
                for (c, d) in run.clients.iter().zip(&m.domains[1..]) {
                    let want = c.contract.map(|k| manifest::CpuSpec {
                        period_ns: ms(k.period_ms),
                        slice_ns: ms(k.slice_ms),
                        extra: k.extra,
                        latency_ns: ms(k.latency_ms),
                    });
                    assert_eq!(d.disk, want, "{}: {}", run.key, d.name);
                }
                assert_eq!(text.contains("--no-anticipation"), !run.anticipation, "{}", run.key);
            }
        }
    }

    #[test]
    fn the_disk_is_the_drives_size_and_a_client_says_what_it_reads() {
        let gb = disk_bytes() as f64 / 1e9;
        assert!((34.0..34.5).contains(&gb), "{gb} GB");
        assert!(manifest::parse_size(&disk_bytes().to_string()).is_ok());
        let c = Client {
            pattern: Pattern::Bursts { burst: 3, pause_us: 17_000 },
            start: 2_097_152,
            think_us: 0,
            contract: None,
        };
        assert_eq!(
            client_args(1, &c, 3000).join(" "),
            "--channel r1 --pattern bursts --start 2097152 --size 65536 --burst 3 --pause 17000 \
             --duration 3000"
        );
        let hog = Client { pattern: Pattern::Hog { span: 64 }, ..c };
        assert!(
            client_args(0, &hog, 10).join(" ").contains("--pattern hog --start 2097152 --span 64")
        );
    }
}
