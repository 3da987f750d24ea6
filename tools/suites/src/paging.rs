//! The QEMU suite of self-paging (both architectures): stretch drivers resolving their own domain's page
//! faults, frames contracts and revocation; manifests in `tests/manifests/paging/`.

use crate::harness::{QemuTest, expect_ending, expect_exit, expect_line, expect_terminated};
use qemu_run::expected::Expected;
use qemu_run::log::field;
use qemu_run::qemu::{Boot, Ending, Outcome};
use system_image::system::Spoil;
use tool_base::Arch;

/// A check of one boot's outcome.
type CheckFn = fn(&Outcome) -> Result<(), String>;

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
    // The contract is the manifest's 44M guarantee (no optimistic memory), in frames.
    let contract = get("contract")?;
    if contract != 44 * 256 {
        return Err(format!("contract = {contract} frames, not 11264 (44M): {line}"));
    }
    // At the end every touched page still holds its own frame (its stamps were read back), so
    // the domain held at least one frame a page; and never more than its contract.
    let max_held = get("max_held")?;
    if !(pages..=contract).contains(&max_held) {
        return Err(format!("max_held should be {pages}..={contract}: {line}"));
    }
    expect_line(out, "demand: 10000 page faults delivered to its stretch drivers")?;
    expect_exit(out, "demand", 0)?;
    expect_exit(out, "neighbour", 0)?;
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
    expect_exit(out, "unbound", 105)?;
    expect_exit(out, "neighbour", 0)?;
    frames_returned(out)
}

/// What the revocation scenarios share: `small` held optimistic frames too but fewer, so it
/// got no notice and lost nothing; `guard`'s nailed memory is unchanged; `claim` got its
/// memory; every frame came back.
fn revocation_common(out: &Outcome) -> Result<(), String> {
    expect_ending(out, Ending::Kernel(0))?;
    let small = line_with(out, "[small] memhog: filled")?;
    let small_optimistic = field(small, "optimistic").ok_or("no optimistic count for small")?;
    let notice = line_with(out, "revocation: domain ")?;
    if !notice.contains("revocation: domain big (holding") {
        return Err(format!("the notice did not go to big: {notice}"));
    }
    let held = number_after(notice, "holding ")?;
    if held <= small_optimistic {
        return Err(format!("big held {held} optimistic frames, small {small_optimistic}"));
    }
    let small_end = line_with(out, "[small] memhog: held")?;
    for (k, want) in [("notices", 0), ("corrupt", 0), ("guaranteed_lost", 0)] {
        if field(small_end, k) != Some(want) {
            return Err(format!("small: {k} should be {want}: {small_end}"));
        }
    }
    expect_line(out, "[claim] memhog: claimed bytes=8388608")?;
    for d in ["small", "claim", "guard"] {
        expect_exit(out, d, 0)?;
    }
    frames_returned(out)
}

/// How late after a revocation deadline the kernel may take the frames by force, in us.
const REVOCATION_MARGIN_US: u64 = 1_000;

/// The number that follows `after` in `line`.
fn number_after(line: &str, after: &str) -> Result<u64, String> {
    line.split(after)
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .ok_or(format!("no number after `{after}` in `{line}`"))
}

fn revocation(out: &Outcome) -> Result<(), String> {
    revocation_common(out)?;
    let notice = line_with(out, "revocation: domain big (holding")?;
    let wanted = number_after(notice, "asked to release ")?;
    let done =
        line_with(out, &format!("revocation: domain big released {wanted} optimistic frames"))?;
    // Released after the notice and by the deadline (it was not terminated).
    let get = |k: &str| field(notice, k).ok_or(format!("no {k}= in `{notice}`"));
    let took = number_after(done, " in ")?;
    if !(1..=get("deadline")?.saturating_sub(get("sent")?)).contains(&took) {
        return Err(format!("big's release should take 1 us up to the deadline: {done}"));
    }
    let big = line_with(out, "[big] memhog: held")?;
    let released = field(big, "released").ok_or(format!("no released= in `{big}`"))?;
    let lost_nothing_else =
        field(big, "corrupt") == Some(0) && field(big, "guaranteed_lost") == Some(0);
    // It released what it was asked for, and could not release more than it held.
    let held = number_after(notice, "holding ")?;
    if !(wanted..=held).contains(&released) || !lost_nothing_else {
        return Err(format!(
            "big should have released {wanted} frames and lost nothing else: {big}"
        ));
    }
    expect_exit(out, "big", 0)
}

