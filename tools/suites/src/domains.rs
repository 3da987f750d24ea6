//! The QEMU suite of domains (both architectures): boots of manifests in `tests/manifests/` and
//! `manifests/default.toml`, and what their logs must show.

use std::time::Duration;

use crate::harness::{QemuTest, expect_ending, expect_exit, expect_line};
use qemu_run::expected::Expected;
use qemu_run::qemu::{Boot, Ending, Outcome};
use qemu_run::run::verdict::{self, DomainEnding};
use system_image::many_domains;
use system_image::system::Spoil;
use tool_base::Arch;

/// The report of `tests/manifests/fault-write.toml`'s fault: `faulty` writes to an image
/// stretch of `counter-b` and is terminated.
pub(super) const FAULT_WRITE: Expected = &[
    "domain faulty: store page fault at address 0x102000000, pc=0x*",
    "domain faulty: the address is in image stretch 0x102000000..* of domain counter-b, where it holds rights 0x0",
    "domain faulty terminated: store page fault",
];

/// How soon after its neighbour's exit, in seconds of the kernel's clock (virtual time under
/// `-icount`), `stale-timer.toml`'s blocked domain must return from its `WouldDeadlock`: a
/// scheduler pass and a return to the domain, with no timer interrupt or period boundary
/// waited for (43 µs on RISC-V, 36 µs on x86_64); the dead neighbour's timer was armed for an
/// hour.
const DEAD_TIMER_WAKEUP_WITHIN_S: f64 = 0.001;
/// How long each sleeper of the many-domains boot sleeps, in seconds (`nullcall --idle 5000`).
const MANY_SLEEP_S: f64 = 5.0;
/// How late after [`MANY_SLEEP_S`] a sleeper of the many-domains boot may exit, in seconds: the
/// boot that makes 1,024 domains (0.41 s on RISC-V, 0.22 s on x86_64), its first period
/// (100 ms) and its exit.
const MANY_LATE_S: f64 = 1.0;
/// How long the `threads` app's sleeper sleeps, in ms.
const THREADS_SLEEP_MS: u64 = 20;
/// The latency hint of the best-effort CPU contract (a domain without `cpu`), in ms.
const BEST_EFFORT_LATENCY_MS: u64 = 10;

/// Index of the first line containing `text`.
fn position(out: &Outcome, text: &str) -> Result<usize, String> {
    out.log
        .iter()
        .position(|l| l.message.contains(text))
        .ok_or(format!("no log line contains `{text}`"))
}

/// Index of the last line containing `text`.
fn last_position(out: &Outcome, text: &str) -> Result<usize, String> {
    out.log
        .iter()
        .rposition(|l| l.message.contains(text))
        .ok_or(format!("no log line contains `{text}`"))
}

/// The domains' frames all came back (the run summary's two counts agree), and the kernel heap
/// holds what it held once the domains were made.
pub(super) fn frames_returned(out: &Outcome) -> Result<(), String> {
    let line =
        out.line("free after all domains ended").ok_or("no frame count in the run summary")?;
    let numbers: Vec<u64> =
        line.message.split(|c: char| !c.is_ascii_digit()).filter_map(|w| w.parse().ok()).collect();
    match numbers[..] {
        [after, before] if after == before => {}
        _ => return Err(format!("frames not all returned: {}", line.message)),
    }
    // Kernel objects live in the domains' arenas: the heap holds what it held at boot.
    let line = out.line("in use at the end").ok_or("no kernel heap figure in the run summary")?;
    let numbers: Vec<u64> =
        line.message.split(|c: char| !c.is_ascii_digit()).filter_map(|w| w.parse().ok()).collect();
    match numbers[..] {
        [end, boot] if end == boot => Ok(()),
        _ => Err(format!("the kernel heap grew while domains ran: {}", line.message)),
    }
}

/// `domains::unexpected_interrupt` on one architecture: the two instants of `softint=` (ms of
/// the kernel's clock) and what the kernel logs about the interrupts.
struct SoftInt {
    /// The instants: on RISC-V the clock starts with the kernel, on x86_64 with the machine,
    /// and the firmware and the kernel's boot take some 27 ms of it before `spin` runs, so
    /// there both instants are 30 ms later.
    instants_ms: [u64; 2],
    /// The part of the first interrupt's warning that names it and how it was handled.
    warning: &'static str,
    /// The pattern that expects the whole warning.
    expected: Expected,
    /// The count logged at shutdown.
    count: &'static str,
}

