//! Changing files of the tree in place and putting them back: a grade with `--submission`
//! and `check` overlay a lab's student files, then restore them byte for byte, also after a
//! panic (the [`Overlay`] restores when dropped), Ctrl-C (a handler restores and exits 130) or
//! a kill: the originals and a journal naming them are kept under `target/labs/journal/`
//! before anything changes, and [`recover`] (run at the start of every `cargo xtask lab`
//! command and of `cargo xtask test`) restores a journal its owner left behind.
//!
//! A restored file gets the time of the restore as its modification time, not its original
//! one: cargo decides what to rebuild by modification times, and a file given back its old
//! time would look unchanged since the build of the overlaid content. A file the overlay did
//! not change (the same bytes) is not written at all, so it costs no rebuild.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, Once};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

/// The environment variable that names the process whose overlay is in place, for the
/// commands it runs (`cargo test`, `cargo xtask test`): they must not restore it.
pub const OWNER_ENV: &str = "TESSERA_LAB_OVERLAY";

/// The journal's directory in the tree at `root`.
pub fn dir(root: &Path) -> PathBuf {
    root.join("target/labs/journal")
}

#[derive(Serialize, Deserialize)]
struct Journal {
    /// The process that made the overlay.
    pid: u32,
    /// What it was for.
    what: String,
    entries: Vec<Entry>,
}

#[derive(Serialize, Deserialize)]
struct Entry {
    /// Relative to the tree's root.
    path: String,
    /// The original's copy in the journal's directory; `None` if the file did not exist.
    backup: Option<String>,
}

/// Files of the tree changed in place; dropped, they are put back.
pub struct Overlay {
    root: PathBuf,
    journal: Journal,
    done: bool,
}

/// The overlay whose journal the Ctrl-C handler restores.
static ACTIVE: Mutex<Option<PathBuf>> = Mutex::new(None);
static HANDLER: Once = Once::new();

impl Overlay {
    /// Overlays `files` (path relative to `root`, new content) on the tree at `root` for
    /// `what`, after keeping the originals; a file whose content would not change is left
    /// alone.
    pub fn apply(root: &Path, what: &str, files: &[(String, Vec<u8>)]) -> Result<Overlay> {
        recover(root)?;
        let dir = dir(root);
        std::fs::create_dir_all(&dir).with_context(|| format!("cannot make {}", dir.display()))?;
        let mut journal =
            Journal { pid: std::process::id(), what: what.into(), entries: Vec::new() };
        let mut changes = Vec::new();
        for (i, (path, content)) in files.iter().enumerate() {
            let at = root.join(path);
            let old = match std::fs::read(&at) {
                Ok(old) => Some(old),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => bail!("cannot read {}: {e}", at.display()),
            };
            if old.as_deref() == Some(content.as_slice()) {
                continue;
            }
            let backup = match &old {
                Some(bytes) => {
                    let name = format!("{i}.orig");
                    std::fs::write(dir.join(&name), bytes)
                        .with_context(|| format!("cannot keep a copy of {path}"))?;
                    Some(name)
                }
                None => None,
            };
            journal.entries.push(Entry { path: path.clone(), backup });
            changes.push((at, content));
        }
        // The journal is complete before the first file changes.
        let text = serde_json::to_string_pretty(&journal)?;
        let tmp = dir.join("journal.json.tmp");
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, dir.join("journal.json"))?;
        *ACTIVE.lock().unwrap_or_else(|e| e.into_inner()) = Some(root.to_path_buf());
        on_interrupt();
        let overlay = Overlay { root: root.to_path_buf(), journal, done: false };
        for (at, content) in changes {
            if let Some(parent) = at.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&at, content)
                .with_context(|| format!("cannot write {}", at.display()))?;
        }
        Ok(overlay)
    }

    /// How many files the overlay changed.
    pub fn changed(&self) -> usize {
        self.journal.entries.len()
    }

    /// Puts every file back and removes the journal.
    pub fn restore(mut self) -> Result<()> {
        self.done = true;
        *ACTIVE.lock().unwrap_or_else(|e| e.into_inner()) = None;
        restore_journal(&self.root).map(|_| ())
    }
}

impl Drop for Overlay {
    fn drop(&mut self) {
        if !self.done {
            *ACTIVE.lock().unwrap_or_else(|e| e.into_inner()) = None;
            if let Err(e) = restore_journal(&self.root) {
                eprintln!("lab: restoring the files of `{}` failed: {e:#}", self.journal.what);
            }
        }
    }
}

/// Installs the Ctrl-C handler of the grader (once): it stops the command a test runs (which
/// leads its own process group, out of reach of the terminal's signal), restores the overlay
/// in place, if any, and exits with 130. Another handler may be installed already (an
/// interactive run in the same process): then a Ctrl-C leaves the journal for the next command
/// to restore.
pub fn on_interrupt() {
    HANDLER.call_once(|| {
        let _ = ctrlc::set_handler(|| {
            crate::running::stop_running();
            if let Some(root) = ACTIVE.lock().unwrap_or_else(|e| e.into_inner()).take() {
                match restore_journal(&root) {
                    Ok(n) => eprintln!("\nlab: interrupted; {n} file(s) restored"),
                    Err(e) => eprintln!("\nlab: interrupted; restoring failed: {e:#}"),
                }
            }
            std::process::exit(130);
        });
    });
}

