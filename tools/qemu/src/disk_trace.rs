//! The block driver's per-period disk records during `cargo xtask run`: for each completed
//! period of each disk stream (a USD client with a contract of disk time), the line
//! `disk period: stream=NAME start=NS end=NS guaranteed=NS extra=NS missed=true|false`, which
//! the driver domain prints after its own prefix (`[blk] virtio-blk: disk period: ...`). At
//! the end of the run every record is written as CSV, JSON or an SVG plot, with the code that
//! writes the CPU's ([`crate::records`], [`crate::plot`]); the lines stay in the log as they are.
//!
//! The network driver's transmit streams (contracts of link time) have the same records, in
//! lines `net period: stream=NAME ...` (`--net-out`, `--net-svg`): a [`Trace`] says which
//! driver's records a function reads ([`DISK`], [`NET`]); the functions without one read the
//! disk's.

use std::path::PathBuf;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::log::LogLine;
use crate::records::{self, Format, csv_field, write};

/// The words that start a disk record, wherever the domain's prefix puts them in the line.
pub const MARK: &str = "disk period: ";

pub use crate::records::DiskPeriod;

/// Whose per-period stream records: the block driver's or the network driver's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trace {
    /// The words that start a record.
    pub mark: &'static str,
    /// The resource, as the options and messages name it (`disk`: `--disk-out`).
    pub name: &'static str,
    /// The driver that prints the records.
    pub driver: &'static str,
    /// How the plot labels its axis and series.
    pub plot: &'static crate::plot::Kind,
}

/// The block driver's disk streams (USD over disk time).
pub const DISK: Trace =
    Trace { mark: MARK, name: "disk", driver: "block driver", plot: &crate::plot::DISK };

/// The network driver's transmit streams (USD over link time).
pub const NET: Trace =
    Trace { mark: "net period: ", name: "net", driver: "network driver", plot: &crate::plot::NET };

impl Default for Trace {
    fn default() -> Self {
        DISK
    }
}

/// The disk period record in `line`, if it is one.
pub fn period(line: &LogLine) -> Option<DiskPeriod> {
    period_in(&line.message)
}

/// The disk period record in the text `message`, if it is one.
pub fn period_in(message: &str) -> Option<DiskPeriod> {
    record_in(&DISK, message)
}

/// The `trace`'s period record in the text `message`, if it is one.
pub fn record_in(trace: &Trace, message: &str) -> Option<DiskPeriod> {
    let at = message.find(trace.mark)?;
    let text = &message[at + trace.mark.len()..];
    let stream = text.split_whitespace().find_map(|w| w.strip_prefix("stream="))?;
    let n = crate::cpu::numbers(text);
    Some(DiskPeriod {
        stream: stream.to_string(),
        start: *n.get("start")?,
        end: *n.get("end")?,
        guaranteed: *n.get("guaranteed")?,
        extra: *n.get("extra")?,
        missed: match text.split_whitespace().find_map(|w| w.strip_prefix("missed="))? {
            "true" => true,
            "false" => false,
            _ => return None,
        },
    })
}

/// Every disk period record of a log, in order.
pub fn periods(log: &[LogLine]) -> Vec<DiskPeriod> {
    records(&DISK, log)
}

/// Every period record of `trace` in a log, in order.
pub fn records(trace: &Trace, log: &[LogLine]) -> Vec<DiskPeriod> {
    log.iter().filter_map(|l| record_in(trace, &l.message)).collect()
}

/// A stream as the written records describe it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StreamInfo {
    /// Its name (its client's channel name).
    pub name: String,
}

