//! Per-period accounts written to files: what the CPU records (a domain's CPU time in each of
//! its periods, [`crate::cpu_trace`]) and the disk records (a disk stream's disk time in each of
//! its periods, [`crate::disk_trace`]) have in common, and their CSV and JSON forms. Each kind
//! of record names its owner its own way (a domain index, a stream name); the times are the
//! same.

use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::Serialize;
use serde::ser::SerializeStruct;

/// One completed period of something with a `(period, slice, extra)` contract, and the time it
/// was given in it.
pub trait Account {
    /// Start of the period, ns.
    fn start(&self) -> u64;
    /// End of the period, ns.
    fn end(&self) -> u64;
    /// Time used on the contract's slice in it, ns.
    fn guaranteed(&self) -> u64;
    /// Time used beyond the slice (slack time), ns.
    fn extra(&self) -> u64;
    /// Whether its deadline was missed (it ended with work waiting and slice left).
    fn missed(&self) -> bool;

    /// `ns` as a share of the period's length.
    fn share(&self, ns: u64) -> f64 {
        ns as f64 / self.end().saturating_sub(self.start()).max(1) as f64
    }
}

/// A file format for the records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// One line per period.
    Csv,
    /// The owners and the periods, as one object.
    Json,
}

impl Format {
    /// The format `path`'s extension names.
    pub fn of(path: &Path) -> Result<Format> {
        match path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref() {
            Some("csv") => Ok(Format::Csv),
            Some("json") => Ok(Format::Json),
            _ => bail!(
                "{}: period records are written as CSV or JSON; name the file *.csv or *.json",
                path.display()
            ),
        }
    }
}

/// The records as CSV: a header line of `owner_columns` and the period's columns, then one line
/// per record, `owner(record)` (its owner's fields, each already passed through [`csv_field`])
/// before its times.
pub fn csv<A: Account>(owner_columns: &str, records: &[A], owner: impl Fn(&A) -> String) -> String {
    let mut s = format!("{owner_columns},start_ns,end_ns,guaranteed_ns,extra_ns,missed\n");
    for r in records {
        s.push_str(&format!(
            "{},{},{},{},{},{}\n",
            owner(r),
            r.start(),
            r.end(),
            r.guaranteed(),
            r.extra(),
            r.missed()
        ));
    }
    s
}

/// `s` as one CSV field: quoted if it holds a separator, a quote or a line break.
pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// The records as JSON, one object: `{"<owners_key>": [owners...], "periods": [periods...]}`,
/// in that order, indented, with a final newline.
pub fn json<O: Serialize, A: Serialize>(
    owners_key: &'static str,
    owners: &[O],
    periods: &[A],
) -> String {
    /// The object written: the owners under their key, then the periods.
    struct Records<'a, O, A> {
        key: &'static str,
        owners: &'a [O],
        periods: &'a [A],
    }
    impl<O: Serialize, A: Serialize> Serialize for Records<'_, O, A> {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let mut o = s.serialize_struct("Records", 2)?;
            o.serialize_field(self.key, self.owners)?;
            o.serialize_field("periods", self.periods)?;
            o.end()
        }
    }
    let mut s = serde_json::to_string_pretty(&Records { key: owners_key, owners, periods })
        .expect("records serialize");
    s.push('\n');
    s
}

/// Writes `text` to `path`, making its directory first.
pub fn write(path: &Path, text: &str) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// One completed period of one disk stream.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DiskPeriod {
    /// The stream: its client's channel name.
    pub stream: String,
    /// Start and end of the period, ns of the driver's clock.
    pub start: u64,
    /// See `start`.
    pub end: u64,
    /// Guaranteed and extra disk time the stream was charged in it, ns.
    pub guaranteed: u64,
    /// See `guaranteed`.
    pub extra: u64,
    /// Whether it ended with requests waiting and slice left.
    pub missed: bool,
}

impl Account for DiskPeriod {
    fn start(&self) -> u64 {
        self.start
    }
    fn end(&self) -> u64 {
        self.end
    }
    fn guaranteed(&self) -> u64 {
        self.guaranteed
    }
    fn extra(&self) -> u64 {
        self.extra
    }
    fn missed(&self) -> bool {
        self.missed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record with a named owner, for the shared code alone.
    #[derive(Serialize)]
    struct Rec {
        who: &'static str,
        start: u64,
        end: u64,
    }

    impl Account for Rec {
        fn start(&self) -> u64 {
            self.start
        }
        fn end(&self) -> u64 {
            self.end
        }
        fn guaranteed(&self) -> u64 {
            3
        }
        fn extra(&self) -> u64 {
            1
        }
        fn missed(&self) -> bool {
            false
        }
    }

    #[test]
    fn csv_and_json_put_the_owner_first() {
        let recs = [Rec { who: "a,b", start: 0, end: 8 }];
        assert_eq!(
            csv("who", &recs, |r| csv_field(r.who)),
            "who,start_ns,end_ns,guaranteed_ns,extra_ns,missed\n\"a,b\",0,8,3,1,false\n"
        );
        assert_eq!(recs[0].share(2), 0.25);
        let text = json("owners", &["a,b"], &recs);
        assert!(text.starts_with("{\n  \"owners\": [") && text.ends_with("}\n"), "{text}");
        assert!(text.find("\"owners\"") < text.find("\"periods\""));
    }
}
