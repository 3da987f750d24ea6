//! `cargo xtask test`: every check the project has, with one verdict.
//!
//! Order: formatting and clippy (warnings are errors) for the host and both bare-metal targets
//! (the kernel, and libtessera with the apps), the userland of each architecture built and
//! packed without booting it, the book built and its links checked, host unit tests (`cargo
//! test`), then the QEMU suites. Names are
//! namespaced (`host::...`, `qemu::<arch>::...`); each QEMU boot has a timeout and its log is
//! kept under `target/qemu-logs/` when it fails. The last line is
//! `N passed, N failed, N skipped`, where the skipped are the host tests marked `#[ignore]`
//! (a host test ignored only in debug builds, listed in [`RELEASE_TESTS`], runs in a release
//! build instead and counts as passed or failed).
//!
//! The QEMU tests are grouped by what they check (address spaces, domains, drivers, paging,
//! user manifests, runs of `cargo xtask run`, clusters of both architectures through `cargo
//! xtask cluster`, named `qemu::cluster::...`) in the modules of this crate; the CPU-contract
//! scenarios ([`sched`]) are shared with `cargo xtask bench sched`. Invariants: every test can
//! fail and checks from outside, through the kernel's decoded log and its typed records
//! (`qemu_run`); every boot is bounded by a timeout and by virtual time (`-icount`); a test's
//! name says its architecture, and its meaning does not depend on the order tests run in.

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::Result;

use qemu_run::expected::{self, Expected};
use qemu_run::log::{Kernel, LogLine};
use qemu_run::qemu::{self, Boot, DiskFaults, Ending, Outcome};
use system_image::system::{self, Spoil};
use tool_base::artifacts::{self, Artifacts};
use tool_base::{Arch, Bios, setup, util};

mod address_space;
mod cluster;
mod cluster_control;
mod cluster_moves;
mod cluster_remote;
mod domains;
mod drivers;
pub mod fuzz;
mod harness;
mod labs;
mod net;
mod paging;
mod remote;
mod run;
pub mod sched;
mod user;

use address_space::address_space_tests;
use domains::domain_tests;
use drivers::drivers_tests;
use harness::{QemuTest, expect_ending, expect_exit, expect_line, last_lines};
use net::net_tests;
use paging::paging_tests;
use remote::remote_tests;
use user::user_tests;

/// The test that builds and checks the book (`source_tree::book`).
const BOOK_TEST: &str = "host::book";

/// Results so far.
#[derive(Default)]
struct Tally {
    passed: usize,
    failed: Vec<String>,
    /// Tests that did not run: host tests marked `#[ignore]`.
    skipped: usize,
}

impl Tally {
    /// A test that did not run, and why.
    fn skip(&mut self, name: &str, why: &str) {
        self.skipped += 1;
        println!("test {name} ... skipped ({why})");
    }

    /// The closing line: `N passed, N failed, N skipped`.
    fn summary(&self) -> String {
        format!("{} passed, {} failed, {} skipped", self.passed, self.failed.len(), self.skipped)
    }

    fn record(&mut self, name: &str, result: Result<(), String>) {
        match result {
            Ok(()) => {
                self.passed += 1;
                println!("test {name} ... ok");
            }
            Err(why) => {
                println!("test {name} ... FAILED");
                for line in why.lines() {
                    println!("    {line}");
                }
                self.failed.push(name.to_string());
            }
        }
    }
}