/// The revocation rule (docs/memory.md), in us: the time by which a contract of `period` and
/// `slice` guarantees 10 us of CPU per frame `wanted` (whole slices, plus one period), at most
/// 50 ms.
fn revocation_window_us(wanted: u64, period: u64, slice: u64) -> u64 {
    ((wanted * 10).div_ceil(slice) + 1).saturating_mul(period).min(50_000)
}

/// The notice to big names its contract (`period`, `slice` in us) and a deadline by the rule;
/// returns `(sent, deadline)` in us.
fn notice_by_the_rule(out: &Outcome, period: u64, slice: u64) -> Result<(u64, u64), String> {
    let notice = line_with(out, "revocation: domain big (holding")?;
    let get = |k: &str| field(notice, k).ok_or(format!("no {k}= in `{notice}`"));
    let (sent, deadline) = (get("sent")?, get("deadline")?);
    if (get("period")?, get("slice")?) != (period, slice) {
        return Err(format!(
            "the notice should name big's contract, {period}/{slice} us: {notice}"
        ));
    }
    let wanted = number_after(notice, "asked to release ")?;
    let window = revocation_window_us(wanted, period, slice);
    if deadline.checked_sub(sent) != Some(window) {
        return Err(format!("the deadline should be {window} us after the notice: {notice}"));
    }
    Ok((sent, deadline))
}

/// A victim with a 1 ms period that complies is not terminated: its deadline is many of its
/// periods away, as many as its contract needs to release what was asked.
fn revocation_short_period(out: &Outcome) -> Result<(), String> {
    let (sent, deadline) = notice_by_the_rule(out, 1_000, 300)?;
    if deadline - sent <= 3 * 1_000 {
        return Err(format!("a deadline of {} us leaves big too little time", deadline - sent));
    }
    revocation(out)
}

/// A victim with a 10 s period that ignores the notice: the deadline is the 50 ms bound, and the
/// claimer has its memory within 100 ms of asking, by its own clock.
fn revocation_long_period(out: &Outcome) -> Result<(), String> {
    revocation_forced(out, 10_000_000, 3_000_000)?;
    let claim = line_with(out, "[claim] memhog: claimed bytes=")?;
    let waited = field(claim, "waited_us").ok_or(format!("no waited_us= in `{claim}`"))?;
    // Not before the 50 ms deadline (big frees nothing before), and within the 100 ms bound.
    if !(50_000..=100_000).contains(&waited) {
        return Err(format!("claim should wait 50 to 100 ms for its memory: {claim}"));
    }
    Ok(())
}

fn revocation_ignored(out: &Outcome) -> Result<(), String> {
    revocation_forced(out, 100_000, 30_000)
}

/// big, with CPU contract (`period`, `slice`) in us, ignores the notice and loses its frames by
/// force at the deadline.
fn revocation_forced(out: &Outcome, period: u64, slice: u64) -> Result<(), String> {
    revocation_common(out)?;
    let (_, deadline) = notice_by_the_rule(out, period, slice)?;
    let forced = line_with(out, "domain big: revocation: asked for")?;
    if !forced.contains("taking all its frames by force") {
        return Err(format!("unexpected report: {forced}"));
    }
    let at: f64 = out
        .line("domain big: revocation: asked for")
        .and_then(|l| l.timestamp.as_deref()?.trim().parse().ok())
        .ok_or("no time on the forced revocation")?;
    // Not before the deadline, and at it: the kernel arms its timer for the earliest
    // revocation deadline, so it acts in that interrupt (1 us after the deadline in this run,
    // whose virtual time is the same every time). The margin leaves room for kernel work in
    // progress when the interrupt comes, and is far below big's period, by which a kernel that
    // looked only when it next schedules big would be late.
    let at_us = (at * 1e6).round() as u64;
    if !(deadline..=deadline + REVOCATION_MARGIN_US).contains(&at_us) {
        return Err(format!(
            "big's frames were taken by force at {at_us} us, not between the deadline \
             ({deadline} us) and {REVOCATION_MARGIN_US} us after it"
        ));
    }
    expect_terminated(out, "big", "did not release revoked frames by the deadline")
}