/// What `softint=` raises on `arch`: supervisor software interrupts on RISC-V (cleared in
/// `sip`), self-IPIs on an unused vector on x86_64 (acknowledged at the local APIC).
fn softint(arch: Arch) -> SoftInt {
    match arch {
        Arch::Riscv64 => SoftInt {
            instants_ms: [10, 20],
            warning: "unexpected supervisor software interrupt (cause 1) taken in user mode, cleared",
            expected: &[
                "interrupt: unexpected * (cause *) taken in * mode, *; counted, not logged again",
            ],
            count: "interrupts: 2 unexpected supervisor software interrupt(s) (cause 1)",
        },
        Arch::X86_64 => SoftInt {
            instants_ms: [40, 50],
            warning: "unexpected software interrupt (vector 0x51) taken in user mode, acknowledged at the local APIC",
            expected: &[
                "interrupt: unexpected * (vector *) taken in * mode, *; counted, not logged again",
            ],
            count: "interrupts: 2 unexpected software interrupt(s) (vector 0x51)",
        },
    }
}

/// Two software interrupts, raised by the kernel (`softint=`: supervisor software interrupts
/// on RISC-V, self-IPIs on x86_64) while `spin` runs in user mode, are taken there and leave it
/// unharmed: one warning, two counted, the domain's slice intact in every period and its
/// normal exit.
fn unexpected_interrupt(out: &Outcome, arch: Arch) -> Result<(), String> {
    let SoftInt { instants_ms: [first_ms, _], warning: want, count, .. } = softint(arch);
    expect_ending(out, Ending::Kernel(0))?;
    let warnings: Vec<_> = out.log.iter().filter(|l| l.level == "WARN").collect();
    let [warning] = warnings[..] else {
        let lines: Vec<_> = warnings.iter().map(|l| l.to_string()).collect();
        return Err(format!("want exactly one warning, got:\n{}", lines.join("\n")));
    };
    if !warning.message.contains(want) {
        return Err(format!("the warning is not about the interrupt: {warning}"));
    }
    // Not before the first instant (10 ms on RISC-V); the interrupt is raised on the first
    // timer interrupt from user mode at or after it (at most a 10 ms period later) and taken
    // when the domain next runs (at most another period): by 20 ms after the instant.
    let (from, to) = (first_ms as f64 / 1000.0, (first_ms + 20) as f64 / 1000.0);
    let at: f64 = warning.timestamp.as_deref().and_then(|t| t.trim().parse().ok()).unwrap_or(-1.0);
    if !(from..=to).contains(&at) {
        return Err(format!("the interrupt was taken at {at} s, want {from} to {to} s"));
    }
    expect_line(out, count)?;
    let spin = qemu_run::cpu::spin_reports(out);
    let [report] = &spin[..] else { return Err(format!("want one spin summary: {spin:?}")) };
    // 40 ms of complete 10 ms periods after the first boundary (within 1 us: on x86_64 the
    // domain's period is a whole number of ticks of a measured TSC rate, so the four come to a
    // few ns less), and the whole 5 ms slice in each within 10 us, as without interrupts.
    let whole = report.elapsed_ns.abs_diff(40_000_000) <= 1_000;
    if !whole || report.windows != 4 || report.deviation_ns() > 10_000 {
        return Err(format!("spin was disturbed: {report:?}"));
    }
    expect_exit(out, "spin", 0)?;
    let endings = verdict::endings(&out.log);
    if let Some((name, why)) =
        endings.iter().find(|(_, e)| matches!(e, DomainEnding::Terminated(_)))
    {
        return Err(format!("{name} was terminated: {why:?}"));
    }
    frames_returned(out)
}

/// The kernel's count of floating-point state loads on first use is `want`.
fn fp_loads(out: &Outcome, want: u64) -> Result<(), String> {
    let line = out.line("floating-point state loads on first use").map(|l| l.message.as_str());
    let got = line.and_then(|m| m.split_whitespace().nth(1)?.parse::<u64>().ok());
    if got == Some(want) {
        Ok(())
    } else {
        Err(format!("want {want} floating-point state loads, the kernel says: {line:?}"))
    }
}