/// Runs (or lists) every test whose name contains `filter`, of the architectures in `arches`
/// (all when empty; tests of the host alone always run); returns the process exit code.
pub fn run(filter: Option<&str>, list: bool, arches: &[Arch]) -> Result<u8> {
    setup::ensure(setup::Needs { gdb: false, qemu: true, dtc: true, vde: true })?;
    let wanted = |name: &str| filter.is_none_or(|f| name.contains(f));
    let arch_wanted = |arch: Arch| arches.is_empty() || arches.contains(&arch);
    let mut tally = Tally::default();

    // Static checks.
    // Userland is checked on its own: checked together with the kernel, features would unify
    // (defmt's `alloc`) and the apps would need an allocator.
    let mut userland_clippy =
        vec!["clippy", "--release", "-p", "libtessera", "-p", "blk_domain", "-p", "blk_client"];
    // The network domain's core and serving loop, which its driver domain links, and the
    // network client, built for the targets too.
    userland_clippy.extend(["-p", "net_stack", "-p", "net_server", "-p", "net_client"]);
    userland_clippy.extend(["-p", "virtio_hal"]);
    let app_specs: Vec<String> = system_image::apps::app_names()
        .iter()
        .map(|n| system_image::apps::package_spec(n))
        .collect();
    for app in &app_specs {
        userland_clippy.extend(["-p", app.as_str()]);
    }
    userland_clippy.extend(["--", "-D", "warnings"]);
    let static_checks: [(&str, Vec<&str>, Option<Arch>); 6] = [
        ("host::fmt", vec!["fmt", "--all", "--", "--check", "--color", "never"], None),
        ("host::clippy::host", vec!["clippy", "--all-targets", "--", "-D", "warnings"], None),
        (
            "host::clippy::riscv64",
            vec!["clippy", "--release", "-p", "kernel", "-p", "firmware", "--", "-D", "warnings"],
            Some(Arch::Riscv64),
        ),
        ("host::clippy::userland::riscv64", userland_clippy.clone(), Some(Arch::Riscv64)),
        (
            "host::clippy::x86_64",
            vec!["clippy", "--release", "-p", "kernel", "--", "-D", "warnings"],
            Some(Arch::X86_64),
        ),
        ("host::clippy::userland::x86_64", userland_clippy, Some(Arch::X86_64)),
    ];
    for (name, args, arch) in static_checks {
        if !wanted(name) || !arch.is_none_or(arch_wanted) {
            continue;
        }
        if list {
            println!("{name}");
            continue;
        }
        let (before, after) =
            args.split_at(args.iter().position(|a| *a == "--").unwrap_or(args.len()));
        let mut cmd = util::cargo();
        cmd.args(before);
        if let Some(arch) = arch {
            cmd.args(["--target", arch.target()]).env("DEFMT_LOG", "info");
        }
        cmd.args(after);
        tally.record(name, command_check(&mut cmd));
    }

    // Each architecture's userland, built and packed for every bootable manifest (also those no
    // QEMU test boots).
    for arch in [Arch::Riscv64, Arch::X86_64].into_iter().filter(|a| arch_wanted(*a)) {
        let name = format!("host::userland::{}", arch.name());
        if !wanted(&name) {
            continue;
        }
        if list {
            println!("{name}");
            continue;
        }
        tally.record(&name, system::check_userland(arch).map_err(|e| format!("{e:#}")));
    }

    // The book: docs/ built by mdBook (installed under $CARGO_HOME/tessera-tools when missing), every link
    // between its chapters and every include checked.
    if wanted(BOOK_TEST) {
        if list {
            println!("{BOOK_TEST}");
        } else {
            let built = source_tree::book::build_and_check();
            tally.record(BOOK_TEST, built.map(|_| ()).map_err(|e| format!("{e:#}")));
        }
    }

    // Host unit tests, package by package.
    let host_wanted = filter.is_none_or(|f| !f.starts_with("qemu"));
    for package in host_packages()?.into_iter().filter(|_| host_wanted) {
        unit_tests(&package, &wanted, list, &mut tally)?;
    }

    // QEMU suites.
    for arch in [Arch::Riscv64, Arch::X86_64] {
        let prefix = format!("qemu::{}::", arch.name());
        if !arch_wanted(arch) || !arch_may_match(arch, filter) {
            continue;
        }
        let a = match artifacts::build(arch) {
            Ok(a) => a,
            Err(e) => {
                tally.record(&format!("{prefix}build"), Err(format!("{e:#}")));
                continue;
            }
        };
        let kernel = Kernel::load(&a.kernel)?;
        let tests = qemu_tests(arch, &a, &kernel)?;
        for t in tests.into_iter().filter(|t| wanted(&t.name)) {
            if list {
                println!("{}", t.name);
                continue;
            }
            let result = run_qemu_test(&t, &a, &kernel);
            tally.record(&t.name, result);
        }
        kernel_tests(arch, &a, &kernel, &wanted, list, &mut tally)?;
        {
            sched_tests(&a, &wanted, list, &mut tally);
            for (name, test, allowed) in run::RUN_TESTS {
                let full = format!("{prefix}run::{name}");
                if !wanted(&full) {
                    continue;
                }
                if list {
                    println!("{full}");
                    continue;
                }
                let mut children = run::Children::new(arch);
                let own = test(&mut children);
                let boots: Vec<(&Outcome, Expected)> =
                    children.outcomes.iter().map(|o| (o, *allowed)).collect();
                tally.record(&full, expected::verdict(&full, own, &boots));
            }
        }
    }

    // Clusters: several nodes of both architectures, through `cargo xtask cluster`.
    let both = arch_wanted(Arch::Riscv64) && arch_wanted(Arch::X86_64);
    for (name, test) in cluster::CLUSTER_TESTS
        .iter()
        .chain(cluster_remote::TESTS)
        .chain(cluster_control::TESTS)
        .chain(cluster_moves::TESTS)
        .filter(|_| both)
    {
        let full = format!("qemu::cluster::{name}");
        if !wanted(&full) {
            continue;
        }
        if list {
            println!("{full}");
            continue;
        }
        tally.record(&full, test());
    }

    if list {
        return Ok(0);
    }
    if !tally.failed.is_empty() {
        println!("\nfailed:");
        for f in &tally.failed {
            println!("    {f}");
        }
        if tally.failed.iter().any(|f| f.starts_with("qemu::")) {
            println!("logs of failed boots: {}", qemu::log_dir().display());
        }
    }
    println!("{}", tally.summary());
    Ok(if tally.failed.is_empty() { 0 } else { 1 })
}

/// Whether `filter` could match some QEMU test of `arch` (their names are
/// `qemu::ARCH::...`), so that a filtered run does not build and boot what it will not test.
fn arch_may_match(arch: Arch, filter: Option<&str>) -> bool {
    let Some(f) = filter else { return true };
    let prefix = format!("qemu::{}::", arch.name());
    let other = [Arch::Riscv64, Arch::X86_64].into_iter().find(|a| *a != arch).unwrap();
    if f.starts_with("host") || f.contains(other.name()) {
        return false;
    }
    !f.starts_with("qemu::") || f.starts_with(&prefix) || prefix.starts_with(f)
}

fn command_check(cmd: &mut Command) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("could not start {cmd:?}: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    // Both streams: `cargo fmt --check` writes its diff to stdout, clippy to stderr.
    let mut why = format!("{cmd:?} exited with {}", out.status);
    for (name, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        if !bytes.iter().all(u8::is_ascii_whitespace) {
            why.push_str(&format!(
                "\n--- {name}:\n{}",
                last_lines(&String::from_utf8_lossy(bytes), 60)
            ));
        }
    }
    Err(why)
}

/// The packages with host unit tests: libtessera, pager (the pager's components), the kernel
/// core, every crate under `libs/`, every crate under `stretch_drivers/`, every crate under
/// `drivers/` (the portable halves of the device drivers) and every host tool crate under
/// `tools/`.
fn host_packages() -> Result<Vec<String>> {
    // libtessera's portable parts (argument block, print chunking) are tested on the host too;
    // xtask's own tests check its command line.
    let mut packages = ["libtessera", "pager", "kernel_core", "xtask"].map(String::from).to_vec();
    let mut libs: Vec<_> = std::fs::read_dir(util::root().join("libs"))?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("Cargo.toml").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    libs.sort();
    packages.extend(libs);
    // The stretch drivers and their interface (with its host mock of the kernel), then the
    // device drivers' portable crates and the host tools, by package name.
    for dir in ["stretch_drivers", "drivers", "tools"] {
        packages.extend(package_names(&util::root().join(dir))?);
    }
    Ok(packages)
}

