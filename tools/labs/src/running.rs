//! The command a graded test runs now: its process group, so that a Ctrl-C (the journal's
//! handler) can stop it with everything it started, and a timeout (the runner) can kill it.

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// The process group of the command running now (0: none), for [`stop_running`].
static RUNNING: AtomicU32 = AtomicU32::new(0);

/// Records that the command leading process group `pgid` runs now.
pub(crate) fn started(pgid: u32) {
    RUNNING.store(pgid, Ordering::SeqCst);
}

/// Records that no command runs now.
pub(crate) fn ended() {
    RUNNING.store(0, Ordering::SeqCst);
}

/// Kills the process group `pgid`.
pub(crate) fn kill_group(pgid: u32) {
    let _ = Command::new("kill").args(["-KILL", "--", &format!("-{pgid}")]).status();
}

/// Stops the command a test runs now, if any, with everything it started (on Ctrl-C).
pub fn stop_running() {
    let pgid = RUNNING.swap(0, Ordering::SeqCst);
    if pgid != 0 {
        kill_group(pgid);
    }
}
