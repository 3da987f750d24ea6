//! The QEMU suite of self-paging (RISC-V): stretch drivers resolving their own domain's page
//! faults, frames contracts and revocation; manifests in `tests/manifests/paging/`.

use super::{QemuTest, expect_ending, expect_line};
use crate::Arch;
use crate::qemu::{Boot, Ending, Outcome};
use crate::system::Spoil;

/// The value of `key=` in `line` (up to the next space).
pub(crate) fn field(line: &str, key: &str) -> Option<u64> {
    let pattern = format!("{key}=");
    let at = line.split(' ').find_map(|w| w.strip_prefix(pattern.as_str()))?;
    at.parse().ok()
}

/// The first log line containing `text`.
fn line_with<'a>(out: &'a Outcome, text: &str) -> Result<&'a str, String> {
    out.line(text).map(|l| l.message.as_str()).ok_or(format!("no log line contains `{text}`"))
}

/// The domains' frames all came back: the run summary's two counts agree.
fn frames_returned(out: &Outcome) -> Result<(), String> {
    super::domains::frames_returned(out)
}

fn demand_zero(out: &Outcome) -> Result<(), String> {
    expect_ending(out, Ending::Kernel(0))?;
    let line = line_with(out, "demandzero: pages=")?;
    let get = |k: &str| field(line, k).ok_or(format!("no `{k}=` in `{line}`"));
    let pages = get("pages")?;
    if pages != 10_000 {
        return Err(format!("{pages} pages touched, not 10000"));
    }
    for k in ["kernel_faults", "driver_faults"] {
        if get(k)? != pages {
            return Err(format!("{k} = {} for {pages} pages: {line}", get(k)?));
        }
    }
    if get("nonzero_pages")? != 0 || get("bad_stamps")? != 0 {
        return Err(format!("contents wrong: {line}"));
    }
    if get("max_held")? > get("contract")? {
        return Err(format!("more frames held than the contract allows: {line}"));
    }
    expect_line(out, "demand: 10000 page faults delivered to its stretch drivers")?;
    expect_line(out, "demand: exited with status 0")?;
    expect_line(out, "neighbour: exited with status 0")?;
    frames_returned(out)
}

fn unbound(out: &Outcome) -> Result<(), String> {
    expect_ending(out, Ending::Kernel(0))?;
    let report = line_with(out, "[unbound] tessera: page fault at ")?;
    for part in ["(read) in stretch", "pc=0x", "<__tessera_main", "no stretch driver is bound"] {
        if !report.contains(part) {
            return Err(format!("the report lacks `{part}`: {report}"));
        }
    }
    expect_line(out, "unbound: exited with status 105")?;
    expect_line(out, "neighbour: exited with status 0")?;
    frames_returned(out)
}

pub(super) fn paging_tests(p: &str) -> Vec<QemuTest> {
    let boot = || Boot::new(Arch::Riscv64);
    let test = |name: &str, manifest: &str, check: fn(&Outcome) -> Result<(), String>| QemuTest {
        name: format!("{p}paging::{name}"),
        boot: boot(),
        system: Some((format!("tests/manifests/paging/{manifest}"), Spoil::Nothing)),
        check: Box::new(check),
    };
    vec![
        test("demand_zero", "demand-zero.toml", demand_zero),
        test("unbound", "unbound.toml", unbound),
    ]
}