/// The package names of the portable library crates in the directories under `dir`, sorted.
/// Driver domains (a `src/main.rs`) are bare-metal apps, and so is a library that opts out of
/// tests (`[lib]` with `test = false`, such as `drivers/blk_domain`): clippy of the apps covers
/// them.
fn package_names(dir: &std::path::Path) -> Result<Vec<String>> {
    let mut names: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .filter(|e| !e.path().join("src/main.rs").is_file())
        .filter_map(|e| std::fs::read_to_string(e.path().join("Cargo.toml")).ok())
        .filter(|toml| !toml.contains("[lib]\ntest = false"))
        .filter_map(|toml| {
            let line = toml.lines().find(|l| l.starts_with("name = "))?;
            Some(line.trim_start_matches("name = ").trim_matches('"').to_string())
        })
        .collect();
    names.sort();
    Ok(names)
}

/// Host tests too slow for a debug build (`#[cfg_attr(debug_assertions, ignore)]`), by package
/// and name: ignored by the debug run, they run in a release build instead
/// (`cargo test --release -p PACKAGE -- --exact NAME`) and count as passed or failed.
const RELEASE_TESTS: &[(&str, &str)] =
    &[("paging_programs", "matmul::tests::default_matches_the_reference")];

/// Each `test NAME ... VERDICT` line of libtest's output, as `(NAME, VERDICT)`.
fn libtest_results(stdout: &str) -> Vec<(&str, &str)> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("test ")?.rsplit_once(" ... "))
        .map(|(name, verdict)| (name.trim(), verdict.trim()))
        .collect()
}

/// Records one libtest verdict of the test `full` (`ignored`: skipped).
fn record_libtest(tally: &mut Tally, full: &str, verdict: &str) {
    match verdict {
        "ok" => tally.record(full, Ok(())),
        v if v.starts_with("ignored") => tally.skip(full, "ignored"),
        other => tally.record(full, Err(format!("libtest says `{other}`"))),
    }
}

/// Runs one package's unit tests and records each libtest result as `host::PACKAGE::TEST`; an
/// ignored test counts as skipped, unless it is one of [`RELEASE_TESTS`], which then runs in a
/// release build.
fn unit_tests(
    package: &str,
    wanted: &dyn Fn(&str) -> bool,
    list: bool,
    tally: &mut Tally,
) -> Result<()> {
    let prefix = format!("host::{package}::");
    let mut cmd = util::cargo();
    cmd.args(["test", "-p", package, "--"]);
    if list {
        cmd.args(["--list", "--format", "terse"]);
    }
    let out = cmd.stderr(Stdio::piped()).output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if list {
        for name in stdout.lines().filter_map(|l| l.strip_suffix(": test")) {
            let full = format!("{prefix}{name}");
            if wanted(&full) {
                println!("{full}");
            }
        }
        return Ok(());
    }
    let results = libtest_results(&stdout);
    let release: Vec<&str> =
        RELEASE_TESTS.iter().filter(|(p, _)| *p == package).map(|(_, n)| *n).collect();
    let mut in_release = Vec::new();
    for &(name, verdict) in &results {
        let full = format!("{prefix}{name}");
        if !wanted(&full) {
            continue;
        }
        if release.contains(&name) && verdict.starts_with("ignored") {
            in_release.push(name);
        } else {
            record_libtest(tally, &full, verdict);
        }
    }
    if !out.status.success() && results.is_empty() {
        let err = String::from_utf8_lossy(&out.stderr);
        tally.record(&format!("{prefix}build"), Err(last_lines(&err, 30)));
        return Ok(());
    }
    // A release-only test the debug run does not list is gone or renamed: the list is stale.
    for name in release.iter().filter(|n| !results.iter().any(|(r, _)| r == *n)) {
        let full = format!("{prefix}{name}");
        if wanted(&full) {
            tally.record(&full, Err("not among the package's tests (RELEASE_TESTS)".into()));
        }
    }
    if in_release.is_empty() {
        return Ok(());
    }
    let mut cmd = util::cargo();
    cmd.args(["test", "--release", "-p", package, "--", "--exact"]).args(&in_release);
    let out = cmd.stderr(Stdio::piped()).output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let results = libtest_results(&stdout);
    for name in in_release {
        let full = format!("{prefix}{name}");
        match results.iter().find(|(r, _)| *r == name) {
            Some((_, v)) if v.starts_with("ignored") => tally.record(
                &full,
                Err("ignored in the release build too: not a release-only test".into()),
            ),
            Some((_, verdict)) => record_libtest(tally, &full, verdict),
            None => {
                let err = String::from_utf8_lossy(&out.stderr);
                tally.record(&full, Err(format!("no verdict in release\n{}", last_lines(&err, 30))))
            }
        }
    }
    Ok(())
}

fn run_qemu_test(t: &QemuTest, a: &Artifacts, kernel: &Kernel) -> Result<(), String> {
    let mut boot = t.boot.clone();
    let mut with_apps;
    let mut kernel = kernel;
    if let Some((path, spoil)) = &t.system {
        let s = system::prepare(&util::root().join(path), *spoil, t.boot.arch)
            .map_err(|e| format!("{e:#}"))?;
        boot.attach(&s).map_err(|e| format!("{e:#}"))?;
        with_apps = Kernel::load(&a.kernel).map_err(|e| format!("{e:#}"))?;
        with_apps.add_instances(&s.instances).map_err(|e| format!("{e:#}"))?;
        kernel = &with_apps;
    }
    let out = qemu::boot(&boot, a, kernel, None, &mut |_| {}).map_err(|e| format!("{e:#}"))?;
    let verdict = expected::verdict(&t.name, (t.check)(&out), &[(&out, t.expected)]);
    if verdict.is_err() {
        keep_log(&t.name, &boot, a, &out);
    }
    verdict.map_err(|why| {
        // The log's end too: a run elsewhere (CI) may leave nothing else to read.
        let text = out.log_text();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(FAILED_LOG_TAIL)..].join("\n");
        format!("{why}\n(log: {})\nits last lines:\n{tail}", log_path(&t.name).display())
    })
}