/// canary's own clock: in every complete period it ran its 5 ms slice, within 10 us; the
/// kernel's accounts agree that it missed no deadline; hog did all its work and all frames
/// came back.
fn kernel_work(out: &Outcome) -> Result<(), String> {
    expect_ending(out, Ending::Kernel(0))?;
    let hog = line_with(out, "[hog] memhog: nailed bytes=67108864")?;
    if hog.contains("failed") {
        return Err(format!("hog's calls failed: {hog}"));
    }
    let spin = line_with(out, "[canary] spin: iterations=")?;
    let get = |k: &str| field(spin, k).ok_or(format!("no {k}= in `{spin}`"));
    let (windows, min, max, slice) =
        (get("windows")?, get("min_ns")?, get("max_ns")?, get("slice_ns")?);
    if windows < 50 {
        return Err(format!("canary saw only {windows} complete periods: {spin}"));
    }
    if min + 10_000 < slice || max > slice + 10_000 {
        return Err(format!(
            "canary's CPU per period ranged {min}..{max} ns, not its slice {slice} ns within 10 us"
        ));
    }
    expect_line(out, "canary: cpu ")?;
    let account = line_with(out, "  canary: cpu ")?;
    if !account.contains(" 0 deadlines missed") {
        return Err(format!("canary missed deadlines: {account}"));
    }
    for d in ["canary", "hog"] {
        expect_exit(out, d, 0)?;
    }
    frames_returned(out)
}

/// Each kind of kernel object, made until the kernel says no: every maker got `NoMemory`
/// after making some, the kernel did not stop, the canary got its 5 ms slice within 10 us in
/// every period by its own clock and missed no deadline, and every frame came back.
fn kernel_objects(out: &Outcome) -> Result<(), String> {
    expect_ending(out, Ending::Kernel(0))?;
    for (domain, kind) in [
        ("stretches", "stretch"),
        ("managed", "managed"),
        ("frames", "frame"),
        ("optimistic", "optimistic"),
        ("timers", "timer"),
    ] {
        let line = line_with(out, &format!("[{domain}] kobjects: kind={kind} made="))?;
        let made = number_after(line, "made=")?;
        if made == 0 || !line.ends_with("error=NoMemory") {
            return Err(format!("{domain} should make some and then get NoMemory: {line}"));
        }
        expect_exit(out, domain, 0)?;
    }
    let spin = line_with(out, "[canary] spin: iterations=")?;
    let get = |k: &str| field(spin, k).ok_or(format!("no {k}= in `{spin}`"));
    let (windows, min, max, slice) =
        (get("windows")?, get("min_ns")?, get("max_ns")?, get("slice_ns")?);
    if windows < 40 || min + 10_000 < slice || max > slice + 10_000 {
        return Err(format!("canary did not get its slice in every period: {spin}"));
    }
    let account = line_with(out, "  canary: cpu ")?;
    if !account.contains(" 0 deadlines missed") {
        return Err(format!("canary missed deadlines: {account}"));
    }
    frames_returned(out)
}

fn out_of_frames(out: &Outcome) -> Result<(), String> {
    expect_ending(out, Ending::Kernel(0))?;
    let report = line_with(out, "[greedy] tessera: page fault at ")?;
    if !report.contains("the stretch driver failed the fault: out of frames; the thread ends") {
        return Err(format!("unexpected report: {report}"));
    }
    expect_exit(out, "greedy", 105)?;
    expect_exit(out, "neighbour", 0)?;
    frames_returned(out)
}

fn fault_in_handler(out: &Outcome) -> Result<(), String> {
    expect_ending(out, Ending::Kernel(0))?;
    expect_line(out, "domain nested: store page fault at address")?;
    expect_line(out, "domain nested: the address is in managed stretch")?;
    expect_line(
        out,
        "domain nested: the fault was not delivered to its stretch driver: the fault came with activations off",
    )?;
    expect_terminated(out, "nested", "store page fault")?;
    expect_exit(out, "neighbour", 0)?;
    frames_returned(out)
}

// ANCHOR: driver_waits
fn driver_waits(out: &Outcome) -> Result<(), String> {
    expect_ending(out, Ending::Kernel(0))?;
    let line = line_with(out, "pagewait: faults=")?;
    for k in ["faults", "waits", "waits_with_progress"] {
        if field(line, k) != Some(20) {
            return Err(format!("{k} should be 20: {line}"));
        }
    }
    expect_exit(out, "pagewait", 0)
}
// ANCHOR_END: driver_waits