/// Whether process `pid` is alive (Linux: it has a `/proc` entry).
fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Restores the overlay a journal in the tree at `root` records, unless its owner is still at
/// work (a command run by the grader, or a grade in another terminal); returns how many files
/// it restored.
pub fn recover(root: &Path) -> Result<usize> {
    let path = dir(root).join("journal.json");
    let Ok(text) = std::fs::read_to_string(&path) else { return Ok(0) };
    let journal: Journal = serde_json::from_str(&text)
        .with_context(|| format!("{}: not a journal; remove it by hand", path.display()))?;
    let ours = std::env::var(OWNER_ENV).ok().and_then(|p| p.parse::<u32>().ok());
    if ours == Some(journal.pid) || (journal.pid != std::process::id() && alive(journal.pid)) {
        if ours == Some(journal.pid) {
            return Ok(0);
        }
        bail!(
            "process {} is grading in this tree ({}); wait for it, or stop it and run the command again",
            journal.pid,
            journal.what
        );
    }
    let n = restore_journal(root)?;
    if n > 0 {
        eprintln!("lab: restored {n} file(s) that `{}` had changed and left behind", journal.what);
    }
    Ok(n)
}

/// Restores every file of the journal in the tree at `root` and removes it.
fn restore_journal(root: &Path) -> Result<usize> {
    let dir = dir(root);
    let path = dir.join("journal.json");
    let Ok(text) = std::fs::read_to_string(&path) else { return Ok(0) };
    let journal: Journal = serde_json::from_str(&text)?;
    for e in &journal.entries {
        let at = root.join(&e.path);
        match &e.backup {
            Some(name) => {
                let bytes = std::fs::read(dir.join(name)).with_context(|| {
                    format!("the copy of {} is missing from {}", e.path, dir.display())
                })?;
                std::fs::write(&at, bytes)
                    .with_context(|| format!("cannot restore {}", at.display()))?;
            }
            None => {
                let _ = std::fs::remove_file(&at);
            }
        }
    }
    std::fs::remove_dir_all(&dir)?;
    Ok(journal.entries.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Scratch;

    #[test]
    fn an_overlay_is_restored_byte_for_byte_and_same_files_are_not_touched() {
        let s = Scratch::new("overlay");
        s.write("a.rs", "fn a() {}\r\n");
        s.write("same.rs", "same\n");
        let before = std::fs::metadata(s.path.join("same.rs")).unwrap().modified().unwrap();
        let o = Overlay::apply(
            &s.path,
            "test",
            &[
                ("a.rs".into(), b"changed".to_vec()),
                ("same.rs".into(), b"same\n".to_vec()),
                ("new/b.rs".into(), b"new".to_vec()),
            ],
        )
        .unwrap();
        assert_eq!(o.changed(), 2);
        assert_eq!(s.read("a.rs"), "changed");
        assert_eq!(s.read("new/b.rs"), "new");
        o.restore().unwrap();
        assert_eq!(s.read("a.rs"), "fn a() {}\r\n");
        assert!(!s.path.join("new/b.rs").exists());
        assert!(!dir(&s.path).exists());
        let after = std::fs::metadata(s.path.join("same.rs")).unwrap().modified().unwrap();
        assert_eq!(before, after);
    }

    #[test]
    fn a_panic_restores_and_a_journal_left_behind_is_recovered() {
        let s = Scratch::new("journal");
        s.write("a.rs", "original");
        let root = s.path.clone();
        let r = std::panic::catch_unwind(|| {
            let _o = Overlay::apply(&root, "test", &[("a.rs".into(), b"x".to_vec())]).unwrap();
            panic!("deliberate");
        });
        assert!(r.is_err());
        assert_eq!(s.read("a.rs"), "original");
        // A journal whose owner died (here: a pid that is no process) is restored by the next
        // command.
        let o = Overlay::apply(&s.path, "test", &[("a.rs".into(), b"x".to_vec())]).unwrap();
        std::mem::forget(o);
        let j = dir(&s.path).join("journal.json");
        let text = std::fs::read_to_string(&j).unwrap();
        let dead = text.replace(&format!("\"pid\": {}", std::process::id()), "\"pid\": 4000000000");
        assert_ne!(text, dead);
        std::fs::write(&j, dead).unwrap();
        assert_eq!(s.read("a.rs"), "x");
        assert_eq!(recover(&s.path).unwrap(), 1);
        assert_eq!(s.read("a.rs"), "original");
        assert_eq!(recover(&s.path).unwrap(), 0);
    }
}