/// How many of a failed boot's last log lines its verdict shows.
const FAILED_LOG_TAIL: usize = 40;

/// The CPU-contract scenarios of [`crate::sched`], as `qemu::ARCH::sched::NAME`; boots
/// they share (the baseline) happen once.
fn sched_tests(a: &Artifacts, wanted: &dyn Fn(&str) -> bool, list: bool, tally: &mut Tally) {
    let mut runs = crate::sched::Runs::new(a);
    for (name, check) in crate::sched::SCENARIOS {
        let full = format!("qemu::{}::sched::{name}", a.arch.name());
        if !wanted(&full) {
            continue;
        }
        if list {
            println!("{full}");
            continue;
        }
        let own = check(&mut runs);
        let used = runs.take_used();
        let boots: Vec<(&Outcome, Expected)> =
            used.iter().filter_map(|r| Some((runs.outcome(*r)?, r.expected))).collect();
        let result = expected::verdict(&full, own, &boots).map_err(|why| {
            let _ = std::fs::create_dir_all(qemu::log_dir());
            let mut kept = Vec::new();
            for run in crate::sched::ALL {
                if let Some(out) = runs.outcome(run) {
                    let stem = run.manifest.rsplit('/').next().unwrap_or("run");
                    let path = qemu::log_dir().join(format!("sched.{}.{stem}.log", a.arch.name()));
                    let text = format!(
                        "append: {}\nending: {:?}\n\n{}",
                        run.append,
                        out.ending,
                        out.log_text()
                    );
                    if std::fs::write(&path, text).is_ok() {
                        kept.push(path.display().to_string());
                    }
                }
            }
            format!("{why}\n(logs: {})", kept.join(", "))
        });
        tally.record(&full, result);
    }
}

fn log_path(name: &str) -> std::path::PathBuf {
    qemu::log_dir().join(format!("{}.log", name.replace("::", ".")))
}

fn keep_log(name: &str, boot: &Boot, a: &Artifacts, out: &Outcome) {
    let _ = std::fs::create_dir_all(qemu::log_dir());
    let header = format!("command: {:?}\nending: {:?}\n\n", boot.command(a), out.ending);
    let _ = std::fs::write(log_path(name), header + &out.log_text());
}

/// The `memory: N MiB` figure of the banner.
fn reported_mib(out: &Outcome) -> Option<u64> {
    let line = out.line("memory: ")?;
    let rest = line.message.split("memory: ").nth(1)?;
    rest.split_whitespace().next()?.parse().ok()
}