/// A second thread's faults on a stretch whose driver is busy park until it is free: at least
/// one wait, and at most one for each fault (a spinning fault path counts one at every turn of
/// the other threads).
fn driver_waits_contended(out: &Outcome) -> Result<(), String> {
    expect_ending(out, Ending::Kernel(0))?;
    let line = line_with(out, "pagewait: contended pages=")?;
    let (faults, waited) = (field(line, "faults"), field(line, "waits_for_driver"));
    match (faults, waited) {
        (Some(f), Some(w)) if (1..=f).contains(&w) && f >= 20 => {}
        _ => {
            return Err(format!(
                "a second thread's faults should wait, once a fault at most: {line}"
            ));
        }
    }
    expect_exit(out, "pagewait", 0)
}

/// The tutorial's example driver, built from the files the tutorial includes.
fn recorder(out: &Outcome) -> Result<(), String> {
    expect_ending(out, Ending::Kernel(0))?;
    let line = line_with(out, "pagetrace: touched=")?;
    let want = [
        ("touched", 48),
        ("read_only", 16),
        ("written", 32),
        ("upgrades", 16),
        ("faults", 64),
        ("kernel_faults", 64),
        ("dropped", 0),
    ];
    for (k, v) in want {
        if field(line, k) != Some(v) {
            return Err(format!("{k} should be {v}: {line}"));
        }
    }
    if !line.contains("sequential=true") {
        return Err(format!("the first touches were not sequential: {line}"));
    }
    expect_exit(out, "pagetrace", 0)
}

/// The paged stretch driver keeps every byte of a stretch four times its frames under the
/// checked random workload of `heracles`, with the hierarchy `hierarchy`: no mismatch, every
/// page checked, pages evicted to the disk and read back, and the parts of the hierarchy in
/// use (the compressed pool's zero, raw and compressed pages; the friends' prefetches).
fn heracles_random(out: &Outcome, hierarchy: &str) -> Result<(), String> {
    expect_ending(out, Ending::Kernel(0))?;
    frames_returned(out)?;
    let random = line_with(out, "heracles: random pages=")?;
    let get = |line: &str, k: &str| field(line, k).ok_or(format!("no `{k}=` in `{line}`"));
    if get(random, "pages")? != 128 || get(random, "mismatches")? != 0 {
        return Err(format!("contents wrong: {random}"));
    }
    if get(random, "checked")? < 128 {
        return Err(format!("not every page was checked: {random}"));
    }
    let done = line_with(out, "heracles: done program=random")?;
    if !done.contains(&format!("hierarchy={hierarchy} ")) {
        return Err(format!("not the {hierarchy} hierarchy: {done}"));
    }
    // 2,000 steps over 128 pages on 32 frames: most steps fault.
    let faults = get(done, "faults")?;
    if !(1000..=8000).contains(&faults) || get(done, "evictions")? < 500 {
        return Err(format!("too few faults or evictions for 4x the frames: {done}"));
    }
    let disk = line_with(out, "heracles: disk device_reads=")?;
    if get(disk, "device_reads")? == 0 || get(disk, "device_writes")? == 0 {
        return Err(format!("nothing went to the disk: {disk}"));
    }
    let cache = line_with(out, "heracles: cache hits=")?;
    if hierarchy.contains("compressed") {
        for k in ["hits", "compressed_pages", "raw_pages", "zero_pages"] {
            if get(cache, k)? == 0 {
                return Err(format!("the compressed pool had no {k}: {cache}"));
            }
        }
    }
    if hierarchy == "compressed" {
        // Its manifest locks the first 8 pages and halves the pool at step 1000: the locked
        // pages are still resident after every page was read again in order (unlocked, the
        // first pages would have been evicted by the last), and the resize was taken.
        expect_line(out, "heracles: lock of 8 pages: Some(Ok(()))")?;
        expect_line(out, "heracles: locked pages=8 resident=8")?;
        expect_line(out, "heracles: cache resized to 16384 bytes at step 1000: Some(Ok(()))")?;
    }
    if hierarchy == "local" {
        // Its manifest has the clock harvest the accessed bits.
        let spec = line_with(out, "heracles: program=random hierarchy=local")?;
        if !spec.contains(",harvest=4") {
            return Err(format!("the pager does not harvest the accessed bits: {spec}"));
        }
    }
    if hierarchy == "local" || hierarchy == "compressed" {
        // Pages fetched into the window go to the driver in their frames, lent for the request,
        // and so do those written back from it (the local hierarchy's; the compressed pool
        // writes from its own buffers, by copy): every loan came back, and every such page
        // (one a request here) went that way.
        let lent = line_with(out, "virtio-blk: lent frames: requests=")?;
        let requests = get(lent, "requests")?;
        if requests != get(lent, "returned")? {
            return Err(format!("a loan did not come back: {lent}"));
        }
        let mut pages = get(disk, "pages_read")?;
        if hierarchy == "local" {
            pages += get(disk, "pages_written")?;
        }
        if requests != pages {
            return Err(format!("{pages} pages moved, {requests} through lent frames: {lent}"));
        }
    }
    if hierarchy.starts_with("prefetching") && get(disk, "prefetched")? == 0 {
        return Err(format!("the friends disk manager prefetched nothing: {disk}"));
    }
    expect_exit(out, "pager", 0)
}