/// The streams `periods` mention, in order of name.
pub fn streams(periods: &[DiskPeriod]) -> Vec<StreamInfo> {
    let mut names: Vec<&str> = periods.iter().map(|p| p.stream.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    names.into_iter().map(|name| StreamInfo { name: name.to_string() }).collect()
}

/// The records as CSV, one line per period after a header line.
pub fn csv(periods: &[DiskPeriod]) -> String {
    records::csv("stream", periods, |p| csv_field(&p.stream))
}

/// The records as JSON: `{"streams": [StreamInfo...], "periods": [DiskPeriod...]}`.
pub fn json(periods: &[DiskPeriod]) -> String {
    records::json("streams", &streams(periods), periods)
}

/// What `cargo xtask run` does with one driver's records.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Whose records ([`DISK`] by default).
    pub trace: Trace,
    /// Write every record here when the run ends, CSV or JSON by extension (`--disk-out`,
    /// `--net-out`).
    pub out: Option<PathBuf>,
    /// Plot every record here when the run ends (`--disk-svg`, `--net-svg`).
    pub svg: Option<PathBuf>,
}

impl Options {
    /// Is anything asked for?
    pub fn wanted(&self) -> bool {
        self.out.is_some() || self.svg.is_some()
    }

    /// Checks the output file names, before anything is built or booted.
    pub fn check(&self) -> Result<()> {
        if let Some(out) = &self.out {
            Format::of(out).with_context(|| format!("--{}-out", self.trace.name))?;
        }
        Ok(())
    }

