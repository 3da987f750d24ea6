//! The kernel command line: space-separated `key=value` words.
//!
//! Known keys:
//! - `test=NAME[,NAME...]` runs the named in-kernel tests (`test=all` runs every test of this
//!   architecture; `test=list` lists them) and exits with their verdict.
//! - `fault=KIND` makes the kernel commit a deliberate fault after boot (see [`crate::tests`]),
//!   to show the trap report.
//!
//! - `trace=sched` logs every completed CPU period of every domain (a `sched period` record
//!   with its guaranteed and extra time and whether it missed its deadline), every page
//!   fault's service (a `fault served` record when the domain's handler resumes), who has the
//!   CPU (`sched run`, `sched idle`), activations, events sent between domains and their
//!   counts, and tells the domains (`Dcb::trace`: a block driver prints its requests and
//!   anticipation waits); xtask turns
//!   them into live figures, CSV/JSON (`cargo xtask run --cpu`) and timelines (`--trace`,
//!   docs/timelines.md, which lists the records).
//! - `stop=TIME` (e.g. `stop=2s`, `stop=500ms`) ends the run at that instant of the kernel's
//!   clock, with the run summary, even if domains are still running.
//! - `softint=TIME[,TIME...]` (up to four, ascending) raises a software interrupt, which the
//!   kernel does not expect, at each of those instants of its clock (on the first timer
//!   interrupt from user mode at or after it; a supervisor software interrupt on RISC-V, a
//!   self-IPI on an unused vector on x86_64, taken in user mode either way): a test of how
//!   unexpected interrupts are handled.
//!
//! Unknown keys and bad values are reported and ignored.

/// The parsed command line; it borrows from the boot information.
#[derive(Default)]
pub struct Args<'a> {
    /// Value of `test=`.
    pub test: Option<&'a str>,
    /// Value of `fault=`.
    pub fault: Option<&'a str>,
    /// `trace=sched` was given.
    pub trace_sched: bool,
    /// Value of `stop=`, in nanoseconds since boot.
    pub stop_ns: Option<u64>,
    /// Values of `softint=`, in nanoseconds since boot.
    pub softint_ns: heapless::Vec<u64, 4>,
}

impl<'a> Args<'a> {
    /// Parses `line`, logging a warning for each word it does not understand.
    pub fn parse(line: &'a str) -> Self {
        let mut args = Args::default();
        for word in line.split_ascii_whitespace() {
            match word.split_once('=') {
                Some(("test", v)) => args.test = Some(v),
                Some(("fault", v)) => args.fault = Some(v),
                Some(("trace", "sched")) => args.trace_sched = true,
                Some(("stop", v)) => match duration_ns(v) {
                    Some(ns) => args.stop_ns = Some(ns),
                    None => {
                        defmt::warn!("command line: `{=str}` is not a time like 2s or 500ms", word)
                    }
                },
                Some(("softint", v)) => match instants_ns(v) {
                    Some(list) => args.softint_ns = list,
                    None => defmt::warn!(
                        "command line: `{=str}` is not up to four ascending times like 10ms,20ms",
                        word
                    ),
                },
                _ => defmt::warn!("command line: ignoring unknown word `{=str}`", word),
            }
        }
        args
    }
}

/// Up to four ascending durations separated by commas, in nanoseconds.
fn instants_ns(text: &str) -> Option<heapless::Vec<u64, 4>> {
    let mut list = heapless::Vec::new();
    for part in text.split(',') {
        let ns = duration_ns(part)?;
        if list.last().is_some_and(|&last| last > ns) {
            return None;
        }
        list.push(ns).ok()?;
    }
    Some(list)
}

/// `"2s"`, `"500ms"`, `"750us"` or `"1000ns"` in nanoseconds.
fn duration_ns(text: &str) -> Option<u64> {
    let digits = text.find(|c: char| !c.is_ascii_digit())?;
    let (number, unit) = text.split_at(digits);
    let scale = match unit {
        "s" => 1_000_000_000,
        "ms" => 1_000_000,
        "us" => 1_000,
        "ns" => 1,
        _ => return None,
    };
    number.parse::<u64>().ok()?.checked_mul(scale)
}
