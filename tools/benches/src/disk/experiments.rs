//! The experiments of `bench disk` as data: the runs to boot (scheduler, anticipation, clients,
//! duration) and, for each experiment, its rows (which runs give the figure with and without
//! anticipation), the paper's figure and the explanation of where Tessera's differs, and the
//! bars Tessera must meet. Nothing here boots or simulates: [`plan`] only describes.
//!
//! Every run is on the IBM Deskstar 34GXP model with 64 KiB reads, Aged-SPTF unless its
//! experiment says otherwise; positions are in sectors, a "GB" is 2^30 bytes (as in the host
//! tests of `disk_sched`, whose numbers these experiments repeat).

/// Sectors in a GB (2^30 bytes): the readers' files lie whole GBs apart.
pub const GB: u64 = 2 * 1024 * 1024;
/// Sectors a read: 64 KiB.
pub const READ_SECTORS: u32 = 128;
/// Bytes a read.
pub const READ_BYTES: u64 = READ_SECTORS as u64 * 512;

/// A scheduling policy of the driver domain (`--scheduler`): the driver's own names.
pub use disk_sched::PolicyName as Scheduler;

/// Where a client's reads go (`diskread --pattern`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// One after the other.
    Sequential,
    /// Every other 64 KiB block.
    Alternate,
    /// At random (aligned) places within `span` sectors of its start.
    Random {
        /// Sectors.
        span: u64,
    },
    /// Sequential, `burst` reads then a pause of `pause_us` (the paper's adversary).
    Bursts {
        /// Reads a burst.
        burst: u32,
        /// The pause after each burst, µs.
        pause_us: u64,
    },
    /// A disk hog: random reads within `span` sectors, as fast as it can.
    Hog {
        /// Sectors.
        span: u64,
    },
}

/// A disk-time contract (`disk = { ... }` on a client domain).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Contract {
    /// Period, ms.
    pub period_ms: u64,
    /// Slice, ms.
    pub slice_ms: u64,
    /// Whether it may use slack beyond its slice.
    pub extra: bool,
    /// The latency hint, ms.
    pub latency_ms: u64,
}

impl Contract {
    /// Its share of the disk's time.
    pub fn share(&self) -> f64 {
        self.slice_ms as f64 / self.period_ms as f64
    }
}

/// A synchronous reader (one `diskread` domain).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Client {
    /// Its reads.
    pub pattern: Pattern,
    /// Its first sector.
    pub start: u64,
    /// Time between a read's completion and the next read's issue, µs.
    pub think_us: u64,
    /// Its disk contract, if any.
    pub contract: Option<Contract>,
}

impl Client {
    /// A sequential reader from `start` thinking `think_us`.
    fn sequential(start: u64, think_us: u64) -> Client {
        Client { pattern: Pattern::Sequential, start, think_us, contract: None }
    }
}

/// The name of client `i`: its domain and its channels' stem.
pub fn client_name(i: usize) -> String {
    format!("r{i}")
}

/// One boot: the driver's scheduler and anticipation, its clients, how long they read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    /// Its key (unique; names its manifest).
    pub key: String,
    /// The driver's policy.
    pub scheduler: Scheduler,
    /// Whether the driver anticipates.
    pub anticipation: bool,
    /// The readers.
    pub clients: Vec<Client>,
    /// How long each reads, ms.
    pub duration_ms: u64,
    /// Simulated on the host only: its manifest cannot be written (more readers than a
    /// driver domain has channel ends for).
    pub host_only: bool,
}

/// The most readers one driver domain serves in a manifest: two channels each, and a domain
/// is an end of at most [`manifest::MAX_CHANNELS_PER_DOMAIN`] channels.
pub const MAX_BOOTED_READERS: usize = manifest::MAX_CHANNELS_PER_DOMAIN / 2;

/// What a row shows of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// All clients' bytes over the run's window, MB/s.
    TotalMbps,
    /// Client `i`'s MB/s.
    ClientMbps(usize),
    /// Client `num`'s bytes over client `den`'s.
    BytesRatio {
        /// The numerator's client.
        num: usize,
        /// The denominator's client.
        den: usize,
    },
}

