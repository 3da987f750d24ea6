//! The kept figures: what each deterministic benchmark figure means, which way is better, how
//! much it may drift before `cargo xtask bench check` fails, and what to compare it with.
//!
//! A figure is named by its architecture, its bench and its key (`riscv64`, `ipc`,
//! `domain_switch`). Its [`Spec`] lives here, with the bench that measures it in mind; its
//! value lives in `bench/baseline.toml` ([`super::baseline`]). Only deterministic figures are
//! kept: instruction counts and virtual time under `-icount shift=0,sleep=off`, shares and
//! deviations measured in virtual time, counts of deadlines missed. Wall-clock figures are
//! printed by the benches and never kept.
//!
//! Figures whose keys are made from a scenario and a domain (`fixed_five_share_error`) are
//! recognised by their suffix, so a new scenario or domain needs no new entry here.

use std::fmt;

/// Which way a figure improves.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Better {
    /// Smaller is better (costs, latencies, deviations, misses).
    Lower,
    /// Larger is better (rates).
    Higher,
    /// Closer to this value is better (errors around zero, ratios around their ideal).
    Toward(f64),
}

/// How far a figure may move the wrong way before the check fails.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Tolerance {
    /// A fraction of the baseline's value (0.01 is 1%).
    Relative(f64),
    /// An amount in the figure's unit.
    Absolute(f64),
}

impl Tolerance {
    /// The amount in the figure's unit, for a baseline of `base`.
    pub fn amount(self, base: f64) -> f64 {
        match self {
            Tolerance::Relative(r) => (base * r).abs(),
            Tolerance::Absolute(a) => a,
        }
    }
}

impl fmt::Display for Tolerance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tolerance::Relative(r) => write!(f, "{}%", r * 100.0),
            Tolerance::Absolute(a) => write!(f, "±{a}"),
        }
    }
}

/// What a kept figure is.
#[derive(Clone, Debug, PartialEq)]
pub struct Spec {
    /// What is measured, for people.
    pub label: String,
    /// Its unit.
    pub unit: &'static str,
    /// Which way is better.
    pub better: Better,
    /// How far it may move the wrong way.
    pub tolerance: Tolerance,
    /// What to compare it with (Linux in the same QEMU settings, the papers' figures), or "".
    pub anchor: &'static str,
    /// The goal an issue set for it, or "".
    pub goal: &'static str,
}

/// The Linux 6.1 anchor of the 64-byte UDP round trip (`net`, `round_trip_64`).
const LINUX_NET_ROUND_TRIP_64: &str =
    "Linux 6.1, two VMs on a VDE switch, both sides' guest instructions: 46,847 (docs/anchors.md)";
/// The Linux 6.1 anchor of the 1,472-byte UDP round trip (`net`, `round_trip_1472`).
const LINUX_NET_ROUND_TRIP_1472: &str =
    "Linux 6.1, two VMs on a VDE switch, both sides' guest instructions: 70,793 (docs/anchors.md)";
/// The Linux 6.1 anchor of the network driver's idle CPU (`net`, `driver_idle_us_per_s`).
const LINUX_NET_DRIVER_IDLE: &str = "Linux 6.1, a whole idle VM with its interface up: 65 (65,280 instructions per s; docs/anchors.md)";

/// Instruction counts may drift by 1%.
const INSTRUCTIONS: Tolerance = Tolerance::Relative(0.01);

fn spec(
    label: impl Into<String>,
    unit: &'static str,
    better: Better,
    tolerance: Tolerance,
    anchor: &'static str,
    goal: &'static str,
) -> Spec {
    Spec { label: label.into(), unit, better, tolerance, anchor, goal }
}

/// Whether `bench`'s kept figures repeat exactly from boot to boot: all but `disk_raw`'s, whose
/// device completions land at points of virtual time that QEMU's threads set on the host's
/// clock (its figure is the median of several pairs of boots, and moves from run to run).
pub fn deterministic(bench: &str) -> bool {
    bench != "disk_raw"
}

