//! The QEMU suite of address space as a contracted resource (both architectures): each domain places its
//! stretches in its own partition of the stretch region, of the size of its manifest's
//! `address_space`, and ranges are reused after a stretch is destroyed, so no domain can deny
//! address space to another; manifests in `tests/manifests/address-space/`, run with the app
//! `stretchstorm` in virtual time.
//!
//! - `reuse`: `storm` (a 4M guarantee, the default 1G quota) creates and destroys a 256M
//!   managed stretch 10,000 times, checking on each that a reused range shows nothing of the
//!   stretch before it, while `neighbour` creates and destroys stretches every 10 ms by its own
//!   clock for as long as `storm` lives; no call of either fails.
//! - `quota`: `hog` (a 64M quota) creates 16M managed stretches until `NoAddressSpace`, after
//!   as many as its partition holds, and keeps them while `neighbour` creates and destroys
//!   stretches every 5 ms; none of the neighbour's calls fails.

use std::time::Duration;

use crate::harness::{QemuTest, expect_ending, expect_exit};
use qemu_run::log::field;
use qemu_run::qemu::{Boot, Ending, Outcome};
use system_image::system::Spoil;
use tool_base::Arch;

/// One mebibyte.
const MIB: u64 = 1 << 20;
/// The page size, and the guard page below each range the kernel places.
const PAGE: u64 = abi::PAGE_SIZE as u64;
/// A domain's stack (16 pages) and control block (1 page), each with a guard page below: what
/// its partition holds before anything it creates (`manifest::DOMAIN_FIXED_FRAMES`,
/// `manifest::DOMAIN_FIXED_RANGES`).
const FIXED: u64 = manifest::DOMAIN_FIXED_FRAMES * PAGE + manifest::DOMAIN_FIXED_RANGES * PAGE;

/// `reuse`: storm's cycles, stretch size and quota (the default), as its manifest gives them.
const REUSE_CYCLES: u64 = 10_000;
const REUSE_BYTES: u64 = 256 * MIB;
const REUSE_QUOTA: u64 = manifest::DEFAULT_ADDRESS_SPACE;
/// `reuse`: the neighbour's round interval, in ms (it runs as long as storm lives).
const REUSE_EVERY_MS: u64 = 10;

/// `quota`: hog's quota, stretch size and hold time (ms), as its manifest gives them.
const QUOTA: u64 = 64 * MIB;
const QUOTA_BYTES: u64 = 16 * MIB;
const QUOTA_HOLD_MS: u64 = 400;
/// `quota`: the neighbour's round interval and run time, in ms.
const QUOTA_EVERY_MS: u64 = 5;
const QUOTA_FOR_MS: u64 = 300;

/// How many stretches of `bytes` a partition of `quota` holds by the design: after the stack
/// and control block with their guard pages, each stretch takes its bytes and a guard page.
/// For `quota`: `(64M - 76K) / (16M + 4K)` = 3.
const fn stretches_held(quota: u64, bytes: u64) -> u64 {
    (quota - FIXED) / (bytes + PAGE)
}

/// The first log line containing `text`.
fn line_with<'a>(out: &'a Outcome, text: &str) -> Result<&'a str, String> {
    out.line(text).map(|l| l.message.as_str()).ok_or(format!("no log line contains `{text}`"))
}

/// The word after `key=` in `line`.
fn word<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let pattern = format!("{key}=");
    line.split(' ').find_map(|w| w.strip_prefix(pattern.as_str()))
}

/// The number after `key=` in `line`, or an error naming both.
fn number(line: &str, key: &str) -> Result<u64, String> {
    field(line, key).ok_or(format!("no number `{key}=` in `{line}`"))
}

/// How a neighbour's run ends.
#[derive(Clone, Copy)]
enum Stop {
    /// After `--for` this many ms.
    Time(u64),
    /// After the round that finds the domain it watches dead (`--while-alive`).
    Dead,
}

