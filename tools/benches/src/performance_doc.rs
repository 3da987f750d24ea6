//! `docs/performance.md`, generated from the baseline: every kept figure with its unit,
//! tolerance, anchor and goal, one column per architecture, so a reader sees at a glance where
//! Tessera stands on each.
//!
//! `cargo xtask bench all --update-baseline` writes it with the baseline; a unit test fails
//! when it differs from what the committed baseline gives (`UPDATE_DOCS=1 cargo test -p benches
//! performance_doc` rewrites it).

use super::baseline::Baseline;
use super::figures::{self, Better};
use super::net;

/// Where the doc lives, relative to the repository's root.
pub const PATH: &str = "docs/performance.md";

/// What each bench measures, for the doc's section headings.
fn bench_title(bench: &str) -> &'static str {
    match bench {
        "boot" => "Boot (`cargo xtask bench boot`)",
        "ipc" => "System calls and communication (`cargo xtask bench ipc`)",
        "sched" => "CPU contracts (`cargo xtask bench sched`)",
        "canary" => "A canary under hostile load (`cargo xtask bench canary`)",
        "fault" => "Self-paging (`cargo xtask bench fault`)",
        "disk_raw" => "The raw block path (`cargo xtask bench disk-raw`)",
        "net" => "The network path (`cargo xtask bench net`)",
        "disk" => "Disk scheduling on the Deskstar model (`cargo xtask bench disk`)",
        "paging" => "The Heracles hierarchy (`cargo xtask bench paging`)",
        "remote" => "Remote paging (`cargo xtask bench remote`)",
        _ => "Other",
    }
}

/// What a bench's section says before its table, beyond when it was measured: what is
/// measured, on which clock, and how to read it ("" for most).
fn bench_intro(bench: &str) -> String {
    match bench {
        "net" => format!(
            "One machine, two virtio-net driver domains (10.0.0.1 and 10.0.0.2) on two NICs of \
             one QEMU hub, each serving one `netping` client through smoltcp: a UDP round trip \
             between two nodes whose every part (both drivers with their stacks, both clients, \
             the kernel) runs on the one clock of `-icount shift=0,sleep=off`, the cards moving \
             frames at points of that virtual time (`qemu_run::qemu::NIC_VIRTUAL_TIME`). A round \
             trip's instructions are both drivers' and both clients' CPU accounts (their code and \
             their system calls; the clients make and check every payload byte), the difference \
             of two boots that differ only in their rounds over the difference of their pings; \
             `cargo xtask bench net` shows the drivers' and the clients' parts and the kernel's \
             rest beside it. The idle figure is a driver's CPU per second of virtual time while \
             its one client waits on an open port with nothing on the wire, by difference of a \
             {} ms and a {} ms run: an interrupt-driven driver uses none. The stream figures \
             use `netbench` on the same two drivers: one stream of {} datagrams of 1,472 bytes \
             sent as fast as the driver takes them (payload Mbit/s by the sender's clock, under \
             the stack's 100 Mbit/s link model, which bounds it at 95.7), and two saturated \
             streams under 1 ms and 2 ms of link time in every 10 ms (`{}`; the first's share of \
             their link time minus a third). Runs of several machines (`cargo xtask cluster`) \
             run on the paced clock (`-icount shift=0,sleep=on`), not deterministic, and are not \
             measured here.",
            show(net::IDLE_SHORT as f64),
            show(net::IDLE_LONG as f64),
            show(net::STREAM_DATAGRAMS as f64),
            net::CONTRACTS_MANIFEST
        ),
        "remote" => "One machine per architecture under `-icount shift=0,sleep=off`: `heracles` \
             runs filter (three 256 KiB channels in 512 KiB of memory, 1/16 of the thesis's) in \
             a stretch that pages to one `paging-server` (or two, each page mirrored on both) \
             behind a second virtio-net driver domain on the same QEMU hub, under the stack's \
             100 Mbit/s link model, with the Deskstar 34GXP model below its local disk. The run \
             times are the program's own clock; the client's instructions per remote fault are \
             the `heracles` domain's CPU account less that of the same program all in memory, \
             over the faults that read their page from the server (each with its share of the \
             evictions' writes); the server's are what the paging server charged that client. \
             `cargo xtask bench remote` runs compress, matmul and filter against the local disk, \
             a small compressed cache and both mirrors, beside the thesis's findings."
            .to_string(),
        _ => String::new(),
    }
}

/// A number as the doc shows it: thousands separated, at most two decimals.
fn show(value: f64) -> String {
    let rounded = (value * 100.0).round() / 100.0;
    let rounded = if rounded == 0.0 { 0.0 } else { rounded };
    let text = format!("{rounded}");
    let (int, frac) = text.split_once('.').map_or((text.as_str(), None), |(i, f)| (i, Some(f)));
    let (sign, digits) = int.strip_prefix('-').map_or(("", int), |d| ("-", d));
    let mut grouped = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    match frac {
        Some(f) => format!("{sign}{grouped}.{f}"),
        None => format!("{sign}{grouped}"),
    }
}