/// How far apart two boots may put figure `key` of `bench` (a fraction of its value) for
/// `--update-baseline` to keep it: nothing for every figure of a deterministic bench but the
/// disk schedulers' instructions. Those count the driver's instructions inside its scheduler
/// calls, and a device completion that QEMU's threads deliver at a point of virtual time set
/// by the host's clock can land inside one (the kernel's entry and exit then count too): two
/// boots measured USD's at 4,174 and 4,171 on riscv64, Aged-SPTF's at 4,259 and 4,253. They
/// may differ by a tenth of their 5% tolerance, so a real change still shows.
pub fn repeat_spread(bench: &str, key: &str) -> f64 {
    match (bench, key) {
        ("disk", "scheduler_instructions_usd" | "scheduler_instructions_aged_sptf") => 0.005,
        _ => 0.0,
    }
}

/// The spec of figure `key` of `bench` on `arch`, or `None` if no such figure is known.
pub fn lookup(arch: &str, bench: &str, key: &str) -> Option<Spec> {
    use Better::*;
    let linux_boot = "Linux 6.1: 1,734 ms from kernel timer start to `/init` (x86_64 q35)";
    Some(match (arch, bench, key) {
        ("riscv64", "boot", "virtual_us_rustsbi") => spec(
            "boot to shutdown, Tessera's firmware (virtual time)",
            "µs",
            Lower,
            Tolerance::Relative(0.02),
            linux_boot,
            "",
        ),
        ("riscv64", "boot", "virtual_us_opensbi") => spec(
            "boot to shutdown, QEMU's OpenSBI (virtual time)",
            "µs",
            Lower,
            Tolerance::Relative(0.02),
            linux_boot,
            "",
        ),
        (_, "boot", "virtual_us_16g") => spec(
            "boot to shutdown with 16 GiB of RAM (virtual time; Tessera's firmware on riscv64)",
            "µs",
            Lower,
            Tolerance::Relative(0.02),
            linux_boot,
            "within 10% of the 128 MiB boot (checked by the bench)",
        ),
        ("x86_64", "boot", "virtual_us") => spec(
            "boot to shutdown, PVH (virtual time)",
            "µs",
            Lower,
            Tolerance::Relative(0.02),
            linux_boot,
            "",
        ),
        (_, "boot", "virtual_us_1024_domains") => spec(
            "boot with 1,024 domains, to the first domain's start (virtual time)",
            "µs",
            Lower,
            Tolerance::Relative(0.02),
            "",
            "",
        ),
        (_, "ipc", "null_call") => spec(
            "null system call (trap, dispatch, return)",
            "instructions",
            Lower,
            INSTRUCTIONS,
            "Linux `getppid`: 338",
            "no slower than 275 (hardening issue)",
        ),
        (_, "ipc", "domain_switch") => spec(
            "domain switch (yield to the other of two domains)",
            "instructions",
            Lower,
            INSTRUCTIONS,
            "Linux `sched_yield` switch: 1,766 (SCHED_FIFO) to 2,133 (CFS)",
            "at most 1,000, flat in the number of domains (hardening issue)",
        ),
        (_, "ipc", "domain_switch_64_domains") => spec(
            "domain switch with 62 other domains asleep under contracts",
            "instructions",
            Lower,
            INSTRUCTIONS,
            "the two-domain switch",
            "within 10% of the two-domain switch (hardening issue)",
        ),
        (_, "ipc", "domain_switch_64_runnable") => spec(
            "domain switch with 62 other domains spinning out of slice",
            "instructions",
            Lower,
            INSTRUCTIONS,
            "the two-domain switch",
            "within 10% of the two-domain switch (hardening issue; `bench ipc` fails beyond it)",
        ),
        (_, "ipc", "domain_switch_1024_domains") => spec(
            "domain switch with 1,022 other domains asleep under contracts",
            "instructions",
            Lower,
            INSTRUCTIONS,
            "the two-domain switch",
            "within 10% of the two-domain switch (hardening issue)",
        ),
        (_, "ipc", "domain_switch_1024_runnable") => spec(
            "domain switch with 1,022 other domains spinning out of slice",
            "instructions",
            Lower,
            INSTRUCTIONS,
            "the two-domain switch",
            "within 10% of the two-domain switch (hardening issue; `bench ipc` fails beyond it)",
        ),
        (_, "ipc", "timed_wakeup") => spec(
            "timed wake-up (block until a passed instant, the kernel's expiry pass, the dispatch)",
            "instructions",
            Lower,
            INSTRUCTIONS,
            "",
            "",
        ),
        (_, "ipc", "timed_wakeup_1024_domains") => spec(
            "timed wake-up beside 1,022 domains asleep with instants ahead",
            "instructions",
            Lower,
            INSTRUCTIONS,
            "the timed wake-up alone",
            "within 50% of the wake-up alone: O(log N) (`bench ipc` fails beyond it)",
        ),
        (_, "ipc", "event_round_trip") => spec(
            "event round trip between two domains (8-byte message over a channel and back)",
            "instructions",
            Lower,
            INSTRUCTIONS,
            "Linux futex wake/wait round trip: 10,088; pipe round trip: 13,150",
            "at most 3,000 (hardening issue)",
        ),
        (_, "ipc", "channel_message") => spec(
            "IO-channel message, 64 slots, both ends (send, receive, events, blocking)",
            "instructions",
            Lower,
            INSTRUCTIONS,
            "Linux pipe round trip (two messages): 13,150",
            "",
        ),
        (arch, "fault", "round_trip") => spec(
            "user-level fault round trip (fault, activation, driver maps a zeroed frame, resume)",
            "instructions",
            Lower,
            INSTRUCTIONS,
            "Linux userfaultfd round trip: 25,728 (x86_64); Linux's in-kernel anonymous fault \
             zeroes the page, so it compares with `round_trip_zero_fill`",
            if arch == "x86_64" { "" } else { "at most 4,000 (hardening issue)" },
        ),
        (_, "disk_raw", k) => return disk_raw(k),
        (_, "net", "round_trip_64") => spec(
            "UDP round trip of 64 bytes between two driver domains of one machine: both \
             drivers' and both clients' CPU (instructions per round trip)",
            "instructions",
            Lower,
            INSTRUCTIONS,
            LINUX_NET_ROUND_TRIP_64,
            "",
        ),
        (_, "net", "round_trip_1472") => spec(
            "UDP round trip of 1,472 bytes (one full frame each way), as the 64-byte one",
            "instructions",
            Lower,
            INSTRUCTIONS,
            LINUX_NET_ROUND_TRIP_1472,
            "",
        ),
        (_, "net", "driver_idle_us_per_s") => spec(
            "a virtio-net driver domain's CPU serving a client with an open port and no traffic",
            "µs/s",
            Lower,
            // Near zero: a driver that polled every millisecond would spend thousands.
            Tolerance::Absolute(10.0),
            LINUX_NET_DRIVER_IDLE,
            "near 0: interrupt-driven, no polling (network issue)",
        ),
        (_, "net", "stream_mbps") => spec(
            "one stream of 1,472-byte UDP datagrams as fast as the driver takes them: payload \
             throughput by the sender's clock, under the stack's 100 Mbit/s link model",
            "Mbit/s",
            Higher,
            Tolerance::Relative(0.01),
            "the link model's bound: 95.7 Mbit/s of 1,472-byte payloads",
            "",
        ),
        (_, "net", "share_error_points") => spec(
            "two saturated streams under 1 ms and 2 ms of link time in 10 ms: the first's share \
             of their link time minus a third",
            "points",
            Toward(0.0),
            Tolerance::Absolute(0.5),
            "-",
            "within ±1 point (network issue: two streams keep their contracts)",
        ),
        (_, "disk", "two_readers_with_mbps") => spec(
            "two synchronous sequential readers 1 GB apart on the Deskstar model, anticipation on (Aged-SPTF)",
            "MB/s",
            Higher,
            Tolerance::Relative(0.02),
            "the paper: about 20 MB/s, within 6% of one reader",
            "",
        ),
        (_, "disk", "two_readers_without_mbps") => spec(
            "the same two readers, anticipation off",
            "MB/s",
            // The work-conserving scheduler's own throughput, the control that
            // `two_readers_with_mbps` is read against: more is never worse (anticipation's
            // gain is kept by `two_readers_with_mbps` itself, which must not fall).
            Higher,
            Tolerance::Relative(0.05),
            "the paper: about 5 MB/s (deceptive idleness)",
            "",
        ),
        (_, "disk", "usd_stream_mbps") => spec(
            "a sequential stream contracted for half the disk time beside a random hog (USD)",
            "MB/s",
            Higher,
            Tolerance::Relative(0.02),
            "",
            "at least 0.9 × its share × its 21.2 MB/s alone: 9.53",
        ),
        (_, "disk", "scheduler_instructions_aged_sptf") => spec(
            "the driver's time in its scheduler per request, Aged-SPTF with anticipation (boots agree within 0.5%)",
            "instructions",
            Lower,
            Tolerance::Relative(0.05),
            "Linux BFQ: about 1.9 µs per request (its documentation)",
            "",
        ),
        (_, "disk", "scheduler_instructions_usd") => spec(
            "the driver's time in its scheduler per request, USD with anticipation (boots agree within 0.5%)",
            "instructions",
            Lower,
            Tolerance::Relative(0.05),
            "",
            "",
        ),
        (_, "paging", "compress_prefetching_seconds") => spec(
            "compress (three 885 KiB buffers, 1 MiB of memory) paging with friends, run time",
            "s",
            Lower,
            Tolerance::Relative(0.02),
            "the thesis: compress is fastest with local disk and friends",
            "",
        ),
        (_, "paging", "matmul_wkdm_half_seconds") => spec(
            "matmul (250 x 500, 1 MiB of memory) with a WKdm cache of half its memory, run time",
            "s",
            Lower,
            Tolerance::Relative(0.02),
            "the thesis: matmul is fastest with a compressed cache of half its memory",
            "",
        ),
        (_, "paging", "matmul_wkdm_eighth_hit_percent") => spec(
            "matmul's hit rate with a WKdm cache of an eighth of its memory",
            "%",
            Higher,
            Tolerance::Absolute(1.0),
            "the thesis: a 2 MB cache of 16 MB gives matmul 79%",
            "",
        ),
        (_, "paging", "matmul_wkdm_hit_round_trip_p50") => spec(
            "median round trip of a fault served from a WKdm cache (matmul, evicting 16 ahead)",
            "instructions",
            Lower,
            Tolerance::Relative(0.05),
            "",
            "at most 15,000 (issue 15; not met: decompression alone is about 24,000)",
        ),
        (_, "paging", "compress_raw_hit_round_trip_p50") => spec(
            "median round trip of a fault served from a compressed cache's raw page that finds a \
             free frame (compress's text, WKdm, evicting 16 ahead)",
            "instructions",
            Lower,
            Tolerance::Relative(0.05),
            "",
            "at most 15,000 (issue 15)",
        ),
        (_, "remote", "filter_remote_seconds") => spec(
            "filter (three 256 KiB channels, 512 KiB of memory) paging to one server over the \
             100 Mbit/s link model, run time",
            "s",
            Lower,
            Tolerance::Relative(0.02),
            "the thesis: filter about 70% faster remote than on the local disk",
            "",
        ),
        (_, "remote", "filter_mirror_server_seconds") => spec(
            "filter paging to two servers, each page mirrored on both, run time",
            "s",
            Lower,
            Tolerance::Relative(0.02),
            "the thesis: remote paging mirrored to another host still beats the local disk",
            "",
        ),
        (_, "remote", "matmul_netc_packets_per_page") => spec(
            "matmul paging to one server, the client compressing every page it sends with WKdm \
             (netc=yes), packets both ways per page moved",
            "packets",
            Lower,
            Tolerance::Relative(0.02),
            "the thesis: a page compressed 2:1 is 2 packets instead of 3 (netc, §3.6)",
            "",
        ),
        (_, "remote", "matmul_compressed_remote_packets_per_page") => spec(
            "matmul with a WKdm compressed cache of an eighth of its memory over remote paging \
             (its pages sent as the cache holds them), packets both ways per page moved",
            "packets",
            Lower,
            Tolerance::Relative(0.02),
            "the thesis: the compressed cache's pages are 2 packets instead of 3",
            "",
        ),
        (_, "remote", "filter_compressed_remote_seconds") => spec(
            "filter with a WKdm compressed cache of an eighth of its memory over remote paging, \
             run time",
            "s",
            Lower,
            Tolerance::Relative(0.02),
            "the thesis: a 1 MB cache (12.5%) makes filter 15% faster remotely",
            "",
        ),
        (_, "remote", "filter_client_instructions_per_remote_fault") => spec(
            "the client domain's CPU per fault served by a server (filter, remote), beyond the \
             program's own",
            "instructions",
            Lower,
            Tolerance::Relative(0.05),
            "",
            "",
        ),
        (_, "remote", "filter_server_instructions_per_remote_fault") => spec(
            "the server's CPU charged to the client per fault served by it (filter, remote)",
            "instructions",
            Lower,
            Tolerance::Relative(0.05),
            "",
            "",
        ),
        (_, "disk", "waits_past_timeout") => spec(
            "anticipation waits that outlived their timeout",
            "waits",
            Lower,
            Tolerance::Absolute(0.0),
            "",
            "none, ever",
        ),
        (arch, "fault", "round_trip_zero_fill") => spec(
            "user-level fault round trip, the driver zero-filling the page",
            "instructions",
            Lower,
            INSTRUCTIONS,
            "Linux in-kernel anonymous fault (zeroes the page): 6,946 (x86_64)",
            if arch == "x86_64" {
                "at most 6,946, Linux's in-kernel fault (x86_64 issue)"
            } else {
                ""
            },
        ),
        (_, "fault", "neighbour_change") => spec(
            "change in a neighbour's work while `pager` faults continuously (2 of 10 ms each)",
            "%",
            Toward(0.0),
            Tolerance::Absolute(0.05),
            "",
            "within ±1% (self-paging issue)",
        ),
        (_, "fault", "fault_rate") => spec(
            "`pager`'s fault rate (zero-filling recycling driver, 2 of 10 ms)",
            "faults/s",
            Higher,
            Tolerance::Relative(0.01),
            "",
            "",
        ),
        (_, "fault", "fault_rate_ratio") => spec(
            "fault rate with `pager`'s slice doubled, over the fault rate",
            "ratio",
            Toward(2.0),
            Tolerance::Absolute(0.01),
            "",
            "2 within 10% (self-paging issue)",
        ),
        (_, "sched", "wakeup_median_us") => spec(
            "wake-up latency, median (send on a channel to the woken thread's first instruction)",
            "µs",
            Lower,
            Tolerance::Absolute(1.0),
            "",
            "within the latency hint plus 50 µs (CPU-contract issue)",
        ),
        (_, "sched", "wakeup_p99_us") => spec(
            "wake-up latency, 99th percentile",
            "µs",
            Lower,
            Tolerance::Absolute(2.0),
            "",
            "within the latency hint plus 50 µs (CPU-contract issue)",
        ),
        (_, "sched", "wakeup_max_us") => spec(
            "wake-up latency, largest",
            "µs",
            Lower,
            Tolerance::Absolute(2.0),
            "",
            "within the latency hint plus 50 µs (CPU-contract issue)",
        ),
        (_, "sched", k) => return sched_scenario(k),
        (_, "canary", "canary_work_percent") => spec(
            "a canary's work (500 µs of every 10 ms, no slack) beside 8 system-call fuzzers and \
             55 sleepers in 64 domains, as a percentage of its work alone",
            "%",
            Higher,
            Tolerance::Absolute(0.2),
            "",
            "at least 99% (issue 28; `bench canary` fails below it)",
        ),
        _ => return None,
    })
}