/// What a neighbour that makes a round every `every_ms` reported: `(first_ns, last_ns)`, once
/// the report says that none of its calls failed, that it stopped as `stop` says, and that it
/// kept its pace by its own clock: one round every `every_ms` from its first to its last (so at
/// most `span / every_ms + 1` rounds), and not fewer than 90% of them (a round delayed by more
/// than a whole interval is not made up); with `Stop::Time`, as many over its whole run.
fn neighbour(out: &Outcome, every_ms: u64, stop: Stop) -> Result<(u64, u64), String> {
    let line = line_with(out, "[neighbour] stretchstorm: neighbour attempts=")?;
    let (attempts, failed, rounds) =
        (number(line, "attempts")?, number(line, "failed")?, number(line, "rounds")?);
    if failed != 0 || word(line, "first_error") != Some("none") {
        return Err(format!("the neighbour's calls failed: {line}"));
    }
    // Two stretches a round: a nailed one and a managed one.
    if attempts != 2 * rounds {
        return Err(format!("the neighbour should make two stretches a round: {line}"));
    }
    let (first, last) = (number(line, "first_ns")?, number(line, "last_ns")?);
    if last < first {
        return Err(format!("the neighbour's last round came before its first: {line}"));
    }
    let paced = |span_ms: u64, what: &str| {
        let most = span_ms / every_ms + 1;
        let least = most * 9 / 10;
        if (least..=most).contains(&rounds) {
            Ok(())
        } else {
            Err(format!(
                "the neighbour made {rounds} rounds, not {least}..={most} (one every {every_ms} \
                 ms {what}): {line}"
            ))
        }
    };
    paced((last - first) / 1_000_000, "from its first round to its last")?;
    match stop {
        Stop::Time(for_ms) => {
            if word(line, "stopped") != Some("time") || last - first > for_ms * 1_000_000 {
                return Err(format!("the neighbour should run for {for_ms} ms: {line}"));
            }
            paced(for_ms, &format!("for {for_ms} ms"))?;
        }
        Stop::Dead => {
            if word(line, "stopped") != Some("dead") {
                return Err(format!("the neighbour should stop once storm has died: {line}"));
            }
        }
    }
    expect_exit(out, "neighbour", 0)?;
    Ok((first, last))
}

fn reuse(out: &Outcome) -> Result<(), String> {
    expect_ending(out, Ending::Kernel(0))?;
    let line = line_with(out, "[storm] stretchstorm: cycles=")?;
    if number(line, "cycles")? != REUSE_CYCLES
        || number(line, "failed")? != 0
        || word(line, "first_error") != Some("none")
    {
        return Err(format!(
            "storm should create and destroy its 256M stretch {REUSE_CYCLES} times without a \
             failure: {line}"
        ));
    }
    // A reused range showed the previous stretch's frame: a translation outlived its stretch.
    if number(line, "stale")? != 0 {
        return Err(format!("a reused range showed the previous stretch's frame: {line}"));
    }
    // The partition holds at most this many 256M stretches at once (3 by the design), so the
    // first 64 cycles used at most as many distinct ranges; at least one.
    let distinct = number(line, "distinct_bases")?;
    let most = REUSE_QUOTA / REUSE_BYTES;
    if !(1..=most).contains(&distinct) {
        return Err(format!(
            "storm's first 64 stretches lay at {distinct} different bases, more than its {most} \
             places in a 1G partition: {line}"
        ));
    }
    expect_exit(out, "storm", 0)?;
    let (start, end) = (number(line, "start_ns")?, number(line, "end_ns")?);
    let (first, last) = neighbour(out, REUSE_EVERY_MS, Stop::Dead)?;
    // The neighbour's rounds cover the storm: it began within two of its intervals of storm's
    // start, and made a round after storm's last cycle (after storm died).
    if first > start + 2 * REUSE_EVERY_MS * 1_000_000 || last < end {
        return Err(format!(
            "the neighbour's rounds ({first}..{last} ns) should cover storm's cycles \
             ({start}..{end} ns)"
        ));
    }
    super::domains::frames_returned(out)
}