fn qemu_tests(arch: Arch, _a: &Artifacts, _kernel: &Kernel) -> Result<Vec<QemuTest>> {
    let p = format!("qemu::{}::", arch.name());
    let mut tests = Vec::new();
    // The banner's memory size follows -m.
    for mib in [128u32, 256] {
        let mut boot = Boot::new(arch);
        boot.memory = mib;
        let exact = arch == Arch::Riscv64;
        tests.push(QemuTest {
            name: format!("{p}boot::memory_{mib}M"),
            boot,
            system: None,
            expected: &[],
            check: Box::new(move |out| {
                expect_ending(out, Ending::Kernel(0))?;
                expect_line(out, "Tessera")?;
                let got = reported_mib(out).ok_or("no `memory: N MiB` line in the banner")?;
                // PVH's E820 map leaves the first MiB and a few firmware pages out of RAM.
                let ok = if exact {
                    got == mib as u64
                } else {
                    got <= mib as u64 && got + 2 >= mib as u64
                };
                if ok { Ok(()) } else { Err(format!("banner reports {got} MiB for -m {mib}M")) }
            }),
        });
    }
    if arch == Arch::Riscv64 {
        tests.push(reserved_memory_test(&p, "reserved_memory", 12));
        tests.push(reserved_memory_test(&p, "reserved_memory_few", 2));
    }
    if arch == Arch::Riscv64 {
        for (bios, name, console) in
            [(Bios::Rustsbi, "RustSBI", "DBCN"), (Bios::Opensbi, "OpenSBI", "legacy")]
        {
            let mut boot = Boot::new(arch);
            boot.bios = bios;
            boot.append = "test=sbi::console".into();
            tests.push(QemuTest {
                name: format!("{p}firmware::{}", name.to_lowercase()),
                boot,
                system: None,
                expected: &[],
                check: Box::new(move |out| {
                    expect_ending(out, Ending::Kernel(0))?;
                    expect_line(out, &format!("firmware: {name}"))?;
                    expect_line(out, &format!("SBI console: {console}"))?;
                    expect_line(out, "SBI console check: written through the firmware")
                }),
            });
        }
    }
    tests.push(pci_test(&p, arch));
    tests.push(disks_test(&p, arch));
    tests.push(disk_full_test(&p, arch));
    tests.push(interrupt_controllers_test(&p, arch));
    // A panic is reported with its message and a symbolized backtrace on every architecture.
    let mut boot = Boot::new(arch);
    boot.append = "fault=panic".into();
    tests.push(QemuTest {
        name: format!("{p}fault::panic"),
        boot,
        system: None,
        expected: &[
            "panic: panicked at kernel/src/tests/faults.rs:*deliberate panic*",
            "backtrace:",
            "  #* ret=0x*",
        ],
        check: Box::new(|out| {
            expect_ending(out, Ending::Kernel(2))?;
            [
                "panic: ",
                "deliberate panic",
                "<kernel::tests::faults::commit",
                "<kernel::kernel_main",
            ]
            .iter()
            .try_for_each(|n| expect_line(out, n))
        }),
    });
    if arch == Arch::X86_64 {
        tests.push(ram_above_4g_test(&p));
        // The trap report: the exception, its vector and error code, the address and pc, a
        // backtrace.
        let faults: [(&str, &str, &[&str], Expected); 4] = [
            (
                "load",
                "load",
                &[
                    "trap: load page fault (#PF), vector 14",
                    "<kernel::tests::faults::deliberate_bad_access",
                ],
                &[
                    "trap: load page fault (#PF), vector 14, error 0x0 (not present, supervisor) at address 0x1234567000, pc=0x*",
                    "backtrace:",
                    "  #0 pc=0x*",
                    "  #* ret=0x*",
                ],
            ),
            (
                "stack_overflow",
                "stack-overflow",
                &[
                    "trap: double fault (#DF), vector 8",
                    "guard page: kernel stack overflow",
                    "<kernel::tests::faults::recurse",
                ],
                &[
                    "trap: double fault (#DF), vector 8, the last page fault at address 0x*, pc=0x*, rsp=0x*",
                    "trap: the address is the boot stack's guard page: kernel stack overflow",
                    "backtrace:",
                    "  #0 pc=0x*",
                    "  #* ret=0x*",
                ],
            ),
            (
                "illegal_instruction",
                "illegal-instruction",
                &["trap: illegal instruction (#UD), vector 6", "<kernel::tests::faults::commit"],
                &[
                    "trap: illegal instruction (#UD), vector 6, error 0x0, pc=0x*, rsp=0x*",
                    "backtrace:",
                    "  #0 pc=0x*",
                    "  #* ret=0x*",
                ],
            ),
            (
                "breakpoint",
                "breakpoint",
                &["trap: breakpoint (#BP), vector 3", "<kernel::tests::faults::commit"],
                &[
                    "trap: breakpoint (#BP), vector 3, error 0x0, pc=0x*, rsp=0x*",
                    "backtrace:",
                    "  #0 pc=0x*",
                    "  #* ret=0x*",
                ],
            ),
        ];
        fault_tests(&p, arch, &faults, &mut tests);
    }
    if arch == Arch::Riscv64 {
        // The trap report: the cause, the address and pc, a backtrace.
        let faults: [(&str, &str, &[&str], Expected); 2] = [
            (
                "load",
                "load",
                &[
                    "trap: load page fault",
                    "pc=0x",
                    "<kernel::tests::faults::deliberate_bad_access",
                ],
                &[
                    "trap: load page fault (scause 0xd) at address 0x1234567000, pc=0x*",
                    "backtrace:",
                    "  #0 pc=0x*",
                    "  #* ret=0x*",
                ],
            ),
            (
                "stack_overflow",
                "stack-overflow",
                &["guard page: kernel stack overflow", "<kernel::tests::faults::recurse"],
                &[
                    "trap: store page fault (scause 0xf) at address 0x*, pc=0x*",
                    "trap: the address is the boot stack's guard page: kernel stack overflow",
                    "backtrace:",
                    "  #0 pc=0x*",
                    "  #* ret=0x*",
                ],
            ),
        ];
        fault_tests(&p, arch, &faults, &mut tests);
    }
    // ANCHOR: suites
    tests.extend(domain_tests(&p, arch));
    tests.extend(paging_tests(&p, arch));
    tests.extend(address_space_tests(&p, arch));
    tests.extend(drivers_tests(&p, arch));
    tests.extend(net_tests(&p, arch));
    tests.extend(remote_tests(&p, arch));
    tests.extend(user_tests(&p, arch));
    tests.extend(labs::qemu_tests(arch));
    // ANCHOR_END: suites
    Ok(tests)
}

/// The `ERROR` and `WARN` lines each kernel test may log, by the test's name (a test not
/// listed may log none). Lines logged outside every test, by either boot, count against each.
const KERNEL_EXPECTED: &[(&str, Expected)] = &[(
    "traps::unexpected_interrupt",
    &[
        "interrupt: unexpected interrupt (vector 0x50) taken in kernel mode, acknowledged at the local APIC; counted, not logged again",
    ],
)];

/// The lines of each kernel test's run (between `test NAME ...` and its verdict), and the
/// lines outside every test.
fn kernel_test_lines(log: &[LogLine]) -> (HashMap<&str, Vec<&LogLine>>, Vec<&LogLine>) {
    let mut of_test: HashMap<&str, Vec<&LogLine>> = HashMap::new();
    let mut outside = Vec::new();
    let mut current = None;
    for l in log {
        if let Some(rest) = l.message.strip_prefix("test ") {
            current = rest.strip_suffix(" ...");
            if let Some(name) = current {
                of_test.entry(name).or_default();
            }
            continue;
        }
        match current {
            Some(name) => of_test.entry(name).or_default().push(l),
            None => outside.push(l),
        }
    }
    (of_test, outside)
}

/// A boot whose device tree reserves `children` ranges in `/reserved-memory` (where the kernel
/// would otherwise put its own tables and the first frames it hands out; with more than two,
/// one not page-aligned and one of 1 MiB) and one in the memory reservation block, and reports
/// RAM beyond the kernel's 64 GiB direct map. The kernel must list every range, leave the far
/// RAM out with a warning, and hand out no frame of a reserved range
/// (`frames::reserved_never_handed_out` takes every free frame). Twelve children make thirteen
/// ranges, more than the kernel once kept (8, then silently dropped the rest) and more than it
/// now keeps from its pass over the tree (8, `device_tree::CACHED`), so it reads them from the
/// tree each time; two make three, which it keeps.
/// One boot per deliberate kernel fault (`fault=KIND`), each ending with the panic status: its
/// name, the kind, lines the report must contain, and the ERROR lines it may print.
fn fault_tests(
    p: &str,
    arch: Arch,
    faults: &[(&'static str, &'static str, &'static [&'static str], Expected)],
    tests: &mut Vec<QemuTest>,
) {
    for &(name, kind, needles, expected) in faults {
        let mut boot = Boot::new(arch);
        boot.append = format!("fault={kind}");
        tests.push(QemuTest {
            name: format!("{p}fault::{name}"),
            boot,
            system: None,
            expected,
            check: Box::new(move |out| {
                expect_ending(out, Ending::Kernel(2))?;
                needles.iter().try_for_each(|n| expect_line(out, n))
            }),
        });
    }
}