/// A revocation notice during heavy paging is met by writing back: the pager (disk contract
/// 50 ms every 100 ms) is given the disk rule's deadline (1 ms of its disk time per frame, at
/// most 2 s, more than the CPU rule's 50 ms), releases every frame asked for by then, taking
/// longer than the CPU rule alone would have allowed, and loses no byte.
fn heracles_revocation(out: &Outcome) -> Result<(), String> {
    expect_ending(out, Ending::Kernel(0))?;
    let notice = line_with(out, "revocation: domain pager (holding")?;
    let wanted = number_after(notice, "asked to release ")?;
    let get = |line: &str, k: &str| field(line, k).ok_or(format!("no `{k}=` in `{line}`"));
    let window = get(notice, "deadline")? - get(notice, "sent")?;
    // In us: (ceil(wanted x 1 ms / 50 ms) + 1) x 100 ms, at most 2 s.
    let rule = ((wanted * 1000).div_ceil(50_000) + 1).saturating_mul(100_000).min(2_000_000);
    if window != rule || rule <= 50_000 {
        return Err(format!("the deadline should follow the disk rule ({rule} us): {notice}"));
    }
    let done =
        line_with(out, &format!("revocation: domain pager released {wanted} optimistic frames"))?;
    let took = number_after(done, " in ")?;
    if !(50_000..=window).contains(&took) {
        return Err(format!(
            "writing back should take beyond 50 ms and within the deadline: {done}"
        ));
    }
    let random = line_with(out, "heracles: random pages=")?;
    if get(random, "mismatches")? != 0 || get(random, "checked")? < get(random, "pages")? {
        return Err(format!("contents wrong after the revocation: {random}"));
    }
    let frames = line_with(out, "heracles: frames guaranteed=")?;
    if get(frames, "revocations")? == 0 || get(frames, "released")? < wanted {
        return Err(format!("the app's handler should have heard of the revocation: {frames}"));
    }
    let disk = line_with(out, "heracles: disk device_reads=")?;
    if get(disk, "device_writes")? == 0 {
        return Err(format!("nothing was written back: {disk}"));
    }
    expect_line(out, "[claim] memhog: claimed bytes=2097152")?;
    expect_exit(out, "pager", 0)
}