fn quota(out: &Outcome) -> Result<(), String> {
    expect_ending(out, Ending::Kernel(0))?;
    let line = line_with(out, "[hog] stretchstorm: created=")?;
    if word(line, "error") != Some("NoAddressSpace") {
        return Err(format!("hog should end with NoAddressSpace: {line}"));
    }
    // At most the quota's worth of stretches; at least those that fit beside the stack and
    // control block and the guard pages, less one. The design gives exactly
    // `stretches_held(QUOTA, QUOTA_BYTES)`, 3.
    let created = number(line, "created")?;
    let most = QUOTA / QUOTA_BYTES;
    let least = (QUOTA - FIXED) / QUOTA_BYTES - 1;
    if !(least..=most).contains(&created) {
        return Err(format!(
            "hog created {created} stretches of 16M in a 64M quota, not {least}..={most} ({} \
             by the design): {line}",
            stretches_held(QUOTA, QUOTA_BYTES)
        ));
    }
    expect_exit(out, "hog", 0)?;
    let at = number(line, "at_ns")?;
    let (_, last) = neighbour(out, QUOTA_EVERY_MS, Stop::Time(QUOTA_FOR_MS))?;
    // The neighbour went on creating stretches while hog held its whole quota: for most of its
    // run after hog was refused (its run is 300 ms; hog's first stretches take well under
    // 50 ms), and all before hog let them go.
    let hold = QUOTA_HOLD_MS * 1_000_000;
    if last < at + (QUOTA_FOR_MS - 50) * 1_000_000 || last > at + hold {
        return Err(format!(
            "the neighbour's last round ({last} ns) should come at least 250 ms after hog's \
             refusal ({at} ns) and before hog let its stretches go ({} ns)",
            at + hold
        ));
    }
    super::domains::frames_returned(out)
}