/// PCI enumeration through ECAM (the window from the device tree on RISC-V, from ACPI's MCFG on
/// x86_64): a random-number device on the root bus and another behind a PCI-to-PCI bridge are
/// listed, with the host bridge and the bridge, at their addresses (the RISC-V firmware leaves
/// the bridge unnumbered, so the kernel numbers it; SeaBIOS numbers it on x86_64).
fn pci_test(p: &str, arch: Arch) -> QemuTest {
    let mut boot = Boot::new(arch);
    boot.devices = vec![
        "virtio-rng-pci,addr=0x5".into(),
        "pci-bridge,chassis_nr=1,id=bridge1,addr=0x6".into(),
        "virtio-rng-pci,bus=bridge1,addr=0x3".into(),
    ];
    QemuTest {
        name: format!("{p}boot::pci"),
        boot,
        system: None,
        expected: &[],
        check: Box::new(move |out| {
            expect_ending(out, Ending::Kernel(0))?;
            let (host, functions) = match arch {
                // virt's host bridge alone.
                Arch::Riscv64 => ("pci 00:00.0 1b36:0008 class 06.00.00 (host bridge)", 4),
                // q35's host bridge, VGA, and the ISA bridge, SATA and SMBus functions of 00:1f.
                Arch::X86_64 => ("pci 00:00.0 8086:29c0 class 06.00.00 (host bridge)", 8),
            };
            for line in [
                host,
                "pci 00:05.0 1af4:1005 class 00.ff.00 (unclassified)",
                "pci 00:06.0 1b36:0001 class 06.04.00 (PCI bridge)",
                "pci 01:03.0 1af4:1005 class 00.ff.00 (unclassified)",
                &format!("pci: {functions} function(s)"),
            ] {
                expect_line(out, line)?;
            }
            Ok(())
        }),
    }
}

