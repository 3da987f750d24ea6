//! `cargo xtask`: Tessera's host tool.
//!
//! It installs what a fresh machine lacks (`setup`), builds the kernel and firmware for the
//! bare-metal targets, boots them in QEMU and decodes the kernel's defmt log (`run`), runs
//! several nodes joined by a virtual network (`cluster`), runs every test (`test`: clippy, host
//! unit tests, QEMU suites), fuzzes for longer than the tests do (`fuzz`), measures
//! (`bench`), builds the book from `docs/` (`book`), hands out and grades the course labs
//! (`lab`) and starts a new stretch driver from the template (`new-driver`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use qemu_run::{cpu_trace, disk_trace, qemu, run};
use source_tree::new_driver;
use system_image::apps;
use tool_base::{Arch, Bios, artifacts, setup, util};

/// Tessera's build, run, test and bench tool.
#[derive(Parser)]
#[command(name = "cargo xtask", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Made once per invocation: the size of `Run`'s many options costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Install what is missing: bare-metal Rust targets, QEMU (and gdb-multiarch with --gdb).
    Setup {
        /// Also install gdb-multiarch.
        #[arg(long)]
        gdb: bool,
        /// Architectures to set up (repeatable; default: both): their Rust targets and QEMU.
        #[arg(long, value_enum)]
        arch: Vec<Arch>,
    },
    /// Build the kernel (and the firmware) and the apps for an architecture.
    Build {
        /// Guest architecture.
        #[arg(long, value_enum, default_value = "riscv64")]
        arch: Arch,
    },
    /// Build, boot in QEMU and show the decoded log; exits with the kernel's status, 4 when a
    /// domain failed that was not expected to, or 5 when the run outlived --timeout.
    Run {
        /// Guest architecture.
        #[arg(long, value_enum, default_value = "riscv64")]
        arch: Arch,
        /// M-mode firmware (RISC-V only).
        #[arg(long, value_enum, default_value = "rustsbi")]
        bios: Bios,
        /// Guest memory, in MiB (default: the manifest's, else 128).
        #[arg(long)]
        memory: Option<u32>,
        /// The QoS manifest whose domains to run.
        #[arg(long, default_value = "manifests/default.toml")]
        manifest: PathBuf,
        /// Boot the kernel alone, without a manifest and domains.
        #[arg(long, conflicts_with = "manifest")]
        bare: bool,
        /// Kernel command line, e.g. `test=all` or `fault=load`.
        #[arg(long, default_value = "")]
        append: String,
        /// Run the guest on the host's clock instead of deterministic virtual time
        /// (`-icount shift=0,sleep=off`, the default): for interactive use; a busy host then
        /// stalls the guest, and the run summary warns when that broke periods.
        #[arg(long)]
        realtime: bool,
        /// Exit 0 even when a domain fails (by default a domain that exits with a non-zero
        /// status or is terminated, unless its manifest entry says `expect_failure = true`,
        /// makes the run exit with status 4).
        #[arg(long)]
        allow_failures: bool,
        /// Wait for a debugger on localhost:1234 before the first instruction; writes a gdb
        /// script that loads every domain's symbols (docs/debugging.md).
        #[arg(long)]
        gdb: bool,
        /// Build the apps with the `debug-apps` profile (unoptimised: gdb reads their locals).
        #[arg(long)]
        debug_apps: bool,
        /// Keep the manifest's disk images (`target/disks/<arch>/<manifest>-<disk>.img`) from the
        /// last run instead of making them fresh and zero-filled (an error when there is none).
        #[arg(long, conflicts_with = "bare")]
        keep_disk: bool,
        /// Stop the run if it has not ended SECONDS after QEMU started (host time), with a
        /// message and exit status 5 (a domain that never ends, a machine that stopped).
        /// Default: no timeout.
        #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
        timeout: Option<u64>,
        /// Also show frames the decoder could not read.
        #[arg(long)]
        raw: bool,
        /// Show each domain's CPU share live, one line per interval, instead of the kernel's
        /// per-period records (adds `trace=sched` to the kernel command line).
        #[arg(long)]
        cpu: bool,
        /// The interval of `--cpu`, in ms of the kernel's clock (implies `--cpu`; default 100).
        #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
        cpu_every: Option<u64>,
        /// Write every CPU period record to FILE when the run ends: `.csv` or `.json`.
        #[arg(long, value_name = "FILE")]
        cpu_out: Option<PathBuf>,
        /// Plot each domain's CPU per period to FILE (SVG) when the run ends.
        #[arg(long, value_name = "FILE")]
        cpu_svg: Option<PathBuf>,
        /// Write every disk period record the block driver printed (`disk period: stream=...`,
        /// one per period of each disk stream) to FILE when the run ends: `.csv` or `.json`.
        #[arg(long, value_name = "FILE")]
        disk_out: Option<PathBuf>,
        /// Plot each disk stream's disk time per period to FILE (SVG) when the run ends.
        #[arg(long, value_name = "FILE")]
        disk_svg: Option<PathBuf>,
        /// Write every link-time period record the network drivers printed (`net period:
        /// stream=...`, one per period of each transmit stream with a `net` contract) to FILE
        /// when the run ends: `.csv` or `.json`.
        #[arg(long, value_name = "FILE")]
        net_out: Option<PathBuf>,
        /// Plot each network stream's link time per period to FILE (SVG) when the run ends.
        #[arg(long, value_name = "FILE")]
        net_svg: Option<PathBuf>,
        /// Write the run's timeline to FILE (`.json`, the Chrome trace event format that
        /// https://ui.perfetto.dev and chrome://tracing open) when the run ends: each domain's
        /// CPU periods and page faults, revocations, disk and network periods, on the kernel's
        /// clock (adds `trace=sched` to the kernel command line; docs/debugging.md).
        #[arg(long, value_name = "FILE")]
        trace: Option<PathBuf>,
    },
    /// Run several nodes, each a QEMU booting a manifest, joined by VDE switches and links,
    /// with the scenario of the cluster manifest FILE (clusters/README.md); their logs are
    /// shown interleaved, each line prefixed with its node. Exits 0 when every node finished,
    /// 4 naming the nodes that failed, 130 after Ctrl-C.
    Cluster {
        /// The cluster manifest, e.g. clusters/three.toml.
        file: PathBuf,
    },
    /// Clippy, host unit tests and the QEMU suites; ends with `N passed, N failed, N skipped`
    /// (skipped: host tests marked `#[ignore]`).
    Test {
        /// Run only tests whose name contains this text.
        filter: Option<String>,
        /// List the tests instead of running them.
        #[arg(long)]
        list: bool,
        /// Architectures whose tests to run (repeatable; default: both). The host's own tests
        /// (formatting, clippy of the host crates, unit tests) run in any case.
        #[arg(long, value_enum)]
        arch: Vec<Arch>,
    },
    /// Run the host fuzz targets for longer than `test` does, in a release build: `rpp` (the
    /// remote paging protocol's decoder, server and client) and `syscalls` (the kernel's
    /// system-call dispatch on the mock machine); exits 1 if one found a failure.
    Fuzz {
        /// Which target (default: every one, in turn).
        #[arg(value_parser = clap::builder::PossibleValuesParser::new(
            test_suites::fuzz::TARGETS.map(|t| t.name)
        ))]
        target: Option<String>,
        /// Seconds to fuzz each target for.
        #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
        seconds: u64,
        /// The first seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Benchmarks; results as a table and as JSON under target/bench/, kept figures against
    /// bench/baseline.toml; `report` (or `--report`) draws the book's plots into docs/plots.
    Bench {
        /// Which benchmark (`all`: every one; `check`: the kept figures against the baseline;
        /// `report`: the book's plots from real runs, with their data, into docs/plots).
        #[arg(value_enum, required_unless_present = "report")]
        name: Option<benches::Name>,
        /// The same as `bench report`: runs what the book's plots need (on riscv64 unless
        /// --arch names another) and writes them and their data into docs/plots.
        #[arg(long, conflicts_with = "name")]
        report: bool,
        /// Architectures to measure (repeatable), printed side by side. Default: both, or for
        /// `check` those in the baseline.
        #[arg(long, value_enum)]
        arch: Vec<Arch>,
        /// With `all` or one bench: rewrite bench/baseline.toml (the tables measured) and
        /// docs/performance.md from this run.
        #[arg(long)]
        update_baseline: bool,
        /// `disk`: fewer sweep points and readers.
        #[arg(long)]
        quick: bool,
        /// `disk`: no boots, only the host simulation and the schedulers' host cost.
        #[arg(long)]
        host_only: bool,
        /// `fault`: also measure the app this manifest boots, which reports `APP: bench
        /// faults=N fault_ns=T touch_ns=U` (the demo app of `cargo xtask new-driver` does).
        #[arg(long)]
        manifest: Option<String>,
    },
    /// Build the book (docs/, in the order of docs/SUMMARY.md) into target/book with mdBook,
    /// installing the pinned mdbook under $CARGO_HOME/tessera-tools when it is missing, and check it: no
    /// broken link or anchor between chapters, no missing include, no doc left out of
    /// docs/SUMMARY.md.
    Book,
    /// The course labs (labs/NAME/lab.toml, docs/labs/index.md): list them, make a student's
    /// hand-out, grade a lab with points and hints, check that every reference scores 100 and
    /// every hand-out less.
    Lab {
        #[command(subcommand)]
        command: LabCommand,
    },
    /// Make a new stretch driver from the template: the driver crate, an app that binds it, a
    /// manifest, and the QEMU test `user::NAME` that boots it (docs/stretch-driver-tutorial.md).
    NewDriver {
        /// The driver's name: lowercase letters, digits and `-`, starting with a letter.
        name: String,
    },
}