impl Metric {
    /// The unit shown.
    pub fn unit(self) -> &'static str {
        match self {
            Metric::TotalMbps | Metric::ClientMbps(_) => "MB/s",
            Metric::BytesRatio { .. } => "ratio",
        }
    }
}

/// One row of an experiment's table.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The configuration, for people.
    pub label: String,
    /// The run with anticipation, if any.
    pub with: Option<String>,
    /// The run without, if any.
    pub without: Option<String>,
    /// Where the row sits on a plot's x axis (the think time, the number of readers).
    pub x: f64,
    /// The paper's figure.
    pub paper: &'static str,
    /// Why Tessera's figure differs from the paper's (empty: it does not). Its figures are
    /// this run's, written as placeholders the report fills from the host simulation
    /// (`report::note`): `{with}`, `{without}` (the row's figures), `{ratio}` (with over
    /// without), `{gain}` (the same as a signed percentage), `{with_vs:KEY}` (with as a
    /// percentage of run `KEY`'s figure), `{seek_1gb}` (the model's seek across 1 GB, ms) and
    /// `{stride_window_ms}` (the driver's Stride window).
    pub note: &'static str,
}

/// A figure Tessera must reach, checked on every device and on the host simulation.
#[derive(Clone, Debug, PartialEq)]
pub enum Bar {
    /// On every row: the figure with anticipation at least `min` times the figure without.
    RatioAtLeast {
        /// The least ratio.
        min: f64,
    },
    /// On every row: the figure with anticipation within `[lo, hi]`.
    WithIn {
        /// Lower end.
        lo: f64,
        /// Upper end.
        hi: f64,
    },
    /// On every row: the total MB/s with anticipation at least `frac` of run `reference`'s.
    TotalAtLeastOf {
        /// The fraction.
        frac: f64,
        /// The run compared with.
        reference: String,
    },
    /// On every row: each client's MB/s with anticipation at least `frac` of the fair share
    /// (the total over the number of clients).
    LeastAtLeastFair {
        /// The fraction.
        frac: f64,
    },
    /// On every row: client 0's MB/s with anticipation at least `frac` of its MB/s in run
    /// `reference` (alone).
    StreamAtLeastOf {
        /// The fraction.
        frac: f64,
        /// The run compared with.
        reference: String,
    },
    /// On every run of the experiment: no stream whose contract has `extra = false` used more
    /// than its slice in any period (the driver's `disk period:` lines).
    SlicesKept,
    /// On every run of the experiment: no wait outlived its timeout (`disk waits: exceeded=0`).
    NoWaitExceeded,
}

impl Bar {
    /// The bar, for people.
    pub fn describe(&self) -> String {
        match self {
            Bar::RatioAtLeast { min } => format!("with / without ≥ {min}"),
            Bar::WithIn { lo, hi } => format!("with in [{lo}, {hi}]"),
            Bar::TotalAtLeastOf { frac, reference } => {
                format!("total ≥ {:.0}% of `{reference}`", frac * 100.0)
            }
            Bar::LeastAtLeastFair { frac } => {
                format!("every reader ≥ {:.0}% of its fair share", frac * 100.0)
            }
            Bar::StreamAtLeastOf { frac, reference } => {
                format!("stream ≥ {frac:.2} × its MB/s in `{reference}`")
            }
            Bar::SlicesKept => "no extra=false stream beyond its slice in any period".into(),
            Bar::NoWaitExceeded => "no wait outlived its timeout (exceeded=0)".into(),
        }
    }
}

/// One experiment: a table of rows, the paper's claim, the bars.
#[derive(Clone, Debug, PartialEq)]
pub struct Experiment {
    /// Its letter and key (`a-sequential`).
    pub key: &'static str,
    /// Its title.
    pub title: &'static str,
    /// What its rows show.
    pub metric: Metric,
    /// The rows.
    pub rows: Vec<Row>,
    /// The bars Tessera must meet (none: it is compared with the paper only).
    pub bars: Vec<Bar>,
    /// A plot of the rows against `x`, if it has one (its file name, without `.svg`).
    pub plot: Option<&'static str>,
    /// What the experiment shows and how Tessera's heuristics differ, below its table.
    pub comment: &'static str,
}