    /// Writes the files asked for from the records in `log`; `title` heads the plot.
    pub fn save(&self, log: &[LogLine], title: &str) -> Result<()> {
        let t = self.trace;
        let periods = records(&t, log);
        if periods.is_empty() {
            eprintln!("{}: the {} printed no `{}` records", t.name, t.driver, t.mark.trim_end());
        }
        if let Some(path) = &self.out {
            let text = match Format::of(path)? {
                Format::Csv => csv(&periods),
                Format::Json => json(&periods),
            };
            write(path, &text)?;
            let n = periods.len();
            eprintln!("{}: {n} period records written to {}", t.name, path.display());
        }
        if let Some(path) = &self.svg {
            write(path, &crate::plot::streams_svg(t.plot, title, &periods))?;
            eprintln!("{}: plot written to {}", t.name, path.display());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(message: &str) -> LogLine {
        LogLine { level: "INFO".into(), timestamp: Some("0.1".into()), message: message.into() }
    }

    fn period(stream: &str, start_ms: u64, guaranteed_us: u64, extra_us: u64) -> DiskPeriod {
        DiskPeriod {
            stream: stream.into(),
            start: start_ms * 1_000_000,
            end: (start_ms + 100) * 1_000_000,
            guaranteed: guaranteed_us * 1000,
            extra: extra_us * 1000,
            missed: false,
        }
    }

    fn two_records() -> Vec<DiskPeriod> {
        let mut missed = period("beta", 0, 30_000, 0);
        missed.missed = true;
        vec![period("alpha", 0, 10_000, 2_500), missed]
    }

    #[test]
    fn records_are_found_after_the_domains_prefix() {
        let log = [
            line(
                "[blk] virtio-blk: disk period: stream=alpha start=0 end=100000000 guaranteed=10000000 extra=2500000 missed=false",
            ),
            line(
                "[blk] disk period: stream=beta start=0 end=100000000 guaranteed=30000000 extra=0 missed=true",
            ),
            line("disk period: stream=gamma start=5 end=6 guaranteed=1 extra=0 missed=false"),
            line("[blk] virtio-blk: client alpha (domain 3) served"),
            // Not whole: no stream, or a number missing.
            line("[blk] disk period: start=0 end=1 guaranteed=0 extra=0 missed=false"),
            line("[blk] disk period: stream=alpha start=0 end=1 extra=0 missed=false"),
            line("sched period: domain=0 start=0 end=10 guaranteed=1 extra=0 missed=false"),
        ];
        let p = periods(&log);
        assert_eq!(&p[..2], two_records());
        assert_eq!(
            p[2],
            DiskPeriod {
                stream: "gamma".into(),
                start: 5,
                end: 6,
                guaranteed: 1,
                extra: 0,
                missed: false
            }
        );
        assert_eq!(p.len(), 3);
    }

    #[test]
    fn csv_has_a_header_and_a_line_per_period() {
        assert_eq!(
            csv(&two_records()),
            "stream,start_ns,end_ns,guaranteed_ns,extra_ns,missed\n\
             alpha,0,100000000,10000000,2500000,false\n\
             beta,0,100000000,30000000,0,true\n"
        );
        assert!(csv(&[period("a,b", 0, 1, 0)]).ends_with("\n\"a,b\",0,100000000,1000,0,false\n"));
        assert_eq!(csv(&[]), "stream,start_ns,end_ns,guaranteed_ns,extra_ns,missed\n");
    }

    #[test]
    fn json_has_the_streams_and_the_periods() {
        let mut records = two_records();
        records.push(period("alpha", 100, 1, 0));
        let text = json(&records);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["streams"], serde_json::json!([{"name": "alpha"}, {"name": "beta"}]));
        assert_eq!(v["periods"].as_array().unwrap().len(), 3);
        assert_eq!(
            v["periods"][1],
            serde_json::json!({"stream": "beta", "start": 0, "end": 100_000_000,
                "guaranteed": 30_000_000, "extra": 0, "missed": true})
        );
        assert!(text.find("\"streams\"") < text.find("\"periods\""));
        assert!(text.ends_with("}\n"));
    }

    #[test]
    fn options_check_the_format_first() {
        assert!(!Options::default().wanted());
        let bad = Options { out: Some("disk.xml".into()), ..Options::default() };
        let e = format!("{:#}", bad.check().unwrap_err());
        assert!(bad.wanted() && e.contains("--disk-out") && e.contains("*.json"), "{e}");
        let good = Options {
            out: Some("d/disk.JSON".into()),
            svg: Some("d.svg".into()),
            ..Options::default()
        };
        assert!(good.check().is_ok());
    }

    #[test]
    fn save_writes_the_files_asked_for() {
        let dir = std::env::temp_dir().join(format!("xtask-disk-trace-{}", std::process::id()));
        let options = Options {
            out: Some(dir.join("disk.csv")),
            svg: Some(dir.join("disk.svg")),
            ..Options::default()
        };
        let log = [line(
            "[blk] disk period: stream=alpha start=0 end=100 guaranteed=10 extra=5 missed=false",
        )];
        options.save(&log, "disk time per period").unwrap();
        let text = std::fs::read_to_string(dir.join("disk.csv")).unwrap();
        assert!(text.ends_with("\nalpha,0,100,10,5,false\n"), "{text}");
        let svg = std::fs::read_to_string(dir.join("disk.svg")).unwrap();
        assert!(svg.contains(r#"<g id="stream-0">"#) && svg.contains(">alpha</text>"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn network_records_are_read_as_the_disks() {
        let log = [
            line(
                "[drv-a] net period: stream=slow start=0 end=100000000 guaranteed=10000000 extra=2500000 missed=false",
            ),
            line(
                "[blk] disk period: stream=beta start=0 end=100000000 guaranteed=30000000 extra=0 missed=true",
            ),
        ];
        let net = records(&NET, &log);
        assert_eq!(
            net,
            [DiskPeriod { stream: "slow".into(), ..period("alpha", 0, 10_000, 2_500) }]
        );
        assert_eq!(periods(&log).len(), 1);
        let bad = Options { trace: NET, out: Some("net.xml".into()), svg: None };
        let e = format!("{:#}", bad.check().unwrap_err());
        assert!(e.contains("--net-out"), "{e}");
        let dir = std::env::temp_dir().join(format!("xtask-net-trace-{}", std::process::id()));
        let options = Options { trace: NET, out: None, svg: Some(dir.join("net.svg")) };
        options.save(&log, "link time per period").unwrap();
        let svg = std::fs::read_to_string(dir.join("net.svg")).unwrap();
        assert!(svg.contains("link time per period (%)") && svg.contains(">slow</text>"));
        assert!(!svg.contains(">beta</text>"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
