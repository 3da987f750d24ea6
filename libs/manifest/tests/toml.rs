//! The TOML front end against the manifests in the repository and hand-written cases.

#![cfg(feature = "toml")]

use std::path::{Path, PathBuf};

use manifest::{
    ChannelSpec, CpuSpec, DEFAULT_ADDRESS_SPACE, DeviceAddress, DeviceGrant, DiskBus, DiskSpec,
    DomainSpec, MAX_DOMAINS, MIB, Machine, Manifest, ManifestError, decode, parse, parse_file,
    parse_file_for, parse_for,
};

/// The apps the repository's manifests may name.
const APPS: &[&str] = &[
    "threads",
    "hello",
    "counter",
    "faulty",
    "nullcall",
    "syscheck",
    "fpcheck",
    "pingpong",
    "spin",
    "wakeup",
    "chanpipe",
    "fuzz",
    "virtio-blk",
    "ahci",
    "diskread",
    "blkbench",
    "heracles",
    "virtio-net",
    "netping",
    "netbench",
];

fn manifests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../manifests")
}

/// The `.toml` files directly in `dir`, sorted.
fn toml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    files
}

fn err(text: &str) -> ManifestError {
    parse("t.toml", text, APPS).unwrap_err()
}

const GOOD: &str = r#"
[system]
memory = "128M"

[[domain]]
name = "hello-a"
app = "hello"
args = ["--count", "3"]
cpu = { period = "10ms", slice = "2ms", extra = true, latency = "1ms" }
memory = { guaranteed = "256K", optimistic = "0" }

[[domain]]
name = "c"
app = "counter"
memory.guaranteed = 1048576
memory.optimistic = "2M"
"#;

/// Two domains joined by channels, one of them declared before the domains it names.
const CHANNELS: &str = r#"
[system]
memory = "128M"

[[channel]]
name = "back"
from = "consumer"
to = "producer"
slots = 2
slot_size = "4K"

[[domain]]
name = "producer"
app = "pingpong"
memory = { guaranteed = "512K" }

[[domain]]
name = "consumer"
app = "chanpipe"
memory = { guaranteed = "256K" }

[[channel]]
name = "numbers"
from = "producer"
to = "consumer"

[[channel]]
name = "producer"
from = "producer"
to = "consumer"
slots = 4096
slot_size = 8
"#;

#[test]
fn parses_channels() {
    let m = parse("t.toml", CHANNELS, APPS).unwrap();
    let channel = |name: &str, from, to, slots, slot_size| ChannelSpec {
        name: name.into(),
        from,
        to,
        slots,
        slot_size,
    };
    assert_eq!(
        m.channels,
        vec![
            channel("back", 1, 0, 2, 4096),
            channel("numbers", 0, 1, 64, 64),
            channel("producer", 0, 1, 4096, 8),
        ]
    );
    assert_eq!(
        m.channels.iter().map(ChannelSpec::bytes).collect::<Vec<_>>(),
        [3 * 4096, 2 * 4096, 9 * 4096]
    );
    assert_eq!(m.charged_to(0), 17 * 4096 + 11 * 4096);
    assert_eq!(m.charged_to(1), 17 * 4096 + 3 * 4096);
    assert_eq!(decode(&m.compile()), Ok(m));
}

#[test]
fn channel_errors_point_at_the_key() {
    let base = "[system]\nmemory = \"128M\"\n[[domain]]\nname = \"a\"\napp = \"hello\"\n\
                memory = { guaranteed = \"256K\" }\n[[domain]]\nname = \"b\"\napp = \"hello\"\n\
                memory = { guaranteed = \"256K\" }\n[[channel]]\nname = \"c\"\n";
    let cases: &[(&str, &str, &str)] = &[
        ("to = \"b\"\n", "channel[0].from", "missing field `from`"),
        ("from = \"a\"\nto = \"b\"\nslots = -1\n", "channel[0].slots", "invalid value"),
        ("from = \"a\"\nto = \"b\"\nslots = \"64\"\n", "channel[0].slots", "invalid type"),
        (
            "from = \"a\"\nto = \"b\"\nslots = 8192\n",
            "channel[0].slots",
            "slots 8192 is out of range",
        ),
        (
            "from = \"a\"\nto = \"b\"\nslot_size = \"8G\"\n",
            "channel[0].slot_size",
            "slot size 8G is out of range",
        ),
        (
            "from = \"a\"\nto = \"b\"\nslot_size = \"1.5K\"\n",
            "channel[0].slot_size",
            "fractional size",
        ),
        ("from = \"A\"\nto = \"b\"\n", "channel[0].from", "unknown domain \"A\" (domains: a, b)"),
        ("from = 1\nto = \"b\"\n", "channel[0].from", "invalid type: integer"),
    ];
    for (tail, key, reason) in cases {
        let e = err(&format!("{base}{tail}"));
        assert_eq!(e.key.as_deref(), Some(*key), "{tail}: {e}");
        assert!(e.reason.contains(reason), "{tail}: {e}");
        assert!(e.line.is_some_and(|l| l >= 11), "{tail}: {e}");
    }
    let e =
        err(&format!("{base}from = \"a\"\nto = \"b\"\n").replace("name = \"c\"", "name = \"C\""));
    assert_eq!((e.line, e.key.as_deref()), (Some(12), Some("channel[0].name")));
    assert_eq!(e.reason, "channel name contains 'C' (use only a-z, 0-9 and '-')");
    // Domain problems come before channel problems.
    let e = err(&format!("{base}from = \"x\"\nto = \"b\"\n").replace("\"256K\"", "\"1000\""));
    assert_eq!(e.key.as_deref(), Some("domain[0].memory.guaranteed"));
    // `channel` must be an array of tables.
    let e = err(&format!("{base}from = \"a\"\nto = \"b\"\n").replace("[[channel]]", "[channel]"));
    assert_eq!(e.key.as_deref(), Some("channel"), "{e}");
}

#[test]
fn too_many_channels_points_at_the_first_extra_one() {
    let mut text = String::from("[system]\nmemory = \"1G\"\n");
    for i in 0..64 {
        text.push_str(&format!(
            "[[domain]]\nname = \"d{i}\"\napp = \"hello\"\nmemory = {{ guaranteed = \"1M\" }}\n"
        ));
    }
    let start = text.lines().count();
    for i in 0..65 {
        text.push_str(&format!(
            "[[channel]]\nname = \"c{i}\"\nfrom = \"d{}\"\nto = \"d{}\"\n",
            i % 64,
            (i + 1) % 64
        ));
    }
    let e = err(&text);
    assert_eq!(e.key.as_deref(), Some("channel[64]"));
    assert_eq!(e.line, Some(start + 1 + 64 * 4));
    assert!(e.reason.contains("too many channels: 65 (at most 64)"), "{e}");
}

#[test]
fn parses_the_documented_example() {
    let m = parse("t.toml", GOOD, APPS).unwrap();
    assert_eq!(
        m,
        Manifest {
            memory: 128 * MIB,
            domains: vec![
                DomainSpec {
                    name: "hello-a".into(),
                    app: "hello".into(),
                    args: vec!["--count".into(), "3".into()],
                    guaranteed: 256 * 1024,
                    optimistic: 0,
                    address_space: DEFAULT_ADDRESS_SPACE,
                    cpu: CpuSpec {
                        period_ns: 10_000_000,
                        slice_ns: 2_000_000,
                        extra: true,
                        latency_ns: 1_000_000,
                    },
                    disk: None,
                    net: None,
                    expect_failure: false,
                    driver: false,
                    devices: vec![],
                },
                DomainSpec {
                    name: "c".into(),
                    app: "counter".into(),
                    args: vec![],
                    guaranteed: MIB,
                    optimistic: 2 * MIB,
                    address_space: DEFAULT_ADDRESS_SPACE,
                    cpu: CpuSpec::BEST_EFFORT,
                    disk: None,
                    net: None,
                    expect_failure: false,
                    driver: false,
                    devices: vec![],
                },
            ],
            channels: vec![],
            disks: vec![],
            nics: vec![],
            machine: None,
        }
    );
}

#[test]
fn round_trip_parse_compile_decode() {
    for path in toml_files(&manifests_dir()) {
        let m = parse_file(&path, APPS).unwrap();
        assert_eq!(decode(&m.compile()).as_ref(), Ok(&m), "{}", path.display());
    }
    for text in [GOOD, CHANNELS, MIXED_PERIODS] {
        let m = parse("t.toml", text, APPS).unwrap();
        assert_eq!(decode(&m.compile()), Ok(m));
    }
}

/// The first TOML example of `text` (between "```toml" and "```", with `//! ` stripped).
fn first_toml_block(text: &str) -> String {
    let lines = text.lines().map(|l| {
        let l = l.trim_start_matches("//!");
        l.strip_prefix(' ').unwrap_or(l)
    });
    let block: Vec<_> = lines
        .skip_while(|l| l.trim() != "```toml")
        .skip(1)
        .take_while(|l| l.trim() != "```")
        .collect();
    assert!(!block.is_empty(), "no ```toml block");
    block.join("\n")
}