/// How much of the bench runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    /// Every point.
    Full,
    /// Fewer sweep points and readers (`--quick`).
    Quick,
}

/// Virtual time each client reads, ms.
pub const DURATION_MS: u64 = 3000;
/// The isolation runs read longer: their periods are a second.
pub const USD_DURATION_MS: u64 = 4000;
/// The runs whose figure is a share read longer: a 100 ms Stride window and Aged-SPTF's turns
/// of half a second need several rounds to settle to their shares (over 3 s a 1:2 contract
/// reads well off 2 on the host, and the eighth of 8 readers may not have had its turn yet).
pub const SHARE_DURATION_MS: u64 = 10_000;
/// The pause of the adversary's bursts that lies just past the longest wait (15 ms of
/// histogram plus the 1 ms the thesis adds).
pub const ADVERSARY_PAUSE_US: u64 = 17_000;

/// The runs and experiments of the bench.
pub fn plan(size: Size) -> (Vec<Run>, Vec<Experiment>) {
    let mut runs: Vec<Run> = Vec::new();
    let mut add = |key: String, scheduler, anticipation, clients: Vec<Client>, duration_ms| {
        let host_only = clients.len() > MAX_BOOTED_READERS;
        runs.push(Run {
            key: key.clone(),
            scheduler,
            anticipation,
            clients,
            duration_ms,
            host_only,
        });
        key
    };
    let full = size == Size::Full;
    let two_seq =
        |think_us| vec![Client::sequential(0, think_us), Client::sequential(GB, think_us)];
    let mut experiments = Vec::new();

    // a. Sequential readers.
    let alone =
        add("a-alone".into(), Scheduler::AgedSptf, true, two_seq(0)[..1].to_vec(), DURATION_MS);
    let a_with = add("a-two-with".into(), Scheduler::AgedSptf, true, two_seq(0), DURATION_MS);
    let a_without =
        add("a-two-without".into(), Scheduler::AgedSptf, false, two_seq(0), DURATION_MS);
    let alternate = |_| {
        [0, GB]
            .map(|start| Client { pattern: Pattern::Alternate, start, think_us: 0, contract: None })
            .to_vec()
    };
    let alt_with =
        add("a-alternate-with".into(), Scheduler::AgedSptf, true, alternate(()), DURATION_MS);
    let alt_without =
        add("a-alternate-without".into(), Scheduler::AgedSptf, false, alternate(()), DURATION_MS);
    experiments.push(Experiment {
        key: "a-sequential",
        title: "a. Sequential readers (Aged-SPTF)",
        metric: Metric::TotalMbps,
        rows: vec![
            Row {
                label: "one sequential reader alone".into(),
                with: Some(alone.clone()),
                without: None,
                x: 1.0,
                paper: "≈21 MB/s",
                note: "the model's outer zone streams {with} MB/s in the host simulation",
            },
            Row {
                label: "two sequential readers 1 GB apart".into(),
                with: Some(a_with.clone()),
                without: Some(a_without.clone()),
                x: 2.0,
                paper: "≈5 → ≈20 MB/s (4×, within 6% of one reader)",
                note: "without: 1 GB apart the model seeks {seek_1gb} ms, against the paper's \
                       9 ms average (plus rotation), so alternation keeps {without} MB/s and \
                       the gain is {ratio}× in the host simulation; with: {with_vs:a-alone} of \
                       one reader (the paper idles 6%)",
            },
            Row {
                label: "two alternate-block readers 1 GB apart".into(),
                with: Some(alt_with),
                without: Some(alt_without),
                x: 2.0,
                paper: "≈5 MB/s → half the disk's bandwidth",
                note: "",
            },
        ],
        bars: vec![],
        plot: None,
        comment: "The paper's B1 and B3 (mmap readers, no prefetch). Tessera waits the wait with the \
                  most expected gain over the reader's think-time histogram (the paper: its 95th \
                  percentile plus 1 ms); for readers that think alike the two agree.",
    });

    // b. Random readers over 1 GB regions.
    let mut rows = Vec::new();
    for (apart, note) in [
        (
            1u64,
            "adjacent files: each reader's own seeks within 1 GB cost about what the seek \
                between them does, so waiting saves little ({gain} in the host simulation); the \
                paper does not say where its files lay",
        ),
        (
            4,
            "4 GB apart the seek between files dominates, and waiting saves it ({gain} in the \
             host simulation, against the paper's +28% to +30%)",
        ),
    ] {
        let readers = |_| {
            [0, apart * GB]
                .map(|start| Client {
                    pattern: Pattern::Random { span: GB },
                    start,
                    think_us: 0,
                    contract: None,
                })
                .to_vec()
        };
        let w = add(
            format!("b-random-{apart}gb-with"),
            Scheduler::AgedSptf,
            true,
            readers(()),
            DURATION_MS,
        );
        let wo = add(
            format!("b-random-{apart}gb-without"),
            Scheduler::AgedSptf,
            false,
            readers(()),
            DURATION_MS,
        );
        rows.push(Row {
            label: if apart == 1 {
                "two random readers, adjacent 1 GB regions".into()
            } else {
                format!("two random readers, 1 GB regions {apart} GB apart")
            },
            with: Some(w),
            without: Some(wo),
            x: apart as f64,
            paper: "+28% to +30%",
            note,
        });
    }
    experiments.push(Experiment {
        key: "b-random",
        title: "b. Random readers in separate 1 GB files (Aged-SPTF)",
        metric: Metric::TotalMbps,
        rows,
        bars: vec![],
        plot: None,
        comment: "The paper's B4: the gain comes from seek reduction between the files only.",
    });

    // c. Think-time sweep.
    let thinks: &[u64] = if full { &[0, 2, 4, 6, 8, 10, 12, 15] } else { &[0, 4, 8, 15] };
    let mut rows = Vec::new();
    for &ms in thinks {
        let (w, wo) = if ms == 0 {
            (a_with.clone(), a_without.clone())
        } else {
            (
                add(
                    format!("c-think-{ms}ms-with"),
                    Scheduler::AgedSptf,
                    true,
                    two_seq(ms * 1000),
                    DURATION_MS,
                ),
                add(
                    format!("c-think-{ms}ms-without"),
                    Scheduler::AgedSptf,
                    false,
                    two_seq(ms * 1000),
                    DURATION_MS,
                ),
            )
        };
        rows.push(Row {
            label: format!("two sequential readers, think {ms} ms"),
            with: Some(w),
            without: Some(wo),
            x: ms as f64,
            paper: match ms {
                0 => "≈4× (≈5 → ≈20 MB/s)",
                m if m < 8 => "gain shrinking with t",
                _ => "no gain from ≈8 ms",
            },
            note: match ms {
                0 => "{ratio}× in the host simulation (see a.)",
                m if m < 8 => "",
                15 => {
                    "{with} and {without} MB/s in the host simulation: a think this long \
                       misses a revolution more"
                }
                _ => "",
            },
        });
    }
    experiments.push(Experiment {
        key: "c-think",
        title: "c. Think-time sweep, two sequential readers (Aged-SPTF)",
        metric: Metric::TotalMbps,
        rows,
        bars: vec![],
        plot: Some("think-time"),
        comment: "The paper's B5: the gain vanishes where the think time reaches the positioning \
                  time it saves (the paper: about 8 ms on its disk).",
    });

    // d. The adversary.
    let pauses: &[u64] = if full { &[5_000, ADVERSARY_PAUSE_US] } else { &[ADVERSARY_PAUSE_US] };
    let mut rows = vec![Row {
        label: "n = 0 (sequential, no pauses)".into(),
        with: Some(a_with.clone()),
        without: Some(a_without.clone()),
        x: 0.0,
        paper: "no loss",
        note: "",
    }];
    for n in 1..=4u32 {
        for &pause_us in pauses {
            let readers = [0, GB]
                .map(|start| Client {
                    pattern: Pattern::Bursts { burst: n, pause_us },
                    start,
                    think_us: 0,
                    contract: None,
                })
                .to_vec();
            let ms = pause_us / 1000;
            rows.push(Row {
                label: format!("n = {n}, pause {ms} ms"),
                with: Some(add(
                    format!("d-adversary-{n}-{ms}ms-with"),
                    Scheduler::AgedSptf,
                    true,
                    readers.clone(),
                    DURATION_MS,
                )),
                without: Some(add(
                    format!("d-adversary-{n}-{ms}ms-without"),
                    Scheduler::AgedSptf,
                    false,
                    readers,
                    DURATION_MS,
                )),
                x: f64::from(n),
                paper: "≈20% worse (n = 1…4)",
                note: if n == 1 && pause_us == pauses[0] {
                    "Tessera waits only as long as the quick reads take, never into the pause; the \
                     paper's rule (its own rows, not checked) waits its 95th percentile at every \
                     pause, and loses what its rows show"
                } else {
                    ""
                },
            });
        }
    }
    experiments.push(Experiment {
        key: "d-adversary",
        title: "d. The adversary: n quick reads, then a pause (Aged-SPTF)",
        metric: Metric::TotalMbps,
        rows,
        bars: vec![Bar::RatioAtLeast { min: 0.9 }, Bar::NoWaitExceeded],
        plot: None,
        comment: "The paper's B8. Tessera's bar: at most 10% worse at every n and pause.",
    });

    // e. A 1:2 stride contract.
    let contract = |slice_ms| Contract { period_ms: 1000, slice_ms, extra: true, latency_ms: 1000 };
    let stride_readers = |_| {
        vec![
            Client { contract: Some(contract(300)), ..Client::sequential(0, 0) },
            Client { contract: Some(contract(600)), ..Client::sequential(GB, 0) },
        ]
    };
    let e_with =
        add("e-stride-with".into(), Scheduler::Stride, true, stride_readers(()), SHARE_DURATION_MS);
    let e_without = add(
        "e-stride-without".into(),
        Scheduler::Stride,
        false,
        stride_readers(()),
        SHARE_DURATION_MS,
    );
    experiments.push(Experiment {
        key: "e-stride",
        title: "e. A 1:2 contract on Stride: bytes of the 2-share reader over the 1-share's",
        metric: Metric::BytesRatio { num: 1, den: 0 },
        rows: vec![Row {
            label: "two sequential readers, disk contracts 300 ms : 600 ms a second".into(),
            with: Some(e_with),
            without: Some(e_without),
            x: 2.0,
            paper: "≈1:1 without (60 tps), 1:2 with (98 tps with the combined heuristic)",
            note: "without, the readers alternate: as many reads each (a ratio of {without} in \
                   bytes in the host simulation, though their disk times differ, as one always \
                   meets the platter at a worse angle); with, Tessera's relaxed Stride window is \
                   {stride_window_ms} ms (a window of the paper's 1 s lets the seek-reducing \
                   half drift from 1:2)",
        }],
        bars: vec![
            Bar::WithIn { lo: 1.9, hi: 2.1 },
            Bar::TotalAtLeastOf { frac: 0.95, reference: a_with.clone() },
        ],
        plot: None,
        comment: "The paper's B14 (there TPC-B select on separate databases). Tessera's bar: 1:2 \
                  within 5% at the throughput of anticipation on Aged-SPTF (the `total` bar).",
    });

    // f. Many sequential readers.
    let counts: &[usize] = if full { &[2, 3, 4, 5, 6, 7, 8] } else { &[2, 4, 8] };
    let mut rows = Vec::new();
    for &n in counts {
        let readers = (0..n as u64).map(|i| Client::sequential(i * GB, 0)).collect();
        let key = add(
            format!("f-readers-{n}-with"),
            Scheduler::AgedSptf,
            true,
            readers,
            SHARE_DURATION_MS,
        );
        rows.push(Row {
            label: format!("{n} sequential readers"),
            with: Some(key),
            without: None,
            x: n as f64,
            paper: "not measured; its CSCAN heuristic starves readers",
            note: if n > MAX_BOOTED_READERS {
                "host only: more readers than a driver domain has channel ends for; Aged-SPTF \
                 hands the disk from reader to reader in turns of half a second"
            } else {
                "Aged-SPTF hands the disk from reader to reader in turns of half a second"
            },
        });
    }
    experiments.push(Experiment {
        key: "f-many",
        title: "f. 2 to 8 sequential readers with anticipation (Aged-SPTF)",
        metric: Metric::TotalMbps,
        rows,
        bars: vec![
            Bar::TotalAtLeastOf { frac: 0.95, reference: alone.clone() },
            Bar::LeastAtLeastFair { frac: 0.5 },
        ],
        plot: None,
        comment: "Better than the paper: at least 95% of one reader's bandwidth, and every \
                  reader at least half its fair share over the run.",
    });

    // g. Isolation under USD.
    let stream = Contract { period_ms: 1000, slice_ms: 500, extra: false, latency_ms: 1000 };
    let hog = Contract { period_ms: 1000, slice_ms: 400, extra: false, latency_ms: 1000 };
    let usd_readers = |_| {
        vec![
            Client { contract: Some(stream), ..Client::sequential(0, 0) },
            Client {
                pattern: Pattern::Hog { span: 20 * GB },
                start: 10 * GB,
                think_us: 0,
                contract: Some(hog),
            },
        ]
    };
    let g_with = add("g-usd-with".into(), Scheduler::Usd, true, usd_readers(()), USD_DURATION_MS);
    let g_without =
        add("g-usd-without".into(), Scheduler::Usd, false, usd_readers(()), USD_DURATION_MS);
    experiments.push(Experiment {
        key: "g-isolation",
        title: "g. Isolation under USD: a sequential stream (500 ms/s, extra=false) beside a hog (400 ms/s)",
        metric: Metric::ClientMbps(0),
        rows: vec![Row {
            label: "the stream's MB/s beside a random hog".into(),
            with: Some(g_with),
            without: Some(g_without),
            x: 0.5,
            paper: "not in the paper (Argon's bar)",
            note: "without anticipation the stream and the hog interleave single requests and \
                   the stream loses its locality",
        }],
        bars: vec![
            Bar::StreamAtLeastOf { frac: 0.9 * stream.share(), reference: alone },
            Bar::SlicesKept,
            Bar::NoWaitExceeded,
        ],
        plot: Some("usd-periods"),
        comment: "A stream contracted for a share f of the disk's time reaches at least 0.9 × f \
                  × its throughput alone; the USD charges the time the disk waits for a stream \
                  to that stream, so it pays for its own locality.",
    });

    (runs, experiments)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_names_runs_that_exist_and_keys_are_unique() {
        for size in [Size::Full, Size::Quick] {
            let (runs, experiments) = plan(size);
            let keys: Vec<&str> = runs.iter().map(|r| r.key.as_str()).collect();
            let mut sorted = keys.clone();
            sorted.sort();
            sorted.dedup();
            assert_eq!(sorted.len(), keys.len(), "duplicate run keys");
            for e in &experiments {
                for r in &e.rows {
                    for k in r.with.iter().chain(&r.without) {
                        assert!(keys.contains(&k.as_str()), "{}: no run {k}", e.key);
                    }
                    // A row with anticipation runs it; one without does not.
                    let find = |k: &String| runs.iter().find(|r| &r.key == k).unwrap();
                    assert!(r.with.iter().all(|k| find(k).anticipation), "{}", r.label);
                    assert!(r.without.iter().all(|k| !find(k).anticipation), "{}", r.label);
                }
                for b in &e.bars {
                    if let Bar::TotalAtLeastOf { reference, .. }
                    | Bar::StreamAtLeastOf { reference, .. } = b
                    {
                        assert!(keys.contains(&reference.as_str()), "{reference}");
                    }
                }
            }
        }
    }

    #[test]
    fn the_bench_stays_modest() {
        let (full, _) = plan(Size::Full);
        let (quick, _) = plan(Size::Quick);
        let full: Vec<Run> = full.into_iter().filter(|r| !r.host_only).collect();
        let quick: Vec<Run> = quick.into_iter().filter(|r| !r.host_only).collect();
        assert!(full.len() <= 50, "{} boots a device", full.len());
        assert!(quick.len() < full.len() && quick.len() <= 30, "{}", quick.len());
        let virtual_s: u64 = full.iter().map(|r| r.duration_ms).sum::<u64>() / 1000;
        assert!(virtual_s <= 250, "{virtual_s} s of disk time a device");
        // Contracts are admissible: shares sum to at most 1.
        for r in &full {
            let total: f64 = r.clients.iter().filter_map(|c| c.contract).map(|c| c.share()).sum();
            assert!(total <= 1.0, "{}", r.key);
        }
    }
}