/// A manifest's disks are made under `target/disks/<arch>/` and attached where the manifest places
/// them, and the kernel's boot log lists their devices there: on RISC-V the `virtio,mmio`
/// node of unit 0 (QEMU's `virtio-mmio-bus.0`); on x86_64 a virtio-blk-pci at `00:10.0` and
/// an AHCI controller of its own at `00:11.0`, next to q35's built-in one at `00:1f.2` (7
/// functions in all, with q35's host bridge, VGA, ISA bridge and SMBus). The
/// images read back on the host as the zeros they were made with (no driver writes yet).
fn disks_test(p: &str, arch: Arch) -> QemuTest {
    let manifest = match arch {
        Arch::Riscv64 => "tests/manifests/disks.toml",
        Arch::X86_64 => "tests/manifests/disks-ahci.toml",
    };
    QemuTest {
        name: format!("{p}boot::disks"),
        boot: Boot::new(arch),
        system: Some((manifest.into(), Spoil::Nothing)),
        expected: &[],
        check: Box::new(move |out| {
            expect_ending(out, Ending::Kernel(0))?;
            let (lines, images): (&[&str], &[(&str, u64)]) = match arch {
                Arch::Riscv64 => (
                    &[
                        "virtio,mmio @ 0x10001000 (+0x1000) irq 1",
                        "virtio,mmio @ 0x10002000 (+0x1000) irq 2",
                    ],
                    &[("data", 8 << 20), ("spare", 1 << 20)],
                ),
                Arch::X86_64 => (
                    &[
                        "pci 00:10.0 1af4:1001 class 01.00.00 (SCSI storage)",
                        "pci 00:11.0 8086:2922 class 01.06.01 (SATA storage)",
                        "pci 00:1f.2 8086:2922 class 01.06.01 (SATA storage)",
                        "pci: 7 function(s)",
                    ],
                    &[("data", 8 << 20), ("sata", 4 << 20)],
                ),
            };
            lines.iter().try_for_each(|l| expect_line(out, l))?;
            for (name, size) in images {
                let path = system_image::disks::image_path(
                    &system_image::disks::dir(arch),
                    std::path::Path::new(manifest),
                    name,
                );
                let len =
                    std::fs::metadata(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                if len.len() != *size {
                    return Err(format!("{}: {} bytes, want {size}", path.display(), len.len()));
                }
                let first =
                    system_image::disks::read_sectors(&path, 0, 8).map_err(|e| format!("{e:#}"))?;
                if first.iter().any(|&b| b != 0) {
                    return Err(format!("{}: the first sectors are not zero", path.display()));
                }
            }
            Ok(())
        }),
    }
}

/// A write the host refuses for want of space (`ENOSPC`, injected by QEMU's `blkdebug` into
/// every write: `tests/manifests/drivers/writes-fail-enospc.blkdebug`) reaches the guest as a device error: the virtio-blk driver's self-test fails
/// its first request and the domain exits with status 1, and the kernel ends the run. With
/// QEMU's default (`werror=enospc`) the machine would pause at that write and the boot would
/// run into its timeout.
fn disk_full_test(p: &str, arch: Arch) -> QemuTest {
    let mut boot = Boot::new(arch);
    boot.icount = true;
    boot.disk_faults = Some(DiskFaults {
        rules: tool_base::util::root().join("tests/manifests/drivers/writes-fail-enospc.blkdebug"),
        iops: None,
    });
    QemuTest {
        name: format!("{p}boot::disk_full_reported"),
        boot,
        system: Some(("tests/manifests/drivers/virtio-blk-self-test.toml".into(), Spoil::Nothing)),
        expected: &[],
        check: Box::new(|out| {
            expect_ending(out, Ending::Kernel(0))?;
            expect_line(out, "virtio-blk: self-test FAILED: the device failed a request")?;
            if out.has("virtio-blk: self-test: ") {
                return Err("a transfer of the self-test succeeded".into());
            }
            expect_exit(out, "blk", 1)
        }),
    }
}

/// The controllers of devices' interrupts are found (the PLIC in the device tree on RISC-V; the
/// I/O APIC and the ISA routes in ACPI's MADT on x86_64) and every input is masked at boot,
/// as read back from the controller.
fn interrupt_controllers_test(p: &str, arch: Arch) -> QemuTest {
    QemuTest {
        name: format!("{p}boot::interrupt_controllers"),
        boot: Boot::new(arch),
        system: None,
        expected: &[],
        check: Box::new(move |out| {
            expect_ending(out, Ending::Kernel(0))?;
            let lines: &[&str] = match arch {
                // virt (QEMU 7.2): 96 sources.
                Arch::Riscv64 => &[
                    "interrupt controller: sifive,plic-1.0.0 @ 0xc000000 (id 0), inputs 1..=96, all masked",
                ],
                // q35: one I/O APIC of 24 inputs; the timer's IRQ 0 arrives at GSI 2, and the
                // PCI interrupt lines QEMU's MADT lists are level-triggered.
                Arch::X86_64 => &[
                    "interrupt controller: ioapic @ 0xfec00000 (id 0), inputs 0..=23, all masked",
                    "acpi: ISA IRQ 0 -> GSI 2 (active high, edge)",
                    "acpi: ISA IRQ 9 -> GSI 9 (active high, level)",
                ],
            };
            lines.iter().try_for_each(|l| expect_line(out, l))
        }),
    }
}

fn reserved_memory_test(p: &str, name: &str, children: u64) -> QemuTest {
    let mut reserved: Vec<(u64, u64)> =
        (0..children.min(10)).map(|i| (0x8040_0000 + i * 0x8_0000, 0x1_0000)).collect();
    if children > 10 {
        reserved.push((0x80a0_0800, 0x1000));
    }
    if children > 11 {
        reserved.push((0x8100_0000, 0x10_0000));
    }
    let memreserve = vec![(0x8700_0000, 0x2000)];
    let far = (0x10_0000_0000u64, 0x1000_0000u64);
    let mut boot = Boot::new(Arch::Riscv64);
    boot.append = "test=frames::reserved_never_handed_out".into();
    boot.icount = true;
    boot.dtb = Some(qemu_run::dtb::DtbChanges {
        name: name.replace('_', "-"),
        reserved: reserved.clone(),
        memreserve: memreserve.clone(),
        memory: vec![far],
    });
    // The firmware, the kernel image and the device tree, then the device tree's.
    let want = 3 + reserved.len() + memreserve.len();
    QemuTest {
        name: format!("{p}boot::{name}"),
        boot,
        system: None,
        expected: &["device tree: RAM * beyond the direct map (64 GiB) is left out"],
        check: Box::new(move |out| {
            expect_ending(out, Ending::Kernel(0))?;
            expect_line(out, "test frames::reserved_never_handed_out ... ok")?;
            for (start, size) in reserved.iter().chain(&memreserve) {
                expect_line(out, &format!("  reserved {start:#x}..{:#x}", start + size))?;
            }
            let listed = out.log.iter().filter(|l| l.message.starts_with("  reserved ")).count();
            let checked = out
                .line("reserved ranges (")
                .and_then(|l| l.message.split_whitespace().nth(1)?.parse::<usize>().ok());
            if listed != want || checked != Some(want) {
                return Err(format!(
                    "{want} reserved ranges expected: {listed} listed, {checked:?} checked"
                ));
            }
            // Only the RAM QEMU has, and the far RAM left out with the one warning.
            expect_line(out, "memory: 128 MiB in 1 region(s)")?;
            let warning = format!(
                "device tree: RAM {:#x}..{:#x} beyond the direct map (64 GiB) is left out",
                far.0,
                far.0 + far.1
            );
            let unexpected: Vec<_> = out
                .log
                .iter()
                .filter(|l| l.level == "WARN" || l.level == "ERROR")
                .filter(|l| l.message != warning)
                .map(|l| l.to_string())
                .collect();
            if !unexpected.is_empty() {
                return Err(format!("unexpected warnings or errors:\n{}", unexpected.join("\n")));
            }
            expect_line(out, &warning)
        }),
    }
}

/// An x86_64 boot with 6 GiB of RAM, of which q35 puts 4 GiB above the 4 GiB line: the banner
/// reports it all, and the kernel test `paging::direct_map` finds every free frame, the highest
/// above 4 GiB, reachable through the direct map.
fn ram_above_4g_test(p: &str) -> QemuTest {
    let mut boot = Boot::new(Arch::X86_64);
    boot.memory = 6144;
    boot.append = "test=paging::direct_map".into();
    QemuTest {
        name: format!("{p}boot::ram_above_4g"),
        boot,
        system: None,
        expected: &[],
        check: Box::new(|out| {
            expect_ending(out, Ending::Kernel(0))?;
            let got = reported_mib(out).ok_or("no `memory: N MiB` line in the banner")?;
            if !(6140..=6144).contains(&got) {
                return Err(format!("banner reports {got} MiB for -m 6144M"));
            }
            expect_line(out, "  ram 0x100000000..0x200000000")?;
            expect_line(out, "test paging::direct_map ... ok")?;
            let line = out.line("direct map: ").ok_or("no `direct map:` line")?;
            let highest = line
                .message
                .split(" to 0x")
                .nth(1)
                .and_then(|r| r.split(',').next())
                .and_then(|h| u64::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("no highest frame in `{}`", line.message))?;
            if highest < 0x1_f000_0000 {
                return Err(format!("the highest free frame checked is {highest:#x}"));
            }
            Ok(())
        }),
    }
}

/// Boots once with `test=list` to learn the kernel's tests, then once to run the wanted ones
/// (under `-icount` so timer tests see virtual time), recording each as `qemu::ARCH::kernel::T`.
fn kernel_tests(
    arch: Arch,
    a: &Artifacts,
    kernel: &Kernel,
    wanted: &dyn Fn(&str) -> bool,
    list: bool,
    tally: &mut Tally,
) -> Result<()> {
    let p = format!("qemu::{}::kernel::", arch.name());
    let mut boot = Boot::new(arch);
    boot.append = "test=list".into();
    boot.timeout = Duration::from_secs(30);
    let listing = qemu::boot(&boot, a, kernel, None, &mut |_| {})?;
    let names: Vec<String> = listing
        .log
        .iter()
        .filter_map(|l| l.message.strip_prefix("test available: ").map(str::to_string))
        .filter(|n| wanted(&format!("{p}{n}")))
        .collect();
    if list {
        names.iter().for_each(|n| println!("{p}{n}"));
        return Ok(());
    }
    if listing.ending != Ending::Kernel(0) {
        tally.record(&format!("{p}list"), Err(format!("listing boot ended {:?}", listing.ending)));
        return Ok(());
    }
    if names.is_empty() {
        return Ok(());
    }
    boot.append = format!("test={}", names.join(","));
    boot.icount = true;
    boot.timeout = Duration::from_secs(300);
    let out = qemu::boot(&boot, a, kernel, None, &mut |_| {})?;
    let (of_test, mut outside) = kernel_test_lines(&out.log);
    outside.extend(listing.log.iter());
    let mut any_failed = false;
    for n in &names {
        let verdict = if out.has(&format!("test {n} ... ok")) {
            // A passing test's own lines, and those of the boots around the tests.
            let lines: Vec<LogLine> = of_test
                .get(n.as_str())
                .into_iter()
                .flatten()
                .chain(&outside)
                .map(|l| (*l).clone())
                .collect();
            let allowed = KERNEL_EXPECTED.iter().find(|(t, _)| t == n).map_or(&[][..], |e| e.1);
            expected::check_log(&format!("{p}{n}"), &lines, allowed)
        } else {
            any_failed = true;
            let why: Vec<_> = out
                .log
                .iter()
                .skip_while(|l| l.message != format!("test {n} ..."))
                .skip(1)
                .take_while(|l| !l.message.starts_with("test "))
                .map(|l| l.to_string())
                .collect();
            Err(if why.is_empty() {
                format!("no verdict; boot ended {:?}", out.ending)
            } else {
                why.join("\n")
            })
        };
        tally.record(&format!("{p}{n}"), verdict);
    }
    if any_failed || out.ending != Ending::Kernel(0) {
        keep_log(&format!("{p}all"), &boot, a, &out);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_select_architectures() {
        assert!(arch_may_match(Arch::Riscv64, None));
        assert!(arch_may_match(Arch::Riscv64, Some("timer")));
        assert!(arch_may_match(Arch::X86_64, Some("memory")));
        assert!(arch_may_match(Arch::Riscv64, Some("qemu::riscv64::kernel")));
        assert!(arch_may_match(Arch::Riscv64, Some("qemu::ri")));
        assert!(!arch_may_match(Arch::X86_64, Some("qemu::riscv64::kernel")));
        assert!(!arch_may_match(Arch::Riscv64, Some("x86_64")));
        assert!(!arch_may_match(Arch::Riscv64, Some("host::clippy")));
    }

    #[test]
    fn ignored_host_tests_are_counted_as_skipped() {
        let stdout = "running 3 tests\n\
                      test a::one ... ok\n\
                      test a::slow ... ignored, builds the apps\n\
                      test a::two ... FAILED\n\
                      test src/lib.rs - f (line 3) ... ignored\n\n\
                      test result: FAILED. 1 passed; 1 failed; 2 ignored\n";
        let results = libtest_results(stdout);
        assert_eq!(results.len(), 4);
        let mut tally = Tally::default();
        for (name, verdict) in results {
            record_libtest(&mut tally, name, verdict);
        }
        assert_eq!(
            (tally.passed, tally.failed.as_slice(), tally.skipped),
            (1, &["a::two".to_string()][..], 2)
        );
        // The closing line, as CI reads it: `N passed, N failed` and `, N skipped`.
        assert_eq!(tally.summary(), "1 passed, 1 failed, 2 skipped");
    }

    #[test]
    fn kernel_test_lines_are_split_by_test() {
        let line = |level: &str, message: &str| qemu_run::log::LogLine {
            level: level.into(),
            timestamp: None,
            message: message.into(),
        };
        let log = vec![
            line("INFO", "Tessera"),
            line("INFO", "test a::one ..."),
            line("WARN", "inside one"),
            line("INFO", "test a::one ... ok"),
            line("INFO", "between"),
            line("INFO", "test a::two ..."),
            line("ERROR", "test a::two ... FAILED"),
            line("INFO", "kernel tests: 1 passed, 1 failed"),
        ];
        let (of_test, outside) = kernel_test_lines(&log);
        fn messages<'a>(lines: &[&'a LogLine]) -> Vec<&'a str> {
            lines.iter().map(|l| l.message.as_str()).collect()
        }
        assert_eq!(messages(&of_test["a::one"]), ["inside one"]);
        assert!(of_test["a::two"].is_empty());
        assert_eq!(messages(&outside), ["Tessera", "between", "kernel tests: 1 passed, 1 failed"]);
    }

    #[test]
    fn the_banner_memory_figure_is_read() {
        let out = Outcome {
            ending: Ending::Kernel(0),
            log: vec![qemu_run::log::LogLine {
                level: "INFO".into(),
                timestamp: Some("0.1".into()),
                message: "memory: 256 MiB in 1 region(s), timer 10000000 Hz".into(),
            }],
            stderr: String::new(),
            wall: Duration::ZERO,
        };
        assert_eq!(reported_mib(&out), Some(256));
        assert!(expect_ending(&out, Ending::Kernel(0)).is_ok());
        assert!(expect_ending(&out, Ending::Kernel(2)).is_err());
        assert!(expect_line(&out, "256 MiB").is_ok());
        assert!(expect_line(&out, "512 MiB").is_err());
    }
}