#[test]
fn documented_examples_parse() {
    let readme = std::fs::read_to_string(manifests_dir().join("README.md")).unwrap();
    let crate_doc = include_str!("../src/lib.rs");
    for (name, text) in [("README.md", readme.as_str()), ("lib.rs", crate_doc)] {
        let m = parse(name, &first_toml_block(text), APPS).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(m.channels.len(), 1, "{name}");
        assert_eq!((m.channels[0].slots, m.channels[0].slot_size), (64, 64), "{name}");
    }
}

#[test]
fn every_good_manifest_parses() {
    let files = toml_files(&manifests_dir());
    assert!(files.iter().any(|p| p.ends_with("default.toml")), "{files:?}");
    for path in files {
        if let Err(e) = parse_file(&path, APPS) {
            panic!("{e}");
        }
    }
}

#[test]
fn default_manifest_is_what_xtask_run_boots() {
    let m = parse_file(&manifests_dir().join("default.toml"), APPS).unwrap();
    assert_eq!(m.memory, 128 * MIB);
    assert!((3..=6).contains(&m.domains.len()));
    assert!(m.domains.iter().any(|d| d.app == "hello"));
    assert!(m.domains.iter().all(|d| (256 * 1024..=MIB).contains(&d.guaranteed)));
    // It demonstrates CPU contracts: domains with and without slack time, and a best-effort one.
    let spinning: Vec<_> = m.domains.iter().filter(|d| d.app == "spin").collect();
    assert!(spinning.len() >= 2);
    assert!(spinning.iter().any(|d| d.cpu.extra) && spinning.iter().any(|d| !d.cpu.extra));
    assert!(m.domains.iter().any(|d| d.cpu == manifest::CpuSpec::BEST_EFFORT));
}