/// A disk that fails transfers (QEMU's blkdebug, `heracles-disk-errors.blkdebug`) costs the
/// pager exactly the page whose only copy it cannot read: the first read of slot 20 and the
/// first write of slot 5 are retried; the three slots whose writes always fail are retired,
/// their pages kept in memory and written elsewhere while other victims are chosen; page 10,
/// stored in the slot whose reads always fail, is lost, its loss reported by address and heard
/// by the app's handler; every byte of every other page is checked, and the app exits 0. The
/// pager waited before each retry, on its own clock. On
/// virtio-blk (both architectures) and AHCI (x86_64).
fn heracles_disk_errors(out: &Outcome) -> Result<(), String> {
    expect_ending(out, Ending::Kernel(0))?;
    let get = |line: &str, k: &str| field(line, k).ok_or(format!("no `{k}=` in `{line}`"));
    let random = line_with(out, "heracles: random pages=")?;
    if get(random, "mismatches")? != 0 || get(random, "checked")? < get(random, "pages")? {
        return Err(format!("contents wrong: {random}"));
    }
    let errors = line_with(out, "heracles: disk errors retries=")?;
    // Retries: 1 (slot 20) + 1 (slot 5) + 3 x 3 (slots 40 to 42) + 3 (slot 10), four tries
    // each at most; slots retired: 40, 41, 42 and 10.
    let want = [
        ("retries", 14),
        ("retired_slots", 4),
        ("write_failures", 3),
        ("failed_evictions", 3),
        ("lost_pages", 1),
    ];
    for (k, v) in want {
        if get(errors, k)? != v {
            return Err(format!("expected {k}={v}: {errors}"));
        }
    }
    // The waits before the retries, slept on the pager's own (virtual) clock: 1 ms before a
    // second try, 2 ms before a third, 4 ms before a fourth: 1 + 1 + 3 x 7 + 7 = 30 ms, and
    // not much more (a wake-up is late by at most a little scheduling).
    let waited = get(errors, "retry_wait_ns")?;
    if !(30_000_000..=40_000_000).contains(&waited) {
        return Err(format!("the retries should have waited 30 ms in all: {errors}"));
    }
    expect_line(out, "heracles: lost pages=1 handler_told=1")?;
    let lost: Vec<&str> = out
        .log
        .iter()
        .map(|l| l.message.as_str())
        .filter(|m| m.contains("heracles: lost page="))
        .collect();
    match lost[..] {
        [line]
            if line.contains("heracles: lost page=10 va=0x")
                && line.ends_with("handler_told=true") => {}
        _ => return Err(format!("the report should name page 10, and only it: {lost:?}")),
    }
    expect_line(out, "heracles: page 10 was lost; it reads zeros")?;
    expect_exit(out, "pager", 0)
}

/// Frame loans from both ends (`lendcheck`, `tests/manifests/paging/lending.toml`): the client
/// may not lend an unmapped page, a nailed one, another's, nor to a driver it has no channel
/// to; a page lent for the device to write is out of its view (a write faults and waits, by the
/// client's clock, for the driver's 50 ms hold, but not a second) and lent once; the driver
/// learns the address only within the loan and is refused a loan it returned; the driver dies
/// holding a loan of a page lent for the device to read (which the client still read), and
/// the page comes back mapped and writable, its data intact, the client going on.
fn lending(out: &Outcome) -> Result<(), String> {
    expect_ending(out, Ending::Kernel(0))?;
    expect_line(out, "lendcheck: stranger id=1")?;
    for (what, want) in [
        ("lend an unmapped page", "NotMapped"),
        ("lend a nailed page", "NotManaged"),
        ("lend another's page", "BadAddress"),
        ("lend to a driver with no channel", "PermissionDenied"),
        ("lend with a bad access", "InvalidArgument"),
        ("lend it again", "InUse"),
        ("unmap it", "InUse"),
        ("return a loan the driver ended", "NotFound"),
    ] {
        expect_line(out, &format!("[client] lendcheck: {what}: {want}"))?;
    }
    expect_line(out, "lendcheck: lent page 0 for the device to write: mapped=0")?;
    let driver = "[drv] lendcheck: driver: loan from domain 2: another lender PermissionDenied, \
                  longer than a page InvalidArgument, address page-aligned";
    let seen = out.log.iter().filter(|l| l.message.contains(driver)).count();
    if seen != 2 {
        return Err(format!("the driver checked {seen} loans, not 2: `{driver}`"));
    }
    expect_line(
        out,
        "lendcheck: driver: returned Ok; the returned loan: loan_address NotFound, frame_return NotFound",
    )?;
    let write = out
        .line("lendcheck: write to the lent page waited ")
        .map(|l| l.message.as_str())
        .ok_or("no report of the write to the lent page")?;
    let waited = number_after(write, "waited ")?;
    if !(50_000_000..1_000_000_000).contains(&waited) || !write.ends_with("page intact=true") {
        return Err(format!(
            "the write did not wait for the 50 ms loan, or broke the page: {write}"
        ));
    }
    if !write.contains("driver says Some(0)") || write.contains("faults on it=0") {
        return Err(format!("the write took no fault or the driver's checks failed: {write}"));
    }
    expect_terminated(out, "drv", "store page fault")?;
    expect_line(out, "domain drv: 1 lent frame(s) back to their lenders")?;
    expect_line(
        out,
        "lendcheck: lent page 1 for the device to read: readable=true; the driver died holding it: gone=true mapped=1 written_without_fault=true",
    )?;
    expect_line(out, "lendcheck: client done ok=true")?;
    expect_exit(out, "client", 0)?;
    frames_returned(out)
}