/// The `static at 0x...` addresses and values a counter instance printed.
fn counter_rounds(out: &Outcome, name: &str) -> Vec<(String, u64)> {
    let prefix = format!("[counter-{name}] counter {name}: round ");
    out.log
        .iter()
        .filter_map(|l| l.message.strip_prefix(&prefix))
        .filter_map(|rest| {
            let addr = rest.split("static at ").nth(1)?.split(',').next()?.to_string();
            let value = rest.rsplit("value ").next()?.trim().parse().ok()?;
            Some((addr, value))
        })
        .collect()
}

pub(super) fn domain_tests(p: &str, arch: Arch) -> Vec<QemuTest> {
    let boot = || Boot::new(arch);
    let mut tests = vec![
        QemuTest {
            name: format!("{p}domains::default_manifest"),
            boot: boot(),
            system: Some(("manifests/default.toml".into(), Spoil::Nothing)),
            expected: &[],
            check: Box::new(|out| {
                expect_ending(out, Ending::Kernel(0))?;
                ["hello", "gold", "silver", "bronze"]
                    .iter()
                    .try_for_each(|n| expect_exit(out, n, 0))?;
                expect_line(out, "[gold] spin: iterations=")?;
                frames_returned(out)
            }),
        },
        QemuTest {
            name: format!("{p}domains::private_statics"),
            boot: boot(),
            system: Some(("tests/manifests/two-counters.toml".into(), Spoil::Nothing)),
            expected: &[],
            check: Box::new(|out| {
                expect_ending(out, Ending::Kernel(0))?;
                let (a, b) = (counter_rounds(out, "a"), counter_rounds(out, "b"));
                let values = |r: &[(String, u64)]| r.iter().map(|x| x.1).collect::<Vec<_>>();
                if values(&a) != [1, 2, 3, 4] || values(&b) != [1, 2, 3, 4] {
                    return Err(format!(
                        "values not private: a {:?}, b {:?}",
                        values(&a),
                        values(&b)
                    ));
                }
                let addr = |r: &[(String, u64)]| {
                    r.iter().map(|x| x.0.clone()).collect::<std::collections::BTreeSet<_>>()
                };
                let (aa, ab) = (addr(&a), addr(&b));
                if aa.len() != 1 || ab.len() != 1 || aa == ab {
                    return Err(format!(
                        "static addresses: a {aa:?}, b {ab:?}; want one each, different"
                    ));
                }
                frames_returned(out)
            }),
        },
        QemuTest {
            name: format!("{p}domains::corrupt_manifest_rejected"),
            boot: boot(),
            system: Some(("tests/manifests/two-counters.toml".into(), Spoil::ManifestByte)),
            expected: &["boot image rejected: manifest: Checksum *"],
            check: Box::new(|out| {
                expect_ending(out, Ending::Kernel(3))?;
                expect_line(out, "boot image rejected: manifest")?;
                if out.has("[counter-") {
                    Err("a domain ran from a corrupt manifest".into())
                } else {
                    Ok(())
                }
            }),
        },
    ];
    tests.push(QemuTest {
        name: format!("{p}domains::syscall_errors"),
        boot: boot(),
        system: Some(("tests/manifests/syscheck.toml".into(), Spoil::Nothing)),
        expected: &[],
        check: Box::new(|out| {
            expect_ending(out, Ending::Kernel(0))?;
            if out.has("syscheck: FAILED") {
                let failed: Vec<_> = out
                    .log
                    .iter()
                    .filter(|l| l.message.contains("FAILED"))
                    .map(|l| l.message.clone())
                    .collect();
                return Err(failed.join("\n"));
            }
            expect_line(out, "checks, 0 failed")?;
            expect_line(out, "syscheck: ok map_batch's whole flush shows the fresh frames")?;
            // The accessed and dirty bits, set by the hardware (or the kernel's fault path),
            // cleared with the TLB flushed, returned by remap (the new page clean); every
            // refused page_state.
            for what in [
                "page_state: freshly mapped pages report mapped only, unmapped ones 0",
                "page_state: a read sets accessed",
                "page_state: a write sets dirty",
                "page_state: after clearing, neither bit",
                "page_state: a read after clearing sets accessed again",
                "page_state: a write after clearing sets dirty again",
                "page_state: protect keeps the bits",
                "page_state: remap returns dirty",
                "page_state: remap starts the new page clean",
                "page_state: remap returns accessed, not dirty",
                "page_state: refused calls wrote nothing",
                "page_state: refused calls cleared nothing",
                "a write to a read-only page faults to its driver",
                "page_state: the retried write dirtied the page",
            ] {
                expect_line(out, &format!("syscheck: ok {what}"))?;
            }
            expect_exit(out, "syscheck", 0)?;
            expect_exit(out, "counter", 0)?;
            frames_returned(out)
        }),
    });
    tests.push(QemuTest {
        name: format!("{p}domains::syscall_fuzz"),
        boot: {
            let mut b = boot();
            b.timeout = Duration::from_secs(120);
            b
        },
        system: Some(("tests/manifests/fuzz.toml".into(), Spoil::Nothing)),
        // fuzz-block's block(u64::MAX), once every other domain has ended, is the one
        // all-blocked wake-up the run has (checked below: it returns WouldDeadlock).
        expected: &["every domain is blocked without a deadline: waking them all"],
        check: Box::new(|out| {
            expect_ending(out, Ending::Kernel(0))?;
            let problems: Vec<_> = out
                .log
                .iter()
                .map(|l| &l.message)
                .filter(|m| {
                    ["fuzz: missing ", "fuzz: undocumented ", "fuzz: FAILED"]
                        .iter()
                        .any(|p| m.contains(p))
                })
                .cloned()
                .collect();
            if !problems.is_empty() {
                return Err(problems.join("\n"));
            }
            expect_line(out, "pairs expected, 0 missing")?;
            expect_line(out, "fuzz: 0 undocumented, 0 failures")?;
            expect_exit(out, "fuzz", 0)?;
            expect_exit(out, "fuzz-driver", 0)?;
            // Each fuzzer reports 0 missing: together they observe every documented pair,
            // the driver-only ones included.
            let reports =
                out.log.iter().filter(|l| l.message.contains("pairs expected, 0 missing"));
            if reports.count() != 2 {
                return Err("want a report of 0 missing pairs from both fuzzers".into());
            }
            // The helper domains: one valid block(u64::MAX) once the others are gone, and a
            // full guarantee for the fuzzer's stretch_rights NoMemory.
            expect_line(out, "[fuzz-block] fuzz: block -> WouldDeadlock")?;
            expect_exit(out, "fuzz-block", 0)?;
            expect_line(out, "[fuzz-fill] fuzz: filled ")?;
            expect_exit(out, "fuzz-fill", 0)?;
            let values: Vec<u64> = counter_rounds(out, "canary").iter().map(|r| r.1).collect();
            if values != (1..=40).collect::<Vec<u64>>() {
                return Err(format!("the canary counted {values:?}, want 1..=40"));
            }
            frames_returned(out)
        }),
    });
    // In virtual time, so that the wake-up is timed by the kernel's clock whatever the host
    // does, and the hour of a stale timer passes at once rather than outliving the timeout.
    tests.push(QemuTest {
        name: format!("{p}domains::dead_timer_leaves_deadlock_wakeup"),
        boot: {
            let mut b = boot();
            b.icount = true;
            b.timeout = Duration::from_secs(60);
            b
        },
        system: Some(("tests/manifests/stale-timer.toml".into(), Spoil::Nothing)),
        expected: &["every domain is blocked without a deadline: waking them all"],
        check: Box::new(|out| {
            expect_ending(out, Ending::Kernel(0))?;
            expect_line(out, "[timer] fuzz: timer armed 3600 s ahead")?;
            expect_exit(out, "timer", 0)?;
            let at = |text: &str| -> Result<f64, String> {
                let line = out.line(text).ok_or(format!("no log line contains `{text}`"))?;
                line.timestamp
                    .as_deref()
                    .and_then(|t| t.trim().parse().ok())
                    .ok_or(format!("no time on `{line}`"))
            };
            // Not before the neighbour's exit (until then a domain could run), and at once
            // after it: not when the dead domain's timer would have fired, an hour on.
            let exited = at("domain timer exited with status 0")?;
            let woken = at("[block] fuzz: block -> WouldDeadlock")?;
            if !(exited..=exited + DEAD_TIMER_WAKEUP_WITHIN_S).contains(&woken) {
                return Err(format!(
                    "the deadlock's wake-up came at {woken} s, want {exited} s (the neighbour's \
                     exit) to {DEAD_TIMER_WAKEUP_WITHIN_S} s after"
                ));
            }
            expect_exit(out, "block", 0)?;
            frames_returned(out)
        }),
    });
    // The most domains a manifest may declare: 1,022 that sleep for 5 s beside two that yield
    // to each other. All are made, run and end, each sleeper wakes when its timer says, and
    // every frame comes back.
    let many = many_domains::asleep(many_domains::MOST_OTHERS)
        .map_or_else(|e| format!("target/bench/(not written: {e:#})"), |p| p.display().to_string());
    tests.push(QemuTest {
        name: format!("{p}domains::many_domains"),
        // Under -icount: the sleepers' exits are bounded in virtual time, whatever the host.
        boot: {
            let mut b = boot();
            b.icount = true;
            b.timeout = Duration::from_secs(300);
            b
        },
        system: Some((many, Spoil::Nothing)),
        expected: &[],
        check: Box::new(|out| {
            expect_ending(out, Ending::Kernel(0))?;
            let domains = manifest::MAX_DOMAINS;
            expect_line(out, &format!("run summary: {domains} domain(s)"))?;
            for name in ["switch-a", "switch-b"] {
                expect_line(out, &format!("[{name}] nullcall: 20000 calls in"))?;
                expect_line(out, &format!("domain {name} exited with status 0"))?;
            }
            let mut woken = 0;
            for line in &out.log {
                let Some(rest) = line.message.strip_prefix("domain idle-") else { continue };
                if !rest.ends_with(" exited with status 0") {
                    continue;
                }
                let at: f64 = line
                    .timestamp
                    .as_deref()
                    .and_then(|t| t.trim().parse().ok())
                    .ok_or(format!("no time on `{line}`"))?;
                // Each slept 5 s from its start, after the boot (under 1 s with 1,024 domains)
                // and within its first 100 ms period, and ran a few µs after waking.
                if !(MANY_SLEEP_S..=MANY_SLEEP_S + MANY_LATE_S).contains(&at) {
                    return Err(format!(
                        "`{line}`: want an exit {MANY_SLEEP_S} s to {} s after boot",
                        MANY_SLEEP_S + MANY_LATE_S
                    ));
                }
                woken += 1;
            }
            if woken != domains - 2 {
                return Err(format!("{woken} sleepers exited with status 0, want {}", domains - 2));
            }
            frames_returned(out)
        }),
    });
    // Under -icount, so that no timer interrupt falls inside a round and the count of state
    // loads is exact.
    let icount = || {
        let mut b = boot();
        b.icount = true;
        b
    };
    tests.push(QemuTest {
        name: format!("{p}domains::fp_state"),
        boot: icount(),
        system: Some(("tests/manifests/fp-state.toml".into(), Spoil::Nothing)),
        expected: &[],
        check: Box::new(|out| {
            expect_ending(out, Ending::Kernel(0))?;
            for d in ["fp-a", "fp-b"] {
                expect_line(
                    out,
                    &format!("[{d}] fpcheck: 200 rounds, 0 mismatches, sum 1.639946"),
                )?;
                expect_exit(out, d, 0)?;
            }
            // Each round of each domain finds the other's state in the registers (2 x 200
            // loads), and each domain's first use loads its state once more.
            fp_loads(out, 402)
        }),
    });
    tests.push(QemuTest {
        name: format!("{p}domains::fp_lazy"),
        boot: icount(),
        system: Some(("tests/manifests/fp-lazy.toml".into(), Spoil::Nothing)),
        expected: &[],
        check: Box::new(|out| {
            expect_ending(out, Ending::Kernel(0))?;
            expect_line(out, "[fp] fpcheck: 200 rounds, 0 mismatches, sum 1.639946")?;
            // The neighbour ran between the rounds: all its 100 rounds before fpcheck ended.
            let neighbour = last_position(out, "counter n: round 100,")?;
            if neighbour > position(out, "[fp] fpcheck: 200 rounds")? {
                return Err("the neighbour did not run between fpcheck's rounds".into());
            }
            expect_exit(out, "fp", 0)?;
            expect_exit(out, "counter", 0)?;
            // The neighbour never uses the unit: fpcheck's state is loaded once, on first use,
            // and stays in the registers across every switch.
            fp_loads(out, 1)?;
            frames_returned(out)
        }),
    });
    tests.push(QemuTest {
        name: format!("{p}domains::unexpected_interrupt"),
        boot: {
            let mut b = icount();
            let [first, second] = softint(arch).instants_ms;
            b.append = format!("softint={first}ms,{second}ms");
            b
        },
        system: Some(("tests/manifests/interrupt.toml".into(), Spoil::Nothing)),
        expected: softint(arch).expected,
        check: Box::new(move |out| unexpected_interrupt(out, arch)),
    });
    tests.push(QemuTest {
        name: format!("{p}domains::threads"),
        // In virtual time, so that the sleep's length does not depend on the host.
        boot: {
            let mut b = boot();
            b.icount = true;
            b
        },
        system: Some(("tests/manifests/threads.toml".into(), Spoil::Nothing)),
        expected: &[],
        check: Box::new(|out| {
            expect_ending(out, Ending::Kernel(0))?;
            let line =
                out.line("threads: 6 workers").ok_or("no result from threads")?.message.clone();
            let numbers: Vec<u64> =
                line.split(|c: char| !c.is_ascii_digit()).filter_map(|w| w.parse().ok()).collect();
            // workers, rounds, total, progress while one slept, sleep ms, activations
            let [6, 40, 240, during, slept, activations] = numbers[..] else {
                return Err(format!("threads: {line}"));
            };
            // Some of the 240 increments happen while the sleeper sleeps, and no more than all.
            if !(1..=240).contains(&during) {
                return Err(format!("progress while one slept should be 1..=240: {line}"));
            }
            // The sleeper asks for 20 ms (whole ms are printed). The domain has the best-effort
            // contract (no `cpu` in the manifest: latency hint 10 ms, slack time), so once the
            // sleep is over its thread runs within 10 ms: at most 30 ms in all.
            if !(THREADS_SLEEP_MS..=THREADS_SLEEP_MS + BEST_EFFORT_LATENCY_MS).contains(&slept) {
                return Err(format!("the sleeper should wake after 20 to 30 ms: {line}"));
            }
            if activations == 0 {
                return Err(format!("the domain was never activated: {line}"));
            }
            expect_exit(out, "threads", 0)?;
            expect_exit(out, "counter", 0)?;
            frames_returned(out)
        }),
    });
    tests.push(QemuTest {
        name: format!("{p}domains::channel_100k"),
        boot: boot(),
        system: Some(("tests/manifests/channel.toml".into(), Spoil::Nothing)),
        expected: &[],
        check: Box::new(|out| {
            expect_ending(out, Ending::Kernel(0))?;
            let line = out
                .line("chanpipe: received ")
                .ok_or("the receiver printed no result")?
                .message
                .clone();
            if !line.contains("received 100000 messages, 0 lost, 0 reordered, 0 corrupt") {
                return Err(format!("receiver: {line}"));
            }
            let blocked: u64 = line
                .rsplit("blocked ")
                .next()
                .and_then(|r| r.split_whitespace().next())
                .and_then(|n| n.parse().ok())
                .ok_or(format!("no block count in `{line}`"))?;
            if blocked == 0 {
                return Err("the receiver never blocked".into());
            }
            expect_exit(out, "producer", 0)?;
            expect_exit(out, "consumer", 0)?;
            frames_returned(out)
        }),
    });
    tests.push(QemuTest {
        name: format!("{p}domains::channel_peer_death"),
        boot: boot(),
        system: Some(("tests/manifests/channel-peer-death.toml".into(), Spoil::Nothing)),
        expected: &[],
        check: Box::new(|out| {
            expect_ending(out, Ending::Kernel(0))?;
            let died = position(out, "domain producer exited")?;
            let closed = position(out, "chanpipe: channel closed after 1000 messages")?;
            if closed < died {
                return Err("the receiver saw the channel closed before the sender died".into());
            }
            expect_exit(out, "consumer", 0)?;
            frames_returned(out)
        }),
    });
    // Each fault's report (the fault, where its address lies) and the termination.
    let illegal: &[&str] = match arch {
        Arch::Riscv64 => &[
            "illegal instruction (instruction bits",
            "pc=0x",
            "<__tessera_main+",
            // The instruction trapped first with the FP unit off, loaded the domain's
            // floating-point state, and was reported when it trapped again.
            "fp: 1 floating-point state loads on first use",
        ],
        // `ud2` raises #UD at once (the FP unit is not involved); its two opcode bytes are
        // reported.
        Arch::X86_64 => {
            &["illegal instruction (instruction bits 0xb0f)", "pc=0x", "<__tessera_main+"]
        }
    };
    // The kernel address `faulty` reads: the start of the kernel image's text.
    let (kernel, kernel_expected): (&[&str], Expected) = match arch {
        Arch::Riscv64 => (
            &["at address 0xffffffffc0200000", "outside the user half"],
            // ANCHOR: fault_kernel_expected
            &[
                "domain faulty: load page fault at address 0xffffffffc0200000, pc=0x*",
                "domain faulty: the address is outside the user half",
                "domain faulty terminated: load page fault",
            ],
            // ANCHOR_END: fault_kernel_expected
        ),
        Arch::X86_64 => (
            &["at address 0xffffffff80100000", "outside the user half"],
            &[
                "domain faulty: load page fault at address 0xffffffff80100000, pc=0x*",
                "domain faulty: the address is outside the user half",
                "domain faulty terminated: load page fault",
            ],
        ),
    };
    let faults: [(&'static str, &'static str, &[&str], Expected); 5] = [
        (
            "illegal",
            "illegal instruction",
            illegal,
            &[
                "domain faulty: illegal instruction (instruction bits 0x*), pc=0x*",
                "domain faulty terminated: illegal instruction",
            ],
        ),
        (
            "jump",
            "instruction page fault",
            &[
                "at address 0x100000000, pc=0x100000000 <_start+0x0>",
                "image stretch 0x100000000",
                "of domain counter-a, where it holds rights 0x0",
            ],
            &[
                "domain faulty: instruction page fault at address 0x100000000, pc=0x*",
                "domain faulty: the address is in image stretch 0x100000000..* of domain counter-a, where it holds rights 0x0",
                "domain faulty terminated: instruction page fault",
            ],
        ),
        (
            "write",
            "store page fault",
            &[
                "store page fault at address 0x102000000",
                "image stretch 0x102000000",
                "of domain counter-b, where it holds rights 0x0",
            ],
            FAULT_WRITE,
        ),
        (
            "guard",
            "store page fault",
            &["in the guard page below the stack", "of domain faulty"],
            &[
                "domain faulty: store page fault at address 0x*, pc=0x*",
                "domain faulty: the address is in the guard page below the stack * of domain faulty",
                "domain faulty terminated: store page fault",
            ],
        ),
        ("kernel", "load page fault", kernel, kernel_expected),
    ];
    for (kind, cause, needles, expected) in faults {
        tests.push(QemuTest {
            name: format!("{p}domains::fault_{kind}"),
            boot: boot(),
            system: Some((format!("tests/manifests/fault-{kind}.toml"), Spoil::Nothing)),
            expected,
            check: Box::new(move |out| {
                expect_ending(out, Ending::Kernel(0))?;
                let died = position(out, &format!("domain faulty terminated: {cause}"))?;
                needles.iter().try_for_each(|n| expect_line(out, n))?;
                // The survivors keep counting after the fault and finish.
                for name in ["a", "b"] {
                    let last = last_position(out, &format!("counter {name}: round 12,"))?;
                    if last < died {
                        return Err(format!("counter-{name} made no progress after the fault"));
                    }
                    expect_exit(out, &format!("counter-{name}"), 0)?;
                }
                frames_returned(out)
            }),
        });
    }
    tests
}