/// The doc's text for `baseline`.
pub fn generate(baseline: &Baseline) -> String {
    let mut md = String::from(
        "# Performance\n\n\
         <!-- Generated from bench/baseline.toml by xtask: do not edit. `cargo xtask bench all\n\
         --update-baseline` rewrites both. -->\n\n\
         Every figure Tessera keeps, as measured at the commit its table names. Each section says\n\
         whether its figures are deterministic: instructions are guest nanoseconds under `-icount\n\
         shift=0,sleep=off` (one instruction a nanosecond), shares and deviations are measured in\n\
         that virtual time by the domains' own clocks and work, and such figures repeat exactly\n\
         from boot to boot; those of the raw block path do not (the device's completions land\n\
         where QEMU's threads put them, on the host's clock). `cargo xtask bench check` measures\n\
         them again and fails when one is worse than here by more than its tolerance; `cargo xtask\n\
         bench all` prints them beside the wall-clock figures, which are never kept.\n\n\
         Anchors are Linux 6.1 in the same QEMU settings (x86_64 `q35`, one vCPU; see the project's\n\
         research notes, and [anchors.md](anchors.md) for those measured by a command in this\n\
         repository) unless they say otherwise; Tessera's figures are in the column of their\n\
         architecture. Goals are those the issues set.\n",
    );
    let mut benches: Vec<&str> = Vec::new();
    for t in &baseline.tables {
        if !benches.contains(&t.bench.as_str()) {
            benches.push(&t.bench);
        }
    }
    for bench in benches {
        md.push_str(&format!("\n## {}\n", bench_title(bench)));
        let tables: Vec<_> = baseline.tables.iter().filter(|t| t.bench == bench).collect();
        let measured: Vec<String> =
            tables.iter().map(|t| format!("{} at `{}`", t.arch, t.commit)).collect();
        let repeat = if figures::deterministic(bench) {
            "are deterministic (the same on every boot)"
        } else {
            "are not deterministic (the median of several boots; they move from run to run)"
        };
        let intro = bench_intro(bench);
        if !intro.is_empty() {
            md.push_str(&format!("\n{intro}\n"));
        }
        md.push_str(&format!(
            "\nMeasured: {}. Its figures {repeat}.\n\n| figure |",
            measured.join(", ")
        ));
        for t in &tables {
            md.push_str(&format!(" {} |", t.arch));
        }
        md.push_str(" unit | better | tolerance | anchor | goal |\n|---|");
        md.push_str(&"---:|".repeat(tables.len()));
        md.push_str("---|---|---|---|---|\n");
        // Every key of any architecture, in the order the tables give them.
        let mut keys: Vec<&str> = Vec::new();
        for t in &tables {
            for (key, _) in &t.figures {
                if !keys.contains(&key.as_str()) {
                    keys.push(key);
                }
            }
        }
        for key in keys {
            let specs: Vec<_> =
                tables.iter().filter_map(|t| figures::lookup(&t.arch, &t.bench, key)).collect();
            let Some(spec) = specs.first() else { continue };
            let values: Vec<String> = tables
                .iter()
                .map(|t| {
                    t.figures.iter().find(|(k, _)| k == key).map_or("-".into(), |(_, v)| show(*v))
                })
                .collect();
            let better = match spec.better {
                Better::Lower => "lower".to_string(),
                Better::Higher => "higher".to_string(),
                Better::Toward(x) => format!("toward {}", show(x)),
            };
            // A goal the architectures share is given once, otherwise each one's (those that have one).
            let goal = if specs.iter().all(|s| s.goal == spec.goal) {
                spec.goal.to_string()
            } else {
                let each: Vec<String> = tables
                    .iter()
                    .zip(&specs)
                    .filter(|(_, s)| !s.goal.is_empty())
                    .map(|(t, s)| format!("{}: {}", t.arch, s.goal))
                    .collect();
                each.join("; ")
            };
            md.push_str(&format!(
                "| {} <br>`{key}` | {} | {} | {better} | {} | {} | {} |\n",
                spec.label,
                values.join(" | "),
                spec.unit,
                spec.tolerance,
                if spec.anchor.is_empty() { "-" } else { spec.anchor },
                if goal.is_empty() { "-" } else { &goal },
            ));
        }
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::baseline;
    use tool_base::util;

    #[test]
    fn numbers_read_well() {
        assert_eq!(show(275.0), "275");
        assert_eq!(show(7202.8), "7,202.8");
        assert_eq!(show(-0.004), "0");
        assert_eq!(show(-1234.567), "-1,234.57");
        assert_eq!(show(16957.0), "16,957");
    }

    /// The committed doc is what the committed baseline gives (`UPDATE_DOCS=1` rewrites it).
    #[test]
    fn performance_doc_is_current() {
        let root = util::root();
        let text = std::fs::read_to_string(root.join(baseline::PATH)).unwrap();
        let b = baseline::parse(baseline::PATH, &text).unwrap_or_else(|e| panic!("{e}"));
        let want = generate(&b);
        let path = root.join(PATH);
        if std::env::var_os("UPDATE_DOCS").is_some() {
            std::fs::write(&path, &want).unwrap();
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            have == want,
            "{PATH} is not what {} gives: run `UPDATE_DOCS=1 cargo test -p benches performance_doc` \
             or `cargo xtask bench all --update-baseline`",
            baseline::PATH
        );
    }
}