/// `cargo xtask lab ...`.
#[derive(Subcommand)]
enum LabCommand {
    /// Each lab: its hours, title and points.
    List,
    /// The student's tree for a lab: every tracked file, the lab's solution cut out at its
    /// LAB(NAME) markers, the graded files' pristine copy in .lab/, a git repository.
    Handout {
        /// The lab.
        name: String,
        /// Where to write it (default: target/labs/handout/NAME, made afresh).
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
    /// Run a lab's graded tests: a line per test with its points, each failure's hint and
    /// first lines, `Score: N/100`; Gradescope and GitHub Classroom JSON. Exits 0 when every
    /// test passed, 1 otherwise.
    Grade {
        /// The lab.
        name: String,
        /// Grade the student files of this tree (a student's submission) in this one: they
        /// are put in place for the run and the tree's own put back afterwards.
        #[arg(long, value_name = "DIR")]
        submission: Option<PathBuf>,
        /// Write Gradescope's results.json here (default target/labs/NAME/results.json);
        /// GitHub Classroom's result goes beside it.
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
        /// The architecture of the lab's QEMU tests.
        #[arg(long, value_enum, default_value = "riscv64")]
        arch: Arch,
    },
    /// Check a lab (default: every lab): its reference solution scores 100, and its hand-out,
    /// put in place of the student files for the run, builds and scores less with every
    /// failure explained.
    Check {
        /// The lab.
        name: Option<String>,
    },
}

fn lab(command: LabCommand) -> anyhow::Result<u8> {
    let root = util::root();
    match command {
        LabCommand::List => lab_grader::list(&root),
        LabCommand::Handout { name, out } => lab_grader::handout(&root, &name, out.as_deref()),
        LabCommand::Grade { name, submission, json, arch } => lab_grader::grade(
            &root,
            &name,
            &lab_grader::GradeOptions {
                submission: submission.map(|d| util::resolve(&d)),
                json,
                arch: Some(arch.name().to_string()),
            },
        ),
        LabCommand::Check { name } => lab_grader::check(&root, name.as_deref()),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Setup { gdb, arch } => {
            let arches = if arch.is_empty() { vec![Arch::Riscv64, Arch::X86_64] } else { arch };
            setup::ensure_for(&arches, setup::Needs { gdb, qemu: true, dtc: true, vde: true })
                .map(|_| 0)
        }
        Command::Build { arch } => {
            setup::ensure(setup::Needs { gdb: false, qemu: false, dtc: false, vde: false })
                .and_then(|_| {
                    Ok((artifacts::build(arch)?, apps::build_apps(arch, apps::Build::Release)?))
                })
                .map(|(a, apps)| {
                    println!("kernel: {}", a.kernel.display());
                    if let Some(fw) = a.firmware {
                        println!("firmware: {}", fw.display());
                    }
                    if let Some(dir) = apps.values().next().and_then(|p| p.parent()) {
                        println!("apps: {}", dir.display());
                    }
                    0
                })
        }
        Command::Run {
            arch,
            bios,
            memory,
            manifest,
            bare,
            append,
            realtime,
            allow_failures,
            gdb,
            debug_apps,
            keep_disk,
            timeout,
            raw,
            cpu,
            cpu_every,
            cpu_out,
            cpu_svg,
            disk_out,
            disk_svg,
            net_out,
            net_svg,
            trace,
        } => {
            let boot = qemu::Boot { bios, append, icount: !realtime, gdb, ..qemu::Boot::new(arch) };
            let live = (cpu || cpu_every.is_some())
                .then(|| cpu_every.unwrap_or(100).saturating_mul(1_000_000));
            run::run_interactive(
                boot,
                run::RunOptions {
                    manifest: (!bare).then(|| util::resolve(&manifest)),
                    memory,
                    show_raw: raw,
                    allow_failures,
                    apps: if debug_apps { apps::Build::Debug } else { apps::Build::Release },
                    cpu: cpu_trace::Options { every_ns: live, out: cpu_out, svg: cpu_svg },
                    disk: disk_trace::Options {
                        trace: disk_trace::DISK,
                        out: disk_out,
                        svg: disk_svg,
                    },
                    net: disk_trace::Options { trace: disk_trace::NET, out: net_out, svg: net_svg },
                    trace,
                    keep_disk,
                    timeout: timeout.map(Duration::from_secs),
                },
            )
        }
        Command::Cluster { file } => qemu_cluster::run(&file),
        Command::Test { filter, list, arch } => test_suites::run(filter.as_deref(), list, &arch),
        Command::Fuzz { target, seconds, seed } => {
            test_suites::fuzz::run(target.as_deref(), seconds, seed)
        }
        Command::Bench { name, report, arch, update_baseline, quick, host_only, manifest } => {
            benches::run(
                if report { benches::Name::Report } else { name.expect("required by clap") },
                benches::Options {
                    arches: arch,
                    update_baseline,
                    disk: benches::DiskOptions { quick, host_only },
                    fault_manifest: manifest,
                },
            )
        }
        Command::Book => source_tree::book::run(),
        Command::Lab { command } => lab(command),
        Command::NewDriver { name } => new_driver::run(&name),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fuzz(args: &[&str]) -> Result<(Option<String>, u64, u64), String> {
        let argv = ["cargo xtask", "fuzz"].iter().chain(args);
        match Cli::try_parse_from(argv).map_err(|e| e.kind().to_string())?.command {
            Command::Fuzz { target, seconds, seed } => Ok((target, seconds, seed)),
            _ => Err("another command".into()),
        }
    }

    fn bench(args: &[&str]) -> Result<(Option<benches::Name>, bool, Vec<Arch>), String> {
        let argv = ["cargo xtask", "bench"].iter().chain(args);
        match Cli::try_parse_from(argv).map_err(|e| e.kind().to_string())?.command {
            Command::Bench { name, report, arch, .. } => Ok((name, report, arch)),
            _ => Err("another command".into()),
        }
    }

    #[test]
    fn bench_report_is_a_name_or_a_flag() {
        use benches::Name;
        assert_eq!(bench(&["report"]), Ok((Some(Name::Report), false, vec![])));
        assert_eq!(bench(&["--report"]), Ok((None, true, vec![])));
        assert_eq!(bench(&["--report", "--arch", "x86_64"]), Ok((None, true, vec![Arch::X86_64])));
        assert_eq!(bench(&["ipc"]), Ok((Some(Name::Ipc), false, vec![])));
        // A bench or the flag, not both, not neither.
        assert!(bench(&["ipc", "--report"]).is_err());
        assert!(bench(&[]).is_err());
    }

    #[test]
    fn lab_takes_its_subcommands() {
        let lab = |args: &[&str]| {
            let argv = ["cargo xtask", "lab"].iter().chain(args);
            Cli::try_parse_from(argv).map(|_| ()).map_err(|e| e.kind().to_string())
        };
        assert!(lab(&["list"]).is_ok());
        assert!(lab(&["handout", "syscall", "--out", "/tmp/x"]).is_ok());
        assert!(lab(&["grade", "syscall", "--submission", "s", "--json", "r.json"]).is_ok());
        assert!(lab(&["grade", "syscall", "--arch", "x86_64"]).is_ok());
        assert!(lab(&["check"]).is_ok() && lab(&["check", "syscall"]).is_ok());
        // No lab to hand out or grade, an unknown architecture, an unknown subcommand.
        assert!(lab(&["handout"]).is_err());
        assert!(lab(&["grade"]).is_err());
        assert!(lab(&["grade", "syscall", "--arch", "arm"]).is_err());
        assert!(lab(&["submit", "syscall"]).is_err());
    }

    /// The `cargo xtask` commands of the Gradescope script the labs' chapter shows, each
    /// parsed as this command line parses it (`$LAB` as a lab's name).
    #[test]
    fn the_gradescope_script_names_commands_that_exist() {
        let path = util::root().join("labs/gradescope/run_autograder");
        let script = std::fs::read_to_string(&path).unwrap();
        let commands: Vec<&str> =
            script.lines().filter_map(|l| l.trim().strip_prefix("cargo xtask ")).collect();
        assert!(!commands.is_empty(), "{} runs no cargo xtask command", path.display());
        for c in commands {
            let c = c.split("||").next().unwrap().replace("\"$LAB\"", "syscall");
            let argv = std::iter::once("cargo xtask").chain(c.split_whitespace());
            if let Err(e) = Cli::try_parse_from(argv) {
                panic!("{}: `cargo xtask {c}` is not a command: {e}", path.display());
            }
        }
    }

    #[test]
    fn fuzz_takes_a_target_seconds_and_a_seed() {
        assert_eq!(fuzz(&[]), Ok((None, 60, 1)));
        assert_eq!(fuzz(&["rpp"]), Ok((Some("rpp".into()), 60, 1)));
        assert_eq!(
            fuzz(&["syscalls", "--seconds", "600", "--seed", "7"]),
            Ok((Some("syscalls".into()), 600, 7))
        );
        assert_eq!(fuzz(&["--seconds", "5"]), Ok((None, 5, 1)));
        // No such target, no time, time that is not a number, two targets.
        assert!(fuzz(&["nothing"]).is_err());
        assert!(fuzz(&["--seconds", "0"]).is_err());
        assert!(fuzz(&["--seconds", "ten"]).is_err());
        assert!(fuzz(&["rpp", "syscalls"]).is_err());
    }
}
