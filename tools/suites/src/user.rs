//! The QEMU suite of user manifests (both architectures): every `tests/manifests/user/*.toml`,
//! as `cargo xtask new-driver` makes them, boots once as `qemu::ARCH::user::STEM` (`STEM` the
//! file's name without `.toml`), so that a driver of one's own gets a QEMU test without editing
//! xtask. The manifest carries its check: a line `# expect: TEXT` in its leading comment. The
//! test passes when the kernel exits 0, no domain fails (exits non-zero or is terminated) unless
//! its entry says `expect_failure = true`, the kernel logs no `ERROR` or `WARN` line, and a log
//! line contains `TEXT`. A manifest that names one machine (`# machine: ...`) is booted on that
//! one only. With no user manifests the suite has no tests.

use std::path::{Path, PathBuf};

use crate::harness::{QemuTest, expect_ending, expect_line};
use qemu_run::qemu::{Boot, Ending};
use qemu_run::run::verdict;
use source_tree::new_driver::USER_MANIFESTS;
use system_image::system::{self, Spoil};
use tool_base::Arch;
use tool_base::util;

/// The text of the `# expect: TEXT` line in the leading comment of `manifest`.
pub(super) fn expect_of(manifest: &str) -> Option<&str> {
    manifest
        .lines()
        .take_while(|l| l.trim().is_empty() || l.starts_with('#'))
        .find_map(|l| l.strip_prefix("# expect:"))
        .map(str::trim)
        .filter(|t| !t.is_empty())
}

/// The user manifests under `root`, sorted.
fn user_manifests(root: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(root.join(USER_MANIFESTS))
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "toml"))
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

pub(super) fn user_tests(p: &str, arch: Arch) -> Vec<QemuTest> {
    let root = util::root();
    let mut tests = Vec::new();
    for path in user_manifests(&root) {
        let Some(stem) = path.file_stem().map(|s| s.to_string_lossy().into_owned()) else {
            continue;
        };
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        if system::manifest_arch(&text).is_some_and(|a| a != arch) {
            continue;
        }
        let rel = format!("{USER_MANIFESTS}/{stem}.toml");
        let expect = expect_of(&text).map(str::to_string);
        let manifest_path = path.clone();
        tests.push(QemuTest {
            name: format!("{p}user::{stem}"),
            boot: Boot::new(arch),
            system: Some((rel.clone(), Spoil::Nothing)),
            expected: &[],
            check: Box::new(move |out| {
                let Some(expect) = &expect else {
                    return Err(format!(
                        "{rel} has no `# expect: TEXT` line in its leading comment"
                    ));
                };
                expect_ending(out, Ending::Kernel(0))?;
                let manifest = system::load_manifest(&manifest_path, arch).ok();
                let failed = verdict::unexpected_failures(&out.log, manifest.as_ref());
                if !failed.is_empty() {
                    return Err(format!("domains failed: {}", failed.join(", ")));
                }
                expect_line(out, expect)
            }),
        });
    }
    tests
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expect_line_comes_from_the_leading_comment() {
        let m = "# expect: demo: ok pages=8\n# more\n[system]\nmemory = \"64M\"\n";
        assert_eq!(expect_of(m), Some("demo: ok pages=8"));
        assert_eq!(expect_of("# a comment\n\n# expect:  x \n[system]\n"), Some("x"));
        // Not after the first key, not empty, not without the comment.
        assert_eq!(expect_of("[system]\n# expect: late\n"), None);
        assert_eq!(expect_of("# expect:\n[system]\n"), None);
        assert_eq!(expect_of("# a manifest\n[system]\n"), None);
    }

    #[test]
    fn no_user_manifests_no_tests() {
        let dir = std::env::temp_dir().join(format!("tessera-user-suite-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        assert!(user_manifests(&dir).is_empty());
        std::fs::create_dir_all(dir.join(USER_MANIFESTS)).unwrap();
        std::fs::write(dir.join(USER_MANIFESTS).join("b.toml"), "").unwrap();
        std::fs::write(dir.join(USER_MANIFESTS).join("a.toml"), "").unwrap();
        std::fs::write(dir.join(USER_MANIFESTS).join("notes.md"), "").unwrap();
        let found: Vec<_> =
            user_manifests(&dir).iter().map(|p| p.file_name().unwrap().to_owned()).collect();
        assert_eq!(found, ["a.toml", "b.toml"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