/// Every `manifests/bad/*.toml` fails, and its message contains the file's `# expect: ` line.
#[test]
fn every_bad_manifest_fails_as_expected() {
    let files = toml_files(&manifests_dir().join("bad"));
    assert!(files.len() >= 12, "only {} bad manifests", files.len());
    let mut failures = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let expect = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("# expect: "))
            .unwrap_or_else(|| panic!("{}: no `# expect: ` first line", path.display()));
        assert!(expect.contains(':'), "{}: expect a line number", path.display());
        // An optional second line `# machine: riscv64` (or `x86_64`) places it for a machine.
        let machine = text.lines().nth(1).and_then(|l| l.strip_prefix("# machine: ")).map(|m| {
            match m.trim() {
                "riscv64" => Machine::RiscvVirt,
                "x86_64" => Machine::Q35,
                other => panic!("{}: unknown machine {other:?}", path.display()),
            }
        });
        let parsed = match machine {
            Some(machine) => parse_file_for(&path, APPS, machine),
            None => parse_file(&path, APPS),
        };
        match parsed {
            Ok(_) => failures.push(format!("{}: parsed, expected `{expect}`", path.display())),
            Err(e) => {
                let message = e.to_string();
                let file = path.display().to_string();
                assert!(message.starts_with(&format!("{file}:")), "{message}");
                if !message.contains(expect) {
                    failures.push(format!("{message}\n    expected to contain `{expect}`"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn error_display_format() {
    let e = err("[system]\nmemory = \"128M\"\n[[domain]]\nname = \"a\"\napp = \"hello\"\n\
                 memory = { guaranteed = \"256K\" }\n[[domain]]\nname = \"a\"\napp = \"hello\"\n\
                 memory = { guaranteed = \"256K\" }\n");
    assert_eq!(e.file, "t.toml");
    assert_eq!(e.line, Some(8));
    assert_eq!(e.key.as_deref(), Some("domain[1].name"));
    assert_eq!(
        e.to_string(),
        "t.toml:8: domain[1].name: duplicate domain name \"a\" (first at line 4)"
    );
    let e = ManifestError { file: "f".into(), line: None, key: None, reason: "r".into() };
    assert_eq!(e.to_string(), "f: r");
}

#[test]
fn unreadable_file() {
    let e = parse_file(Path::new("/nonexistent/x.toml"), APPS).unwrap_err();
    assert_eq!((e.line, e.key.as_deref()), (None, None));
    assert!(e.to_string().starts_with("/nonexistent/x.toml: "), "{e}");
}

#[test]
fn sizes_in_all_forms() {
    let with = |g: &str| {
        format!(
            "[system]\nmemory = \"16M\"\n[[domain]]\nname = \"a\"\napp = \"hello\"\nmemory = {{ guaranteed = {g} }}\n"
        )
    };
    for (g, bytes) in [("\"4K\"", 4096), ("\"8192\"", 8192), ("12288", 12288), ("\"1M\"", MIB)] {
        assert_eq!(parse("t", &with(g), APPS).unwrap().domains[0].guaranteed, bytes, "{g}");
    }
    for (g, reason) in [
        ("1.5", "fractional size"),
        ("\"4k\"", "unknown unit"),
        ("\"4 K\"", "unknown unit"),
        ("\"K\"", "not a number"),
        ("\"\"", "empty size"),
        ("-4096", "negative size"),
        ("\"99999999999999999999\"", "does not fit in 64 bits"),
        ("[4096]", "invalid type: sequence"),
    ] {
        let e = err(&with(g));
        assert_eq!(e.key.as_deref(), Some("domain[0].memory.guaranteed"), "{g}");
        assert_eq!(e.line, Some(6), "{g}");
        assert!(e.reason.contains(reason), "{g}: {e}");
    }
}

#[test]
fn key_paths_of_nested_and_quoted_keys() {
    let base = "[system]\nmemory = \"128M\"\n[[domain]]\nname = \"a\"\napp = \"hello\"\n";
    let e = err(&format!("{base}memory = {{ guaranteed = \"4K\" }}\n\"odd key\" = 1\n"));
    assert_eq!(e.key.as_deref(), Some("domain[0].\"odd key\""));
    assert_eq!(e.line, Some(7));
    let e = err(&format!("{base}memory = {{ optimistic = \"4K\" }}\n"));
    assert_eq!(e.key.as_deref(), Some("domain[0].memory.guaranteed"));
    assert_eq!(e.reason, "missing field `guaranteed`");
    let e = err(&format!("{base}memory = \"4K\"\n"));
    assert_eq!(e.key.as_deref(), Some("domain[0].memory"));
    assert!(e.reason.starts_with("invalid type: string \"4K\", expected a table"), "{e}");
    let e = err(&format!("{base}memory = {{ guaranteed = \"4K\" }}\nargs = [\"x\", 3]\n"));
    assert_eq!(e.key.as_deref(), Some("domain[0].args[1]"));
    let e = err("[system]\nmemory = \"128M\"\nextra = 1\n");
    assert_eq!((e.line, e.key.as_deref()), (Some(3), Some("system.extra")));
    let e = err("system = 5\n");
    assert_eq!((e.line, e.key.as_deref()), (Some(1), Some("system")));
}

#[test]
fn too_many_domains_points_at_the_first_extra_one() {
    let mut text = String::from("[system]\nmemory = \"1G\"\n");
    for i in 0..=MAX_DOMAINS {
        text.push_str(&format!(
            "[[domain]]\nname = \"d{i}\"\napp = \"hello\"\nmemory = {{ guaranteed = \"4K\" }}\n"
        ));
    }
    let e = err(&text);
    assert_eq!(e.key, Some(format!("domain[{MAX_DOMAINS}]")));
    assert_eq!(e.line, Some(3 + MAX_DOMAINS * 4));
    assert!(e.reason.contains(&format!("too many domains: {}", MAX_DOMAINS + 1)), "{e}");
}

#[test]
fn unknown_app_lists_the_known_ones() {
    let text = "[system]\nmemory = \"128M\"\n[[domain]]\nname = \"a\"\napp = \"nope\"\n\
                memory = { guaranteed = \"4K\" }\n";
    assert_eq!(
        parse("t", text, &["hello"]).unwrap_err().to_string(),
        "t:5: domain[0].app: unknown app \"nope\" (known apps: hello)"
    );
}

/// CPU contracts with three different periods: 1 of 5ms (20%), 10 of 100ms (10%) and 15 of
/// 50ms (30%), written with every unit and with dotted keys.
const MIXED_PERIODS: &str = r#"
[system]
memory = "128M"

[[domain]]
name = "fast"
app = "hello"
cpu = { period = "5ms", slice = "1000us", latency = "500µs" }
memory = { guaranteed = "256K" }

[[domain]]
name = "slow"
app = "counter"
cpu = { period = "100000000ns", slice = "10ms", extra = true }
memory = { guaranteed = "256K" }

[[domain]]
name = "mid"
app = "counter"
cpu.period = "50ms"
cpu.slice = "15ms"
cpu.extra = false
cpu.latency = "1s"
memory = { guaranteed = "256K" }

[[domain]]
name = "idle"
app = "counter"
memory = { guaranteed = "256K" }
"#;

#[test]
fn parses_cpu_contracts_to_the_nanosecond() {
    let m = parse("t.toml", MIXED_PERIODS, APPS).unwrap();
    let cpu =
        |period_ns, slice_ns, extra, latency_ns| CpuSpec { period_ns, slice_ns, extra, latency_ns };
    assert_eq!(
        m.domains.iter().map(|d| d.cpu).collect::<Vec<_>>(),
        [
            cpu(5_000_000, 1_000_000, false, 500_000),
            // Latency defaults to the period, `extra` to false.
            cpu(100_000_000, 10_000_000, true, 100_000_000),
            cpu(50_000_000, 15_000_000, false, 1_000_000_000),
            // No `cpu`: the best-effort contract.
            cpu(100_000_000, 1_000_000, true, 10_000_000),
        ]
    );
    assert_eq!(m.domains[3].cpu, CpuSpec::BEST_EFFORT);
    let contracts: Vec<_> = m.domains.iter().map(|d| d.cpu.contract()).collect();
    assert_eq!(atropos::admit(&contracts), Ok(610_000_000));
    assert_eq!(decode(&m.compile()), Ok(m));
}

/// A one-domain manifest whose domain has the line `cpu` (line 6).
fn with_cpu(cpu: &str) -> String {
    format!(
        "[system]\nmemory = \"128M\"\n[[domain]]\nname = \"a\"\napp = \"hello\"\n{cpu}\n\
         memory = {{ guaranteed = \"256K\" }}\n"
    )
}

#[test]
fn durations_in_all_forms() {
    let period = |p: &str| {
        let text = with_cpu(&format!("cpu = {{ period = {p}, slice = \"10us\" }}"));
        parse("t", &text, APPS).map(|m| m.domains[0].cpu.period_ns)
    };
    for (p, ns) in [
        ("\"100us\"", 100_000),
        ("\"100µs\"", 100_000),
        ("\"100000ns\"", 100_000),
        ("\"7ms\"", 7_000_000),
        ("\"10s\"", 10_000_000_000),
        ("'2s'", 2_000_000_000),
    ] {
        assert_eq!(period(p), Ok(ns), "{p}");
    }
    for (p, reason) in [
        ("\"\"", "invalid duration \"\": empty duration"),
        ("\"10\"", "invalid duration \"10\": a duration needs a unit: ns, us, ms or s"),
        ("10", "invalid duration 10: a duration needs a unit: ns, us, ms or s"),
        ("0", "a duration needs a unit"),
        ("-10", "invalid duration -10: negative duration"),
        ("\"-10ms\"", "invalid duration \"-10ms\": negative duration"),
        ("1.5", "invalid duration 1.5: a duration needs a unit: ns, us, ms or s, and no fraction"),
        ("\"1.5ms\"", "fractional duration (use a smaller unit"),
        ("\"10 ms\"", "unknown unit \" ms\" (use ns, us, ms or s)"),
        ("\"10Ms\"", "unknown unit \"Ms\""),
        ("\"ms\"", "invalid duration \"ms\": not a number"),
        ("\"18446744074s\"", "duration does not fit in 64 bits of nanoseconds"),
        ("\"99999999999999999999ns\"", "does not fit in 64 bits"),
        ("true", "invalid type: boolean `true`, expected a duration such as \"10ms\""),
        ("[\"10ms\"]", "invalid type: sequence"),
        ("{ ms = 10 }", "invalid type: map"),
    ] {
        let e = period(p).unwrap_err();
        assert_eq!((e.line, e.key.as_deref()), (Some(6), Some("domain[0].cpu.period")), "{p}: {e}");
        assert!(e.reason.contains(reason), "{p}: {e}");
    }
}

#[test]
fn cpu_errors_point_at_the_key() {
    let cases: &[(&str, &str, &str)] = &[
        ("cpu = { slice = \"2ms\" }", "domain[0].cpu.period", "missing field `period`"),
        ("cpu = { period = \"10ms\" }", "domain[0].cpu.slice", "missing field `slice`"),
        ("cpu = \"10ms\"", "domain[0].cpu", "invalid type: string \"10ms\", expected a table"),
        (
            "cpu = { period = \"10ms\", slice = \"2ms\", extra = 1 }",
            "domain[0].cpu.extra",
            "invalid type: integer `1`, expected a boolean",
        ),
        (
            "cpu = { period = \"10ms\", slice = \"2ms\", latency = \"5us\" }",
            "domain[0].cpu.latency",
            "invalid CPU contract: latency is shorter than the minimum of 10us (latency 5us)",
        ),
        (
            "cpu = { period = \"10ms\", slice = \"2ms\", latency = \"0s\" }",
            "domain[0].cpu.latency",
            "invalid CPU contract: latency must be more than zero",
        ),
        (
            "cpu = { period = \"11s\", slice = \"2ms\" }",
            "domain[0].cpu.period",
            "invalid CPU contract: period is longer than the maximum of 10s (period 11s)",
        ),
        (
            "cpu = { period = \"10ms\", slice = \"9us\" }",
            "domain[0].cpu.slice",
            "invalid CPU contract: slice is shorter than the minimum of 10us (slice 9us)",
        ),
        (
            "cpu = { period = \"10ms\", slice = \"9500us\" }",
            "domain[0].cpu",
            "slices sum to 95.0% of the CPU",
        ),
        ("cpu = { period = \"10ms\", slice = \"9ms\" }", "", ""),
        (
            "cpu.period = \"10ms\"\ncpu.slice = \"10ms\"",
            "domain[0].cpu",
            "CPU contracts over capacity",
        ),
    ];
    for (cpu, key, reason) in cases {
        let result = parse("t", &with_cpu(cpu), APPS);
        if key.is_empty() {
            assert!(result.is_ok(), "{cpu}: {result:?}");
            continue;
        }
        let e = result.unwrap_err();
        assert_eq!((e.line, e.key.as_deref()), (Some(6), Some(*key)), "{cpu}: {e}");
        assert!(e.reason.contains(reason), "{cpu}: {e}");
    }
}

#[test]
fn cpu_over_capacity_names_the_first_domain_that_does_not_fit() {
    let mut text = String::from("[system]\nmemory = \"128M\"\n");
    // 80 percent in one domain, then best-effort domains of 1 percent each.
    for i in 0..12 {
        let cpu = if i == 0 { "cpu = { period = \"10ms\", slice = \"8ms\" }\n" } else { "" };
        text.push_str(&format!(
            "[[domain]]\nname = \"d{i}\"\napp = \"hello\"\n{cpu}memory = {{ guaranteed = \"4K\" }}\n"
        ));
    }
    let e = err(&text);
    // The eleventh domain (80 + 10 = 90 percent fit) has no `cpu`: its table is named.
    assert_eq!(e.key.as_deref(), Some("domain[11].cpu"));
    assert_eq!(e.line, Some(3 + 5 + 10 * 4));
    assert_eq!(
        e.reason,
        "CPU contracts over capacity: with this domain the slices sum to 91.0% of the CPU, more \
         than the 90% left after the kernel's 10% reserve"
    );
}

#[test]
fn expect_failure_marks_a_domain() {
    let base = "[system]\nmemory = \"128M\"\n[[domain]]\nname = \"a\"\napp = \"faulty\"\n\
                memory = { guaranteed = \"256K\" }\n";
    let m = parse("t.toml", base, APPS).unwrap();
    assert!(!m.domains[0].expect_failure);
    let m = parse("t.toml", &format!("{base}expect_failure = true\n"), APPS).unwrap();
    assert!(m.domains[0].expect_failure);
    let e = err(&format!("{base}expect_failure = \"yes\"\n"));
    assert_eq!((e.line, e.key.as_deref()), (Some(7), Some("domain[0].expect_failure")));
}

#[test]
fn top_level_duplicate_and_encoding_errors_name_their_key_or_line() {
    let e = err("[[domain]]\nname = \"a\"\napp = \"hello\"\nmemory = { guaranteed = \"256K\" }\n");
    assert_eq!(e.key.as_deref(), Some("system"), "{e}");
    assert_eq!(e.reason, "missing field `system`");
    let e = err("[system]\nmemory = \"128M\"\nmemory = \"64M\"\n");
    assert_eq!(e.line, Some(3));
    assert_eq!(e.reason, "TOML syntax error: duplicate key `memory`");
    let dir = std::env::temp_dir().join(format!("manifest-utf8-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.toml");
    std::fs::write(&path, b"[system]\nmemory = \"128M\"\n# \xff\xfe\n").unwrap();
    let e = parse_file(&path, APPS).unwrap_err();
    assert_eq!((e.line, e.reason.as_str()), (Some(3), "not valid UTF-8: byte 0xff at column 3"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn system_memory_beyond_every_machine_is_refused_with_its_line() {
    let text = "# a machine too large\n[system]\nmemory = \"99999G\"\n\n[[domain]]\nname = \"a\"\n\
                app = \"hello\"\nmemory = { guaranteed = \"256K\" }\n";
    let e = err(text);
    assert_eq!((e.line, e.key.as_deref()), (Some(3), Some("system.memory")));
    assert_eq!(
        e.to_string(),
        "t.toml:3: system.memory: system memory 99999G is above the maximum of 62G: QEMU virt \
         (riscv64) gives a kernel at most 62G (its RAM starts at 2G and the kernel's direct map \
         ends at 64G), QEMU q35 (x86_64) at most 978G"
    );
    // The bound itself passes; a MiB more does not, in any form a size may take.
    let with = |memory: &str| text.replace("\"99999G\"", memory);
    parse("t.toml", &with("\"62G\""), APPS).unwrap();
    assert_eq!(err(&with("\"63489M\"")).line, Some(3));
    assert_eq!(err(&with(&format!("{}", 62 * 1024 * MIB + MIB))).line, Some(3));
    let dotted = "[[domain]]\nname = \"a\"\napp = \"hello\"\nmemory.guaranteed = \"256K\"\n\n\
                  [system]\nmemory = \"1024G\"\n";
    let e = err(dotted);
    assert_eq!((e.line, e.key.as_deref()), (Some(7), Some("system.memory")));
    assert!(e.reason.starts_with("system memory 1024G is above the maximum of 62G"), "{e}");
}

#[test]
fn errors_can_be_placed_at_a_key_by_the_caller() {
    let at = |key: &str| ManifestError::at_key("m.toml", GOOD, key, "too much".into());
    let e = at("system.memory");
    assert_eq!(e.to_string(), "m.toml:3: system.memory: too much");
    assert_eq!(at("domain[0].name").line, Some(6));
    assert_eq!(at("domain[1].memory.optimistic").line, Some(16));
    assert_eq!(at("domain[0].memory.guaranteed").line, Some(10));
    // A key the text does not hold keeps its name and loses its line.
    for missing in ["system.disk", "domain[5].name", "domain.name", "nothing"] {
        let e = at(missing);
        assert_eq!((e.line, e.key.as_deref()), (None, Some(missing)));
    }
    let broken = ManifestError::at_key("b.toml", "[system", "system.memory", "r".into());
    assert_eq!(broken.to_string(), "b.toml: system.memory: r");
}

/// A two-domain manifest whose second domain's `memory` line (line 10) is `memory`.
fn with_memory(memory: &str) -> String {
    format!(
        "[system]\nmemory = \"128M\"\n[[domain]]\nname = \"a\"\napp = \"hello\"\n\
         memory = {{ guaranteed = \"256K\" }}\n[[domain]]\nname = \"b\"\napp = \"hello\"\n\
         {memory}\n"
    )
}

#[test]
fn address_space_defaults_and_parses_in_every_form() {
    let quota = |memory: &str| {
        parse("t.toml", &with_memory(memory), APPS).map(|m| {
            assert_eq!(m.domains[0].address_space, DEFAULT_ADDRESS_SPACE);
            m.domains[1].address_space
        })
    };
    assert_eq!(DEFAULT_ADDRESS_SPACE, 1024 * MIB);
    assert_eq!(quota("memory = { guaranteed = \"1M\" }"), Ok(DEFAULT_ADDRESS_SPACE));
    for (text, bytes) in [
        ("memory = { guaranteed = \"1M\", address_space = \"4G\" }", 4096 * MIB),
        ("memory = { guaranteed = \"1M\", address_space = \"64M\" }", 64 * MIB),
        ("memory = { guaranteed = \"1M\", address_space = \"2048K\" }", 2 * MIB),
        ("memory = { guaranteed = \"1M\", address_space = 4194304 }", 4 * MIB),
        ("memory.guaranteed = \"1M\"\nmemory.address_space = \"128G\"", 128 * 1024 * MIB),
    ] {
        // 128G is the whole region: with `a`'s default 1G it no longer fits.
        if bytes == 128 * 1024 * MIB {
            let e = quota(text).unwrap_err();
            assert_eq!(
                (e.line, e.key.as_deref()),
                (Some(11), Some("domain[1].memory.address_space"))
            );
            continue;
        }
        assert_eq!(quota(text), Ok(bytes), "{text}");
    }
    let m = parse(
        "t.toml",
        &with_memory("memory = { guaranteed = \"1M\", address_space = \"4G\" }"),
        APPS,
    )
    .unwrap();
    assert_eq!(decode(&m.compile()), Ok(m));
}

#[test]
fn address_space_errors_point_at_the_key() {
    let cases: &[(&str, usize, &str, &str)] = &[
        (
            "memory = { guaranteed = \"1M\", address_space = \"1M\" }",
            10,
            "domain[1].memory.address_space",
            "address space 1M is below the minimum of 2M",
        ),
        (
            "memory = { guaranteed = \"1M\", address_space = \"0\" }",
            10,
            "domain[1].memory.address_space",
            "address space 0 is below the minimum of 2M",
        ),
        (
            "memory = { guaranteed = \"1M\", address_space = \"3M\" }",
            10,
            "domain[1].memory.address_space",
            "address space 3M is not a multiple of 2M",
        ),
        (
            "memory = { guaranteed = \"1M\", address_space = \"1.5G\" }",
            10,
            "domain[1].memory.address_space",
            "fractional size",
        ),
        (
            "memory = { guaranteed = \"1M\", address_space = \"4g\" }",
            10,
            "domain[1].memory.address_space",
            "unknown unit",
        ),
        (
            "memory = { guaranteed = \"1M\", address_space = true }",
            10,
            "domain[1].memory.address_space",
            "invalid type: boolean",
        ),
        (
            "memory = { guaranteed = \"1M\", address_space = \"128G\" }",
            10,
            "domain[1].memory.address_space",
            "address space over capacity: the quotas up to this domain total 131074M, more than",
        ),
        (
            "memory = { guaranteed = \"1M\", address_sapce = \"4G\" }",
            10,
            "domain[1].memory.address_sapce",
            "unknown field `address_sapce`, expected one of `guaranteed`, `optimistic`, \
             `address_space`",
        ),
    ];
    for (memory, line, key, reason) in cases {
        let e = err(&with_memory(memory));
        assert_eq!((e.line, e.key.as_deref()), (Some(*line), Some(*key)), "{memory}: {e}");
        assert!(e.reason.contains(reason), "{memory}: {e}");
    }
    // 127G fits beside the first domain's default 1G, exactly.
    parse(
        "t.toml",
        &with_memory("memory = { guaranteed = \"1M\", address_space = \"127G\" }"),
        APPS,
    )
    .unwrap();
    // A domain without a quota, when the others' leave it less than the smallest (2M), is
    // pointed at by its `memory` table.
    let text = "[system]\nmemory = \"128M\"\n[[domain]]\nname = \"a\"\napp = \"hello\"\n\
                memory = { guaranteed = \"256K\", address_space = \"128G\" }\n[[domain]]\n\
                name = \"b\"\napp = \"hello\"\nmemory = { guaranteed = \"256K\" }\n";
    let e = err(text);
    assert_eq!((e.line, e.key.as_deref()), (Some(10), Some("domain[1].memory.address_space")));
    assert!(e.reason.contains("the quotas up to this domain total 131074M"), "{e}");
    // Domains without a quota share what the others leave: 126G among 1,000 domains is 128M
    // each, rounded down to 2M (129,024M in all).
    let mut text = String::from(
        "[system]\nmemory = \"1G\"\n[[domain]]\nname = \"big\"\napp = \"hello\"\n\
         memory = { guaranteed = \"4K\", address_space = \"2G\" }\n",
    );
    for i in 0..1000 {
        text.push_str(&format!(
            "[[domain]]\nname = \"d{i}\"\napp = \"hello\"\nmemory = {{ guaranteed = \"4K\" }}\n\
             cpu = {{ period = \"100ms\", slice = \"10us\" }}\n"
        ));
    }
    let text = text.replacen(
        "\n[[domain]]\nname = \"d0\"",
        "\ncpu = { period = \"100ms\", slice = \"10us\" }\n[[domain]]\nname = \"d0\"",
        1,
    );
    let m = parse("t.toml", &text, APPS).unwrap();
    assert_eq!(m.domains[0].address_space, 2048 * MIB);
    assert!(m.domains[1..].iter().all(|d| d.address_space == 128 * MIB));
}

#[test]
fn a_sender_address_space_holds_its_channels() {
    let text = "[system]\nmemory = \"128M\"\n[[domain]]\nname = \"a\"\napp = \"hello\"\n\
                memory = { guaranteed = \"4M\", address_space = \"2M\" }\n[[domain]]\n\
                name = \"b\"\napp = \"hello\"\nmemory = { guaranteed = \"256K\" }\n\
                [[channel]]\nname = \"one\"\nfrom = \"a\"\nto = \"b\"\nslots = 256\n\
                slot_size = 4088\n[[channel]]\nname = \"two\"\nfrom = \"a\"\nto = \"b\"\n\
                slots = 256\nslot_size = 4088\n";
    let e = err(text);
    assert_eq!((e.line, e.key.as_deref()), (Some(6), Some("domain[0].memory.address_space")));
    assert_eq!(
        e.reason,
        "address space 2M cannot hold channel \"two\" (1M) that this domain sends on: it needs \
         2132K in all (68K of stack and control block, the memory of every channel it sends \
         on, and a guard page of 4K below each)"
    );
    parse("t.toml", &text.replace("address_space = \"2M\"", "address_space = \"4M\""), APPS)
        .unwrap();
}

/// Two disks, one granted to a driver domain; the other stays masked.
const DISKS: &str = r#"
[system]
memory = "128M"

[[system.disk]]
name = "data"
size = "64M"
bus = "virtio"

[[system.disk]]
name = "scratch"
size = "1M"
bus = "ahci"

[[domain]]
name = "blk"
app = "hello"
memory = { guaranteed = "256K" }
driver = true
devices = [{ disk = "data" }, { pci = "1af4:1005", index = 0 }, { pci_class = "02.00", index = 1 }]

[[domain]]
name = "c"
app = "counter"
memory = { guaranteed = "256K" }
"#;

fn err_for(text: &str, machine: Machine) -> ManifestError {
    parse_for("t.toml", text, APPS, machine).unwrap_err()
}

#[test]
fn disks_and_device_grants_parse() {
    let m = parse("t.toml", DISKS, APPS).unwrap();
    assert_eq!(m.machine, None);
    assert_eq!(
        m.disks,
        vec![
            DiskSpec {
                name: "data".into(),
                size: 64 * MIB,
                bus: DiskBus::Virtio,
                model: None,
                at: None
            },
            DiskSpec {
                name: "scratch".into(),
                size: MIB,
                bus: DiskBus::Ahci,
                model: None,
                at: None
            },
        ]
    );
    assert!(m.domains[0].driver && !m.domains[1].driver);
    assert_eq!(
        m.domains[0].devices,
        vec![
            DeviceGrant::Disk { disk: 0 },
            DeviceGrant::PciId { vendor: 0x1af4, device: 0x1005, index: 0 },
            DeviceGrant::PciClass { class: 2, subclass: 0, index: 1 },
        ]
    );
    assert!(m.domains[1].devices.is_empty());
    // Placed for q35: the disks are at 00:10.0 and 00:11.0; it compiles and decodes.
    let m = parse_for("t.toml", DISKS, APPS, Machine::Q35).unwrap();
    assert_eq!(m.machine, Some(Machine::Q35));
    assert_eq!(m.disks[1].at, Some(DeviceAddress::Pci { bus: 0, slot: 0x11, function: 0 }));
    assert_eq!(decode(&m.compile()), Ok(m));
}

#[test]
fn ahci_is_refused_on_virt_at_its_bus() {
    let e = err_for(DISKS, Machine::RiscvVirt);
    assert_eq!(
        e.to_string(),
        "t.toml:13: system.disk[1].bus: QEMU virt (riscv64) has no ahci bus: AHCI disks are for \
         QEMU q35 (x86_64) only (use bus = \"virtio\")"
    );
    let virtio = DISKS.replace("\"ahci\"", "\"virtio\"");
    let m = parse_for("t.toml", &virtio, APPS, Machine::RiscvVirt).unwrap();
    assert_eq!(m.disks[1].at, Some(DeviceAddress::Mmio { unit: 1 }));
}

#[test]
fn disk_rules_name_their_keys() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "size = \"64M\"",
            "size = \"1000\"",
            "t.toml:7: system.disk[0].size: disk size 1000 bytes is not a multiple of the 512-byte sector",
        ),
        (
            "size = \"64M\"",
            "size = \"512K\"",
            "t.toml:7: system.disk[0].size: disk size 512K is out of range (a multiple of 512 bytes from 1M to 64G)",
        ),
        ("size = \"64M\"", "size = \"65G\"", "system.disk[0].size: disk size 65G is out of range"),
        (
            "name = \"scratch\"",
            "name = \"data\"",
            "t.toml:11: system.disk[1].name: duplicate disk name \"data\" (first at line 6)",
        ),
        (
            "name = \"scratch\"",
            "name = \"Scratch\"",
            "t.toml:11: system.disk[1].name: disk name contains 'S'",
        ),
        (
            "bus = \"ahci\"",
            "bus = \"scsi\"",
            "t.toml:13: system.disk[1].bus: unknown variant `scsi`, expected `virtio` or `ahci`",
        ),
        (
            "bus = \"ahci\"",
            "bus = \"ahci\"\nmodel = \"hdd\"",
            "t.toml:14: system.disk[1].model: unknown variant `hdd`, expected `deskstar-34gxp` or `cheetah-15k`",
        ),
        (
            "bus = \"ahci\"",
            "bus = \"ahci\"\nspeed = \"7200rpm\"",
            "t.toml:14: system.disk[1].speed: unknown field `speed`",
        ),
        (
            "{ disk = \"data\" }",
            "{ disk = \"dat\" }",
            "t.toml:20: domain[0].devices[0]: unknown disk \"dat\" (disks: data, scratch)",
        ),
        (
            "driver = true\n",
            "",
            "t.toml:19: domain[0].devices: the domain is granted devices but is not marked `driver = true`",
        ),
        (
            "{ pci = \"1af4:1005\", index = 0 }",
            "{ pci = \"1af4:1005\" }",
            "t.toml:20: domain[0].devices[1]: `pci` needs `index` (0 for the first)",
        ),
        (
            "{ pci = \"1af4:1005\", index = 0 }",
            "{ pci = \"1af4-1005\", index = 0 }",
            "t.toml:20: domain[0].devices[1].pci: invalid PCI IDs \"1af4-1005\": write vendor:device as four hex digits each",
        ),
        (
            "{ pci_class = \"02.00\", index = 1 }",
            "{ pci_class = \"2.0\", index = 1 }",
            "domain[0].devices[2].pci_class: invalid PCI class \"2.0\"",
        ),
        (
            "{ pci_class = \"02.00\", index = 1 }",
            "{ disk = \"data\", pci = \"1af4:1005\" }",
            "t.toml:20: domain[0].devices[2]: a device grant names exactly one of `disk`",
        ),
        (
            "{ pci_class = \"02.00\", index = 1 }",
            "{ disk = \"scratch\", unit = 1 }",
            "t.toml:20: domain[0].devices[2]: `unit` does not go with `disk`",
        ),
        (
            "{ pci_class = \"02.00\", index = 1 }",
            "{ disk = \"data\" }",
            "t.toml:20: domain[0].devices[2]: the device is granted already, to domain \"blk\" (line 20)",
        ),
        (
            "{ pci_class = \"02.00\", index = 1 }",
            "{ bus = 1 }",
            "t.toml:20: domain[0].devices[2].bus: unknown field `bus`",
        ),
    ];
    for (from, to, want) in cases {
        assert!(DISKS.contains(from), "{from}");
        let e = err(&DISKS.replacen(from, to, 1)).to_string();
        assert!(e.contains(want), "{e}\n    expected to contain `{want}`");
    }
    // A disk granted to two domains.
    let two = DISKS.replace(
        "app = \"counter\"\n",
        "app = \"counter\"\ndriver = true\ndevices = [{ disk = \"data\" }]\n",
    );
    assert_eq!(
        err(&two).to_string(),
        "t.toml:26: domain[1].devices[0]: the device is granted already, to domain \"blk\" \
         (line 20): a device is granted to at most one domain"
    );
    // driver = true without devices.
    let idle = DISKS.replace("app = \"counter\"\n", "app = \"counter\"\ndriver = true\n");
    let e = err(&idle);
    assert_eq!((e.line, e.key.as_deref()), (Some(25), Some("domain[1].driver")));
    // A disk no domain is granted, and a manifest without disks, are fine.
    let m = parse("t.toml", DISKS, APPS).unwrap();
    assert_eq!((m.disk_owner(0), m.disk_owner(1)), (Some(0), None));
    assert!(parse("t.toml", GOOD, APPS).unwrap().disks.is_empty());
}

#[test]
fn compatible_grants_are_for_virt() {
    let text = r#"
[system]
memory = "64M"

[[system.disk]]
name = "data"
size = "1M"
bus = "virtio"

[[domain]]
name = "blk"
app = "hello"
memory = { guaranteed = "256K" }
driver = true
devices = [{ compatible = "virtio,mmio", unit = 3 }]
"#;
    let m = parse_for("t.toml", text, APPS, Machine::RiscvVirt).unwrap();
    let want = DeviceGrant::Compatible { compatible: "virtio,mmio".into(), unit: 3 };
    assert_eq!(m.domains[0].devices, vec![want]);
    assert_eq!(
        err_for(text, Machine::Q35).to_string(),
        "t.toml:15: domain[0].devices[0]: QEMU q35 (x86_64) has no device tree: grant its \
         devices by `disk`, `pci` or `pci_class`"
    );
    // The node of the disk (unit 0) granted twice, once by name and once by node.
    let both = text.replace("unit = 3 }", "unit = 0 }, { disk = \"data\" }");
    let e = err_for(&both, Machine::RiscvVirt).to_string();
    assert!(e.contains("domain[0].devices[1]: the device is granted already"), "{e}");
    let bad = text.replace("virtio,mmio", "virtio mmio");
    let e = err(&bad).to_string();
    assert!(e.contains("t.toml:15: domain[0].devices[0]: invalid compatible string"), "{e}");
}

/// A paging domain with its block session to a disk driver.
const PAGER: &str = r#"
[system]
memory = "128M"

[[domain]]
name = "blk"
app = "virtio-blk"
memory = { guaranteed = "1M" }

[[domain]]
name = "pager"
app = "heracles"
args = ["--program", "random"]
memory = { guaranteed = "4M" }
pager = { hierarchy = "compressed", frames = 256, cache = "128K", policy = "clock", disk = "pg", swap = "32M" }

[[channel]]
name = "pg-req"
from = "pager"
to = "blk"
slot_size = 64

[[channel]]
name = "pg-resp"
from = "blk"
to = "pager"
"#;

#[test]
fn a_pager_becomes_the_domains_pager_argument() {
    let m = parse("t.toml", PAGER, APPS).unwrap();
    assert_eq!(
        m.domains[1].args,
        [
            "--program",
            "random",
            "--pager",
            "hierarchy=compressed,frames=256,cache=131072,policy=clock,disk=pg,swap_at=0,\
             swap=33554432"
        ]
    );
    assert!(m.domains[0].args.is_empty());
    assert_eq!(decode(&m.compile()), Ok(m));
    // Defaults are written out; without `args` the pager's are the only ones.
    let text = PAGER.replace("args = [\"--program\", \"random\"]\n", "").replace(
        "hierarchy = \"compressed\", frames = 256, cache = \"128K\", policy = \"clock\"",
        "hierarchy = \"prefetching-compressed\", frames = 256, policy = \"lru\", evict = 4, \
         codec = \"wkdm\"",
    );
    let m = parse("t.toml", &text, APPS).unwrap();
    assert_eq!(
        m.domains[1].args,
        [
            "--pager",
            "hierarchy=prefetching-compressed,frames=256,cache=262144,evict=4,fetch=8,\
             codec=wkdm,policy=lru,disk=pg,swap_at=0,swap=33554432"
        ]
    );
}

#[test]
fn pager_errors_name_their_key_and_line() {
    let table = "pager = { hierarchy = \"compressed\", frames = 256, cache = \"128K\", policy = \
                 \"clock\", disk = \"pg\", swap = \"32M\" }";
    let cases: &[(&str, &str, &str)] = &[
        (
            "hierarchy = \"compressed\"",
            "hierarchy = \"fast\"",
            "t.toml:15: domain[1].pager.hierarchy: invalid pager hierarchy \"fast\": not local, \
             compressed, prefetching-compressed or prefetching",
        ),
        ("frames = 256, ", "", "t.toml:15: domain[1].pager.frames: missing field `frames`"),
        (
            "frames = 256",
            "frames = 0",
            "t.toml:15: domain[1].pager.frames: invalid pager frames 0: must be 1 to 1048576",
        ),
        ("frames = 256", "frames = -1", "t.toml:15: domain[1].pager.frames: invalid value"),
        (
            "swap = \"32M\"",
            "swap = \"32M\", size = 3",
            "t.toml:15: domain[1].pager.size: unknown field `size`, expected one of `hierarchy`",
        ),
        (
            "disk = \"pg\"",
            "disk = \"swap\"",
            "t.toml:15: domain[1].pager.disk: the pager's disk \"swap\" needs channels \
             \"swap-req\" (from this domain) and \"swap-resp\" (to this domain), and there is \
             no channel \"swap-req\"",
        ),
        (
            "disk = \"pg\"",
            "disk = \"Pg\"",
            "t.toml:15: domain[1].pager.disk: invalid pager disk \"Pg\": not a channel prefix",
        ),
        ("disk = \"pg\", ", "", "t.toml:15: domain[1].pager.disk: missing field `disk`"),
        (
            "frames = 256",
            "frames = 1025",
            "t.toml:15: domain[1].pager.frames: 1025 frames (4100K) are more than the domain's \
             memory contract: guaranteed 4M + optimistic 0 = 4M",
        ),
        (
            "cache = \"128K\"",
            "cache = \"1.5K\"",
            "t.toml:15: domain[1].pager.cache: invalid size \"1.5K\": fractional size",
        ),
        (
            "cache = \"128K\"",
            "cache = \"1K\"",
            "t.toml:15: domain[1].pager.cache: invalid pager cache 1K: must be at least one page",
        ),
        (
            "swap = \"32M\"",
            "swap = \"6K\"",
            "t.toml:15: domain[1].pager.swap: invalid pager swap 6K: must be a non-zero multiple \
             of 4096 bytes",
        ),
        (
            "policy = \"clock\"",
            "policy = \"fifo\"",
            "t.toml:15: domain[1].pager.policy: invalid pager policy \"fifo\": not clock or lru",
        ),
        (
            "policy = \"clock\"",
            "policy = \"clock,frames=2\"",
            "t.toml:15: domain[1].pager.policy: invalid pager policy \"clock,frames=2\": \
             contains ',' or '='",
        ),
        (
            "hierarchy = \"compressed\"",
            "hierarchy = \"local\"",
            "t.toml:15: domain[1].pager.cache: hierarchy \"local\" has no compressed pool: `cache` \
             is for compressed and prefetching-compressed only",
        ),
        (
            "cache = \"128K\"",
            "cache = \"128K\", codec = \"zstd\"",
            "t.toml:15: domain[1].pager.codec: invalid pager codec \"zstd\": not lz4 or wkdm",
        ),
        (
            "hierarchy = \"compressed\", frames = 256, cache = \"128K\"",
            "hierarchy = \"local\", frames = 256, codec = \"wkdm\"",
            "t.toml:15: domain[1].pager.codec: invalid pager codec \"wkdm\": only for a hierarchy \
             with a compressed cache",
        ),
        (
            "swap = \"32M\"",
            "swap = \"32M\", evict = 16",
            "t.toml:15: domain[1].pager.evict: hierarchy \"compressed\" has no eviction area",
        ),
        (
            "frames = 256",
            "frames = \"256\"",
            "t.toml:15: domain[1].pager.frames: invalid type: string \"256\", expected u64",
        ),
    ];
    for (from, to, expect) in cases {
        assert!(PAGER.contains(table));
        let text = PAGER.replace(table, &table.replace(from, to));
        assert_ne!(text, PAGER, "{from}");
        let e = err(&text).to_string();
        assert!(e.starts_with(expect), "{to}:\n{e}\nexpected\n{expect}");
    }
    // The table as a whole.
    let e = err(&PAGER.replace(table, "pager = 3")).to_string();
    assert!(e.starts_with("t.toml:15: domain[1].pager: invalid type: integer `3`"), "{e}");
}

#[test]
fn a_pagers_block_session_joins_it_to_one_driver() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "name = \"pg-resp\"\nfrom = \"blk\"\nto = \"pager\"",
            "name = \"pg-resp\"\nfrom = \"pager\"\nto = \"blk\"",
            "t.toml:15: domain[1].pager.disk: channel[1] \"pg-resp\" is to \"blk\", not to this \
             domain \"pager\"",
        ),
        (
            "name = \"pg-req\"\nfrom = \"pager\"\nto = \"blk\"",
            "name = \"pg-req\"\nfrom = \"blk\"\nto = \"pager\"",
            "t.toml:15: domain[1].pager.disk: channel[0] \"pg-req\" is from \"blk\", not from \
             this domain \"pager\"",
        ),
        (
            "name = \"pg-resp\"",
            "name = \"pg-reply\"",
            "t.toml:15: domain[1].pager.disk: the pager's disk \"pg\" needs channels \"pg-req\" \
             (from this domain) and \"pg-resp\" (to this domain), and there is no channel \
             \"pg-resp\"",
        ),
        (
            "memory = { guaranteed = \"4M\" }",
            "memory = { guaranteed = \"512K\" }",
            "t.toml:15: domain[1].pager.frames: 256 frames (1M) are more than the domain's \
             memory contract: guaranteed 512K + optimistic 0 = 512K",
        ),
        (
            "args = [\"--program\", \"random\"]",
            "args = [\"a\", \"b\", \"c\", \"d\", \"e\", \"f\", \"g\", \"h\", \"i\", \"j\", \"k\", \
             \"l\", \"m\", \"n\", \"o\"]",
            "t.toml:15: domain[1].pager: `--pager` and its spec make 17 args (at most 16)",
        ),
        (
            "args = [\"--program\", \"random\"]",
            "args = [\"--pager\", \"hierarchy=local,frames=4,disk=pg\"]",
            "t.toml:15: domain[1].pager: `args` give `--pager` already: write the pager in \
             `pager` only",
        ),
    ];
    for (from, to, expect) in cases {
        let text = PAGER.replace(from, to);
        assert_ne!(text, PAGER, "{from}");
        let e = err(&text).to_string();
        assert!(e.starts_with(expect), "{to}:\n{e}\nexpected\n{expect}");
    }
    // A driver of its own for the replies is a mistake too.
    let text = PAGER.replace("from = \"blk\"\nto = \"pager\"", "from = \"other\"\nto = \"pager\"")
        + "\n[[domain]]\nname = \"other\"\napp = \"hello\"\nmemory = { guaranteed = \"1M\" }\n";
    let e = err(&text).to_string();
    assert!(
        e.starts_with(
            "t.toml:15: domain[1].pager.disk: channel \"pg-req\" goes to \"blk\" but channel \
             \"pg-resp\" comes from \"other\""
        ),
        "{e}"
    );
    // Optimistic memory counts towards the frames.
    let text = PAGER.replace("guaranteed = \"4M\"", "guaranteed = \"512K\", optimistic = \"512K\"");
    parse("t.toml", &text, APPS).unwrap();
}

#[test]
fn a_pager_spec_longer_than_an_argument_is_refused_at_the_pager() {
    let (long, net) = ("x".repeat(27), "y".repeat(27));
    let endpoints = |n: usize| {
        let e: Vec<String> = (0..n).map(|i| format!("\"10.100.100.10{i}:6500{i}\"")).collect();
        e.join(", ")
    };
    let text = REMOTE_PAGER
        .replace("pg-", &format!("{long}-"))
        .replace("nc-", &format!("{net}-"))
        .replace("disk = \"pg\"", &format!("disk = \"{long}\", swap_at = \"1G\""))
        .replace("net = \"nc\"", &format!("net = \"{net}\", mirror = \"server\""))
        .replace(
            "traders = [\"10.0.2.1:7000\"]",
            &format!("traders = [{}], servers = [{}]", endpoints(3), endpoints(4)),
        );
    let e = err(&text).to_string();
    assert!(
        e.starts_with("t.toml:15: domain[1].pager: the pager's spec \"hierarchy=compressed,"),
        "{e}"
    );
    assert!(e.contains("bytes long, more than an argument may be (256 bytes)"), "{e}");
}

/// A paging domain with its block session and a network session, paging to remote memory.
const REMOTE_PAGER: &str = r#"
[system]
memory = "128M"

[[domain]]
name = "blk"
app = "virtio-blk"
memory = { guaranteed = "1M" }

[[domain]]
name = "pager"
app = "heracles"
args = ["--program", "random"]
memory = { guaranteed = "4M" }
pager = { hierarchy = "compressed", frames = 256, cache = "128K", disk = "pg", store = "remote", net = "nc", traders = ["10.0.2.1:7000"] }

[[domain]]
name = "net"
app = "virtio-net"
memory = { guaranteed = "1M" }

[[channel]]
name = "pg-req"
from = "pager"
to = "blk"
slot_size = 64

[[channel]]
name = "pg-resp"
from = "blk"
to = "pager"

[[channel]]
name = "nc-req"
from = "pager"
to = "net"

[[channel]]
name = "nc-resp"
from = "net"
to = "pager"
"#;

#[test]
fn each_of_the_ten_hierarchies_is_accepted_and_reaches_the_domain_as_itself() {
    let table = "pager = { hierarchy = \"compressed\", frames = 256, cache = \"128K\", disk = \
                 \"pg\", store = \"remote\", net = \"nc\", traders = [\"10.0.2.1:7000\"] }";
    assert!(REMOTE_PAGER.contains(table));
    let mut specs = Vec::new();
    for c in pager_spec::Combination::ALL {
        let (hierarchy, backing) = c.parts();
        let mut keys = format!("hierarchy = \"{hierarchy}\", frames = 256, disk = \"pg\"");
        if let pager_spec::Backing::Remote { mirror } = backing {
            keys += &format!(
                ", store = \"remote\", mirror = \"{}\", net = \"nc\", \
                 traders = [\"10.0.2.1:7000\", \"10.0.2.2:7000\"], spread = false, netc = true",
                mirror.name()
            );
        }
        let text = REMOTE_PAGER.replace(table, &format!("pager = {{ {keys} }}"));
        let m = parse("t.toml", &text, APPS).unwrap_or_else(|e| panic!("{}: {e}", c.title()));
        let args = &m.domains[1].args;
        assert_eq!(args[2], "--pager");
        let spec = pager_spec::PagerSpec::parse(&args[3]).unwrap();
        assert_eq!(spec.combination(), c, "{}", args[3]);
        if backing.is_remote() {
            let r = spec.store.remote().unwrap();
            assert_eq!((r.net.as_str(), r.traders.len(), r.spread, r.netc), ("nc", 2, false, true));
            assert!(args[3].ends_with(",spread=no,netc=yes"), "{}", args[3]);
            assert!(args[3].contains("traders=10.0.2.1:7000+10.0.2.2:7000"), "{}", args[3]);
        }
        assert!(!specs.contains(&args[3]), "{}", args[3]);
        specs.push(args[3].clone());
    }
    // Defaults left out: no mirror, spread, servers only.
    let m = parse("t.toml", REMOTE_PAGER, APPS).unwrap();
    assert_eq!(
        m.domains[1].args[3],
        "hierarchy=compressed,frames=256,cache=131072,policy=clock,disk=pg,swap_at=0,\
         swap=33554432,store=remote,net=nc,traders=10.0.2.1:7000"
    );
    // The contracts asked of the servers, as tables of durations.
    let text = REMOTE_PAGER.replace(
        "traders = [\"10.0.2.1:7000\"] }",
        "traders = [\"10.0.2.1:7000\"], svqos = { period = \"20ms\", slice = \"2ms\" }, \
         netqos = { period = \"5ms\", slice = \"1500us\", extra = true } }",
    );
    let m = parse("t.toml", &text, APPS).unwrap();
    let spec = pager_spec::PagerSpec::parse(&m.domains[1].args[3]).unwrap();
    assert!(m.domains[1].args[3].ends_with(",svqos=20ms/2ms,netqos=5ms/1500us/x"));
    let r = spec.store.remote().unwrap();
    assert_eq!((r.server_qos.slice_ns, r.server_qos.extra), (2_000_000, false));
    assert_eq!((r.net_qos.period_ns, r.net_qos.extra), (5_000_000, true));

    // Copies instead of frame loans, said as the spec says it.
    let text = REMOTE_PAGER.replace("disk = \"pg\",", "disk = \"pg\", loans = false,");
    let m = parse("t.toml", &text, APPS).unwrap();
    assert!(m.domains[1].args[3].contains(",loans=no,"), "{}", m.domains[1].args[3]);
    assert!(!pager_spec::PagerSpec::parse(&m.domains[1].args[3]).unwrap().loans);
}

#[test]
fn remote_pager_errors_name_their_key_and_line() {
    let table = "pager = { hierarchy = \"compressed\", frames = 256, cache = \"128K\", disk = \
                 \"pg\", store = \"remote\", net = \"nc\", traders = [\"10.0.2.1:7000\"] }";
    let cases: &[(&str, &str, &str)] = &[
        (
            "hierarchy = \"compressed\", frames = 256, cache = \"128K\"",
            "hierarchy = \"prefetching\", frames = 256",
            "t.toml:15: domain[1].pager.store: invalid pager store \"remote\": a prefetching \
             hierarchy pages only to the local disk (store=local)",
        ),
        (
            "store = \"remote\", net = \"nc\", traders = [\"10.0.2.1:7000\"]",
            "mirror = \"disk\"",
            "t.toml:15: domain[1].pager.mirror: invalid pager mirror \"disk\": only with \
             store=remote",
        ),
        (
            "store = \"remote\"",
            "store = \"local\"",
            "t.toml:15: domain[1].pager.net: invalid pager net \"nc\": only with store=remote",
        ),
        (
            "store = \"remote\"",
            "store = \"far\"",
            "t.toml:15: domain[1].pager.store: invalid pager store \"far\": not local or remote",
        ),
        (
            "net = \"nc\", ",
            "",
            "t.toml:15: domain[1].pager.net: missing field `net`: store=remote needs it",
        ),
        (
            ", traders = [\"10.0.2.1:7000\"]",
            "",
            "t.toml:15: domain[1].pager.traders: missing field `traders`: store=remote needs \
             traders or servers",
        ),
        (
            "net = \"nc\"",
            "net = \"pg\"",
            "t.toml:15: domain[1].pager.net: invalid pager net \"pg\": the same channel prefix \
             as disk",
        ),
        (
            "\"10.0.2.1:7000\"",
            "\"10.0.2.1\"",
            "t.toml:15: domain[1].pager.traders: invalid pager traders [\"10.0.2.1\"]: not \
             A.B.C.D:PORT endpoints",
        ),
        (
            "\"10.0.2.1:7000\"",
            "\"10.0.2.1:7000+10.0.2.2:7000\"",
            "t.toml:15: domain[1].pager.traders: invalid pager traders \
             [\"10.0.2.1:7000+10.0.2.2:7000\"]: an endpoint contains '+'",
        ),
        (
            "\"10.0.2.1:7000\"",
            "\"1.1.1.1:1\", \"1.1.1.2:1\", \"1.1.1.3:1\", \"1.1.1.4:1\"",
            "t.toml:15: domain[1].pager.traders: invalid pager traders [\"1.1.1.1:1\", \
             \"1.1.1.2:1\", \"1.1.1.3:1\", \"1.1.1.4:1\"]: more than 3 traders",
        ),
        (
            "traders = [\"10.0.2.1:7000\"]",
            "servers = [\"10.0.2.1:0\"]",
            "t.toml:15: domain[1].pager.servers: invalid pager servers [\"10.0.2.1:0\"]: not \
             A.B.C.D:PORT endpoints",
        ),
        (
            "traders = [\"10.0.2.1:7000\"]",
            "traders = \"10.0.2.1:7000\"",
            "t.toml:15: domain[1].pager.traders: invalid type: string \"10.0.2.1:7000\", \
             expected a sequence",
        ),
        (
            "traders = [\"10.0.2.1:7000\"]",
            "traders = [\"10.0.2.1:7000\"], spread = \"no\"",
            "t.toml:15: domain[1].pager.spread: invalid type: string \"no\", expected a boolean",
        ),
        (
            "traders = [\"10.0.2.1:7000\"]",
            "traders = [\"10.0.2.1:7000\"], netc = \"wkdm\"",
            "t.toml:15: domain[1].pager.netc: invalid type: string \"wkdm\", expected a boolean",
        ),
        (
            "traders = [\"10.0.2.1:7000\"]",
            "traders = [\"10.0.2.1:7000\"], svqos = { period = \"1ms\", slice = \"2ms\" }",
            "t.toml:15: domain[1].pager.svqos: invalid pager svqos 1ms/2ms: the slice is \
             longer than the period",
        ),
        (
            "traders = [\"10.0.2.1:7000\"]",
            "traders = [\"10.0.2.1:7000\"], netqos = { period = \"1ms\", slice = \"0s\" }",
            "t.toml:15: domain[1].pager.netqos: invalid pager netqos 1ms/0ns: a slice of 0 \
             without x would never be served",
        ),
        (
            "traders = [\"10.0.2.1:7000\"]",
            "traders = [\"10.0.2.1:7000\"], netqos = { period = \"1ms\", slice = 5 }",
            "t.toml:15: domain[1].pager.netqos.slice: invalid duration 5: a duration needs a unit",
        ),
        (
            "store = \"remote\", net = \"nc\", traders = [\"10.0.2.1:7000\"]",
            "svqos = { period = \"10ms\", slice = \"1ms\", extra = true }",
            "t.toml:15: domain[1].pager.svqos: invalid pager svqos 10ms/1ms/x: only with \
             store=remote",
        ),
        (
            "net = \"nc\"",
            "net = \"netc\"",
            "t.toml:15: domain[1].pager.net: the pager's net \"netc\" needs channels \
             \"netc-req\" (from this domain) and \"netc-resp\" (to this domain), and there is \
             no channel \"netc-req\"",
        ),
    ];
    for (from, to, expect) in cases {
        assert!(REMOTE_PAGER.contains(table));
        let text = REMOTE_PAGER.replace(table, &table.replace(from, to));
        assert_ne!(text, REMOTE_PAGER, "{from}");
        let e = err(&text).to_string();
        assert!(e.starts_with(expect), "{to}:\n{e}\nexpected\n{expect}");
    }
    // The network session's channels join this domain to one other, the right way round.
    let swapped = REMOTE_PAGER.replace(
        "name = \"nc-resp\"\nfrom = \"net\"\nto = \"pager\"",
        "name = \"nc-resp\"\nfrom = \"pager\"\nto = \"net\"",
    );
    assert_ne!(swapped, REMOTE_PAGER);
    let e = err(&swapped).to_string();
    assert!(
        e.starts_with(
            "t.toml:15: domain[1].pager.net: channel[3] \"nc-resp\" is to \"net\", not to this \
             domain \"pager\": the pager receives the replies to its network requests on it"
        ),
        "{e}"
    );
    let other = REMOTE_PAGER
        .replace("name = \"nc-resp\"\nfrom = \"net\"", "name = \"nc-resp\"\nfrom = \"blk\"");
    let e = err(&other).to_string();
    assert!(e.contains("a network session's two channels join the same two domains"), "{e}");
}

/// The pager examples of the manifests' README and of the crate documentation parse, next to a
/// block driver, and give the domain the arguments the README shows.
#[test]
fn documented_pager_examples_parse() {
    let readme = std::fs::read_to_string(manifests_dir().join("README.md")).unwrap();
    let crate_doc = include_str!("../src/lib.rs");
    let channels = "\n[[channel]]\nname = \"pg-req\"\nfrom = \"pager\"\nto = \"blk\"\n\
                    [[channel]]\nname = \"pg-resp\"\nfrom = \"blk\"\nto = \"pager\"\n";
    let readme_paging = &readme[readme.find("## Paging").expect("a Paging section")..];
    let doc_paging = &crate_doc[crate_doc.find("`pager` configures").expect("pager docs")..];
    for (name, block, extra) in [
        ("README.md", first_toml_block(readme_paging), ""),
        ("lib.rs", first_toml_block(doc_paging), channels),
    ] {
        let text = format!(
            "[system]\nmemory = \"128M\"\n[[domain]]\nname = \"blk\"\napp = \"virtio-blk\"\n\
             memory = {{ guaranteed = \"1M\" }}\n{block}\n{extra}"
        );
        let m = parse(name, &text, APPS).unwrap_or_else(|e| panic!("{e}"));
        let args = format!("{:?}", m.domains[1].args);
        assert!(readme_paging.contains(&format!("\n{args}\n")), "{name}: {args}");
        assert!(crate_doc.contains(m.domains[1].args[3].as_str()), "{name}: {args}");
    } // The remote example, with its network session.
    let remote = &readme_paging[readme_paging.find("### Remote memory").expect("remote")..];
    let text = format!(
        "[system]\nmemory = \"128M\"\n[[domain]]\nname = \"blk\"\napp = \"virtio-blk\"\n\
         memory = {{ guaranteed = \"1M\" }}\n{}\n",
        first_toml_block(remote)
    );
    let m = parse("README.md", &text, APPS).unwrap_or_else(|e| panic!("{e}"));
    let args = format!("{:?}", m.domains[1].args);
    assert!(remote.contains(&format!("\n{args}\n")), "README.md: {args}");
    let spec = pager_spec::PagerSpec::parse(&m.domains[1].args[3]).unwrap();
    assert_eq!(spec.combination(), pager_spec::Combination::RemoteMirrorDiskCompressed);
}

/// `ManifestError::from_toml` places serde's errors over other TOML files as the manifests'
/// own: the line, the key path (a missing key appended), or a syntax error without a key.
#[test]
fn serde_errors_of_other_toml_files_name_line_and_key() {
    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Item {
        name: String,
        size: u32,
    }
    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Doc {
        item: Vec<Item>,
    }
    let error = |text: &str| {
        let e = toml::from_str::<Doc>(text).unwrap_err();
        ManifestError::from_toml("f.toml", text, &e).to_string()
    };
    let two = "[[item]]\nname = \"a\"\nsize = 1\n\n[[item]]\nname = \"b\"\nsize = -4\n";
    let got = error(two);
    assert!(got.starts_with("f.toml:7: item[1].size: "), "{got}");
    let missing = "[[item]]\nname = \"a\"\nsize = 1\n\n[[item]]\nname = \"b\"\n";
    let got = error(missing);
    assert!(got.starts_with("f.toml:5: item[1].size: missing field `size`"), "{got}");
    let unknown = "[[item]]\nname = \"a\"\nsize = 1\ncolour = 2\n";
    let got = error(unknown);
    assert!(got.starts_with("f.toml:4: item[0].colour: unknown field `colour`"), "{got}");
    let syntax = "[[item]\nname = 1\n";
    let got = error(syntax);
    assert!(got.starts_with("f.toml:1: TOML syntax error: "), "{got}");
}