pub(super) fn paging_tests(p: &str, arch: Arch) -> Vec<QemuTest> {
    // ANCHOR: test_closure
    let boot = || Boot::new(arch);
    let test = |name: &str, manifest: &str, expected: Expected, check: CheckFn| QemuTest {
        name: format!("{p}paging::{name}"),
        boot: boot(),
        system: Some((format!("tests/manifests/paging/{manifest}"), Spoil::Nothing)),
        expected,
        check: Box::new(check),
    };
    // ANCHOR_END: test_closure
    let heracles = |hierarchy: &'static str| QemuTest {
        name: format!("{p}paging::heracles_{}", hierarchy.replace('-', "_")),
        boot: boot(),
        system: Some((format!("tests/manifests/paging/heracles-{hierarchy}.toml"), Spoil::Nothing)),
        expected: &[],
        check: Box::new(move |out: &Outcome| heracles_random(out, hierarchy)),
    };
    // Deadlines and sleeps in virtual time (one instruction a nanosecond, idle time skipped),
    // so the scenarios do not depend on the host's speed.
    let virtual_time = |mut t: QemuTest| {
        t.boot.icount = true;
        t
    };
    // The reports of faults the kernel could not deliver come from the kernel; those of faults
    // a driver failed, from the domain's own handler (no kernel ERROR).
    let nested: Expected = &[
        "domain nested: store page fault at address 0x*, pc=0x*",
        "domain nested: the address is in managed stretch * of domain nested, where it holds rights 0x*",
        "domain nested: the fault was not delivered to its stretch driver: the fault came with activations off *",
        "domain nested terminated: store page fault",
    ];
    let forced: Expected = &[
        "domain big: revocation: asked for * optimistic frames, still * to release at the deadline (* us): taking all its frames by force",
        "domain big terminated: did not release revoked frames by the deadline",
    ];
    let lending_death: Expected = &[
        "domain drv: store page fault at address 0x10, *",
        "domain drv: the address is outside the user half",
        "domain drv terminated: store page fault",
    ];
    let mut tests = vec![
        virtual_time(test("lending", "lending.toml", lending_death, lending)),
        test("demand_zero", "demand-zero.toml", &[], demand_zero),
        test("unbound", "unbound.toml", &[], unbound),
        test("out_of_frames", "out-of-frames.toml", &[], out_of_frames),
        test("fault_in_handler", "fault-in-handler.toml", nested, fault_in_handler),
        // ANCHOR: register
        test("driver_waits", "driver-waits.toml", &[], driver_waits),
        // ANCHOR_END: register
        test("driver_waits_contended", "driver-waits-contended.toml", &[], driver_waits_contended),
        test("recorder", "recorder.toml", &[], recorder),
        heracles("local"),
        heracles("compressed"),
        heracles("prefetching-compressed"),
        heracles("prefetching"),
        virtual_time(test(
            "heracles_revocation",
            "heracles-revocation.toml",
            &[],
            heracles_revocation,
        )),
        virtual_time(test("revocation", "revocation.toml", &[], revocation)),
        virtual_time(test(
            "heracles_disk_errors",
            "heracles-disk-errors.toml",
            &[],
            heracles_disk_errors,
        )),
        virtual_time(test(
            "revocation_ignored",
            "revocation-ignored.toml",
            forced,
            revocation_ignored,
        )),
        virtual_time(test("kernel_work", "kernel-work.toml", &[], kernel_work)),
        virtual_time(test("kernel_objects", "kernel-objects.toml", &[], kernel_objects)),
        virtual_time(test(
            "revocation_short_period",
            "revocation-short-period.toml",
            &[],
            revocation_short_period,
        )),
        virtual_time(test(
            "revocation_long_period",
            "revocation-long-period.toml",
            forced,
            revocation_long_period,
        )),
    ];
    if arch == Arch::X86_64 {
        tests.push(virtual_time(test(
            "heracles_disk_errors_ahci",
            "heracles-disk-errors-ahci.toml",
            &[],
            heracles_disk_errors,
        )));
    }
    tests
}