/// `{device}_{workload}_qd{depth}`: instructions per request of the raw block path.
fn disk_raw(key: &str) -> Option<Spec> {
    let (what, depth) = key.rsplit_once("_qd")?;
    let (device, workload) = what.split_once('_')?;
    let device_name = match device {
        "virtio" => "virtio-blk",
        "ahci" => "AHCI",
        _ => return None,
    };
    let workload_name = match workload {
        "rand4k_read" => "4 KiB random read",
        "rand4k_write" => "4 KiB random write",
        "seq64k_read" => "64 KiB sequential read",
        "seq64k_write" => "64 KiB sequential write",
        _ => return None,
    };
    let anchor = match (device, workload, depth) {
        ("virtio", "rand4k_read", "1") => {
            "Linux 6.1 (pread, O_DIRECT): 19,313; 11,800 with its I/O scheduler off"
        }
        ("ahci", "rand4k_read", "1") => "Linux 6.1 (pread, O_DIRECT): 20,161",
        ("virtio", "rand4k_read", "8") => "Linux 6.1, io_uring: 9,653",
        _ => "",
    };
    let goal = if depth == "1" { "under 10,000 (driver-domain issue)" } else { "" };
    Some(spec(
        format!(
            "{workload_name} on {device_name} at queue depth {depth}, client to driver domain and back (busy instructions per request)"
        ),
        "instructions",
        Better::Lower,
        // The device's completions land at points of virtual time that vary from boot to boot
        // (QEMU does the device's work on its own threads, on the host's clock): whether the
        // driver and the client find a completion before they block changes the path taken.
        // Within one run the median of five pairs of boots stays within a few percent; between
        // runs it moved by up to 12% with the host's load (how soon QEMU's threads finish the
        // requests, against the guest's instructions).
        Tolerance::Relative(0.15),
        anchor,
        goal,
    ))
}