pub(super) fn address_space_tests(p: &str, arch: Arch) -> Vec<QemuTest> {
    let test = |name: &str, manifest: &str, timeout: u64, check: fn(&Outcome) -> _| {
        let mut boot = Boot::new(arch);
        // Virtual time: the neighbour's rounds follow its own clock, the same in every run.
        boot.icount = true;
        boot.timeout = Duration::from_secs(timeout);
        QemuTest {
            name: format!("{p}address_space::{name}"),
            boot,
            system: Some((format!("tests/manifests/address-space/{manifest}"), Spoil::Nothing)),
            expected: &[],
            check: Box::new(check),
        }
    };
    vec![
        // storm's 10,000 cycles took 2.7 ms each, 27 s of virtual time, and the boot about
        // 60 s of a host's time when this was written.
        test("reuse", "reuse.toml", 400, reuse),
        test("quota", "quota.toml", 60, quota),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use qemu_run::log::LogLine;

    fn outcome(lines: &[&str]) -> Outcome {
        let line =
            |m: &&str| LogLine { level: "INFO".into(), timestamp: None, message: m.to_string() };
        Outcome {
            ending: Ending::Kernel(0),
            log: lines.iter().map(line).collect(),
            stderr: String::new(),
            wall: Duration::ZERO,
        }
    }

    const FRAMES: &str = "frames: 14740 free after all domains ended, 14740 before they started";
    const HEAP: &str = "kernel heap: 9448 bytes in use at the end, 9448 once the domains were made";

    #[test]
    fn the_design_holds_three_16m_stretches_in_64m() {
        assert_eq!(FIXED, 76 * 1024);
        assert_eq!(stretches_held(QUOTA, QUOTA_BYTES), 3);
        assert_eq!(stretches_held(REUSE_QUOTA, REUSE_BYTES), 3);
    }

    #[test]
    fn reuse_passes_by_the_design_and_fails_as_today() {
        let storm = "[storm] stretchstorm: cycles=10000 failed=0 first_error=none \
                     first_failed_cycle=none distinct_bases=1 stale=0 start_ns=2550700 \
                     end_ns=18400000000";
        let neighbour = "[neighbour] stretchstorm: neighbour attempts=3680 failed=0 rounds=1840 \
                         first_error=none first_ns=7792500 last_ns=18407792500 stopped=dead";
        let good = [
            storm,
            neighbour,
            "run summary: 2 domain(s)",
            "  storm: exited with status 0",
            "  neighbour: exited with status 0",
            FRAMES,
            HEAP,
        ];
        reuse(&outcome(&good)).unwrap();
        // Before partitions and reuse: one bump allocator over the region, which runs out after
        // 511 cycles, for storm and for its neighbour.
        let today = [
            "[storm] stretchstorm: cycles=10000 failed=9489 first_error=NoAddressSpace \
             first_failed_cycle=511 distinct_bases=64 stale=0 start_ns=2551000 end_ns=3063571800",
            "[neighbour] stretchstorm: neighbour attempts=620 failed=600 rounds=310 \
             first_error=NoAddressSpace first_ns=7792800 last_ns=3097798400 stopped=dead",
            "run summary: 2 domain(s)",
            "  storm: exited with status 1",
            "  neighbour: exited with status 1",
            FRAMES,
            HEAP,
        ];
        let why = reuse(&outcome(&today)).unwrap_err();
        assert!(why.contains("without a failure"), "{why}");
        // A stale translation, a neighbour that stopped early, or one that failed once.
        let stale = good.map(|l| l.replace("stale=0", "stale=1"));
        let stale: Vec<&str> = stale.iter().map(String::as_str).collect();
        assert!(reuse(&outcome(&stale)).unwrap_err().contains("previous stretch's frame"));
        let early = good.map(|l| {
            l.replace("rounds=1840", "rounds=1000")
                .replace("attempts=3680", "attempts=2000")
                .replace("last_ns=18407792500", "last_ns=10000000000")
        });
        let early: Vec<&str> = early.iter().map(String::as_str).collect();
        assert!(reuse(&outcome(&early)).unwrap_err().contains("should cover storm's cycles"));
        let by_time = good.map(|l| l.replace("stopped=dead", "stopped=time"));
        let by_time: Vec<&str> = by_time.iter().map(String::as_str).collect();
        assert!(reuse(&outcome(&by_time)).unwrap_err().contains("once storm has died"));
        let slow = good.map(|l| l.replace("rounds=1840", "rounds=1500").replace("=3680", "=3000"));
        let slow: Vec<&str> = slow.iter().map(String::as_str).collect();
        assert!(reuse(&outcome(&slow)).unwrap_err().contains("not 1656..=1841"));
        let once = good.map(|l| l.replace("failed=0 rounds", "failed=1 rounds"));
        let once: Vec<&str> = once.iter().map(String::as_str).collect();
        assert!(reuse(&outcome(&once)).unwrap_err().contains("neighbour's calls failed"));
    }

    #[test]
    fn quota_passes_by_the_design_and_fails_as_today() {
        let neighbour = "[neighbour] stretchstorm: neighbour attempts=120 failed=0 rounds=60 \
                         first_error=none first_ns=7792500 last_ns=302792500 stopped=time";
        let hog = "[hog] stretchstorm: created=3 error=NoAddressSpace at_ns=2600000";
        let good = [
            hog,
            neighbour,
            "run summary: 2 domain(s)",
            "  hog: exited with status 0",
            "  neighbour: exited with status 0",
            FRAMES,
            HEAP,
        ];
        quota(&outcome(&good)).unwrap();
        for created in [2, 4] {
            let other = good.map(|l| l.replace("created=3", &format!("created={created}")));
            let other: Vec<&str> = other.iter().map(String::as_str).collect();
            quota(&outcome(&other)).unwrap();
        }
        for created in [1, 5] {
            let other = good.map(|l| l.replace("created=3", &format!("created={created}")));
            let other: Vec<&str> = other.iter().map(String::as_str).collect();
            assert!(quota(&outcome(&other)).unwrap_err().contains("3 by the design"));
        }
        // Before quotas: the guarantee runs out first.
        let today = good.map(|l| {
            if l == hog { "[hog] stretchstorm: created=30 error=NoMemory at_ns=3443600" } else { l }
        });
        assert!(quota(&outcome(&today)).unwrap_err().contains("should end with NoAddressSpace"));
    }
}
