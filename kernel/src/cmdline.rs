//! The kernel command line: space-separated `key=value` words.
//!
//! Known keys:
//! - `test=NAME[,NAME...]` runs the named in-kernel tests (`test=all` runs every test of this
//!   architecture; `test=list` lists them) and exits with their verdict.
//! - `fault=KIND` makes the kernel commit a deliberate fault after boot (see [`crate::tests`]),
//!   to show the trap report.
//!
//! Unknown keys are reported and ignored.

/// The parsed command line; it borrows from the boot information.
#[derive(Default)]
pub struct Args<'a> {
    /// Value of `test=`.
    pub test: Option<&'a str>,
    /// Value of `fault=`.
    pub fault: Option<&'a str>,
}

impl<'a> Args<'a> {
    /// Parses `line`, logging a warning for each word it does not understand.
    pub fn parse(line: &'a str) -> Self {
        let mut args = Args::default();
        for word in line.split_ascii_whitespace() {
            match word.split_once('=') {
                Some(("test", v)) => args.test = Some(v),
                Some(("fault", v)) => args.fault = Some(v),
                _ => defmt::warn!("command line: ignoring unknown word `{=str}`", word),
            }
        }
        args
    }
}
