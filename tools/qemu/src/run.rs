//! `cargo xtask run`: build, boot a manifest (or the kernel alone) in QEMU, with no timeout
//! unless `--timeout` sets one, show the decoded log live, and end with an exit status that
//! says whether the kernel and every domain did what they should, or that the run had not
//! ended in time ([`verdict`]).

pub mod verdict;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};

use crate::log::{Kernel, LogLine};
use crate::qemu::{Boot, Ending, boot};
use crate::{cpu_trace, disk_trace};
use system_image::system::{self, Spoil, System};
use tool_base::{artifacts, setup};

/// What `cargo xtask run` boots besides the [`Boot`] settings, and what it shows.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// The manifest whose domains to run.
    pub manifest: Option<PathBuf>,
    /// Guest memory in MiB (default: the manifest's, else 128).
    pub memory: Option<u32>,
    /// Also show the bytes the decoder could not read.
    pub show_raw: bool,
    /// Exit 0 even when a domain fails that was not expected to.
    pub allow_failures: bool,
    /// How to build the apps.
    pub apps: system_image::apps::Build,
    /// What to do with the kernel's per-period CPU records.
    pub cpu: cpu_trace::Options,
    /// What to do with the block driver's per-period disk records.
    pub disk: disk_trace::Options,
    /// What to do with the network driver's per-period link-time records
    /// ([`disk_trace::NET`]).
    pub net: disk_trace::Options,
    /// Write the run's timeline here, in the Chrome trace event format ([`crate::timeline`]).
    pub trace: Option<PathBuf>,
    /// Keep the manifest's disk images from an earlier run rather than making them fresh.
    pub keep_disk: bool,
    /// Stop QEMU when the run has not ended after this long (of the host's clock); `None`:
    /// never.
    pub timeout: Option<Duration>,
}

/// `cargo xtask run`: build, boot `b` as `opts` says (until `opts.timeout`, if any), show the
/// log live; returns the kernel's exit code, or the statuses of [`verdict`].
pub fn run_interactive(mut b: Boot, opts: RunOptions) -> Result<u8> {
    opts.cpu.check()?;
    opts.disk.check()?;
    opts.net.check()?;
    if let Some(path) = &opts.trace
        && !path.extension().is_some_and(|e| e.eq_ignore_ascii_case("json"))
    {
        anyhow::bail!("--trace {}: the timeline is JSON; name the file *.json", path.display());
    }
    setup::ensure(setup::Needs { gdb: b.gdb, qemu: true, dtc: false, vde: false })?;
    let system = match &opts.manifest {
        Some(path) => {
            Some(system::prepare_with(path, Spoil::Nothing, opts.apps, b.arch, opts.keep_disk)?)
        }
        None => None,
    };
    if let Some(s) = &system {
        b.attach(s)?;
        for d in &s.disks {
            println!(
                "run: disk {} ({}, {}): {}",
                d.name,
                manifest::Bytes(d.size),
                d.bus.name(),
                d.path.display()
            );
        }
        for n in &s.manifest.nics {
            println!("run: NIC {} ({}): a port of QEMU's hub 0", n.name, manifest::Mac(n.mac));
        }
    }
    b.memory = opts.memory.or(system.as_ref().map(System::memory_mib)).unwrap_or(128);
    let a = artifacts::build(b.arch)?;
    let mut kernel = Kernel::load(&a.kernel)?;
    if let Some(s) = &system {
        kernel.add_instances(&s.instances)?;
    }
    b.timeout = opts.timeout.unwrap_or(Duration::MAX);
    if b.icount {
        println!(
            "run: deterministic virtual time (-icount shift=0,sleep=off): the guest's clock counts its instructions, one a nanosecond, whatever the host does; --realtime runs it on the host's clock"
        );
    } else {
        println!(
            "run: on the host's clock (--realtime): a busy host stalls the guest, and CPU figures then wobble"
        );
    }
    if b.gdb {
        crate::gdb::prepare(&b, &a, system.as_ref())?;
    }
    let mut cpu = (opts.cpu.wanted() || opts.trace.is_some()).then(|| {
        b.append = cpu_trace::with_trace(&b.append);
        cpu_trace::Recorder::new(opts.cpu.clone(), system.as_ref().map(|s| &s.manifest))
    });
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed))
        .context("installing the Ctrl-C handler")?;
    // The timeline's many records of who ran, activations, events and disk requests are left
    // out of the log shown (they are in the timeline).
    let mut show = |line: &LogLine| {
        if (opts.show_raw || line.level != "RAW") && !crate::timeline::hidden(line) {
            println!("{line}");
        }
    };
    let out = boot(&b, &a, &kernel, Some(&stop), &mut |line| match cpu.as_mut() {
        Some(c) => c.feed(line, &mut show),
        None => show(line),
    })?;
    if let Some(c) = cpu.as_mut() {
        c.finish(&mut show);
    }
    if !out.stderr.trim().is_empty() {
        eprintln!("{}", out.stderr.trim_end());
    }
    let code = match out.ending {
        Ending::Kernel(code) => {
            eprintln!("kernel exited with code {code} after {:.2?}", out.wall);
            let failed =
                verdict::unexpected_failures(&out.log, system.as_ref().map(|s| &s.manifest));
            if !b.icount {
                for (domain, n) in verdict::late_periods(&out.log) {
                    eprintln!(
                        "warning: the host stalled the guest: {n} of {domain}'s periods ended later than their slice allows, so no schedule could keep its contract; run without --realtime for deterministic virtual time"
                    );
                }
            }
            if code == 0 && !failed.is_empty() {
                eprintln!("domains failed: {}", failed.join(", "));
                if opts.allow_failures {
                    eprintln!("(--allow-failures: exiting 0)");
                    0
                } else {
                    eprintln!(
                        "exiting with status {} (a domain failed; mark expected failures with `expect_failure = true` in the manifest, or pass --allow-failures)",
                        verdict::DOMAIN_FAILED
                    );
                    verdict::DOMAIN_FAILED
                }
            } else {
                code
            }
        }
        Ending::Interrupted => {
            eprintln!("stopped (Ctrl-C)");
            130
        }
        Ending::Timeout => {
            eprintln!(
                "run: timed out: no end after {} s (--timeout); QEMU stopped, exiting with status {}",
                b.timeout.as_secs(),
                verdict::TIMED_OUT
            );
            verdict::TIMED_OUT
        }
        Ending::Other(status) => {
            eprintln!("QEMU exited with status {status:?} without a kernel exit code");
            3
        }
    };
    let source = opts.manifest.as_deref().and_then(Path::file_name);
    let title = |what: &str| match source {
        Some(name) => format!("{what} per period: {}", name.to_string_lossy()),
        None => format!("{what} per period"),
    };
    if let Some(c) = cpu.as_ref().filter(|_| opts.cpu.wanted()) {
        c.save(&title("CPU"))?;
    }
    if let Some(path) = &opts.trace {
        let domains = system
            .as_ref()
            .map(|s| cpu_trace::DomainInfo::from_manifest(&s.manifest))
            .unwrap_or_default();
        let n = crate::timeline::save(path, &domains, &out.log)?;
        eprintln!(
            "trace: {n} events written to {} (open it in https://ui.perfetto.dev or chrome://tracing)",
            path.display()
        );
    }
    if opts.disk.wanted() {
        opts.disk.save(&out.log, &title("disk time"))?;
    }
    if opts.net.wanted() {
        opts.net.save(&out.log, &title("link time"))?;
    }
    Ok(code)
}