/// `{scenario}_{domain}_share_error`, `{scenario}_{domain}_deviation_us`, `{scenario}_missed`.
fn sched_scenario(key: &str) -> Option<Spec> {
    use Better::*;
    if let Some(who) = key.strip_suffix("_share_error") {
        let (scenario, domain) = who.split_once('_')?;
        return Some(spec(
            format!("{scenario}: `{domain}`'s share of the CPU by its work, minus its contract"),
            "points",
            Toward(0.0),
            Tolerance::Absolute(0.05),
            "Linux SCHED_DEADLINE, 1/2/5 of 10 ms: within 0.1 point (-0.09 with the default tick)",
            "within ±1 point (CPU-contract issue)",
        ));
    }
    if let Some(who) = key.strip_suffix("_deviation_us") {
        let (scenario, domain) = who.split_once('_')?;
        return Some(spec(
            format!("{scenario}: `{domain}`'s largest distance of one period's CPU from its slice"),
            "µs",
            Lower,
            Tolerance::Absolute(1.0),
            "Linux SCHED_DEADLINE: 7-9 µs with HRTICK_DL, about 3,000 µs with the default tick",
            "at most 10 µs (CPU-contract issue)",
        ));
    }
    if let Some(scenario) = key.strip_suffix("_missed") {
        if scenario.is_empty() {
            return None;
        }
        return Some(spec(
            format!("{scenario}: deadlines missed, all domains (the kernel's accounts)"),
            "deadlines",
            Lower,
            Tolerance::Absolute(0.0),
            "",
            "0",
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenario_keys_are_recognised() {
        let s = lookup("riscv64", "sched", "fixed_five_share_error").unwrap();
        assert!(s.label.contains("`five`"));
        assert_eq!(s.better, Better::Toward(0.0));
        assert!(lookup("riscv64", "sched", "mixed_slow_deviation_us").is_some());
        assert!(lookup("riscv64", "sched", "death_missed").is_some());
        assert!(lookup("riscv64", "sched", "_missed").is_none());
        assert!(lookup("riscv64", "sched", "share_error").is_none());
        assert!(lookup("riscv64", "sched", "nonsense").is_none());
        assert!(lookup("riscv64", "nonsense", "null_call").is_none());
        assert_eq!(
            lookup("x86_64", "canary", "canary_work_percent").unwrap().better,
            Better::Higher
        );
        assert!(lookup("x86_64", "canary", "nonsense").is_none());
    }

    #[test]
    fn tolerance_amounts() {
        assert_eq!(Tolerance::Relative(0.01).amount(2000.0), 20.0);
        assert_eq!(Tolerance::Absolute(0.5).amount(2000.0), 0.5);
        assert_eq!(Tolerance::Relative(0.01).to_string(), "1%");
    }
}
