//! `cargo xtask lab`: Tessera's course labs and their grader (`docs/labs/index.md`).
//!
//! A lab is `labs/NAME/lab.toml` ([`spec`]): its chapter, the files the student writes, the
//! graded tests' files, and its tests with points, timeouts and hints. The student files hold
//! the reference solution between `LAB(NAME)` markers ([`markers`]), so the repository builds
//! and runs it as Tessera's own code; the hand-out cuts it out.
//!
//! - `list`: each lab with its hours, title and points.
//! - `handout NAME [--out DIR]`: the student's tree: every tracked file (`git ls-files`), the
//!   lab's regions cut out, a pristine copy of the graded files under `.lab/pristine/`, and a
//!   git repository with one commit.
//! - `grade NAME [--submission DIR] [--json FILE] [--arch ARCH]`: the graded files restored
//!   from `.lab/pristine/` (in a hand-out), the student files taken from the submission (in
//!   place, put back afterwards: [`journal`]), the tests run ([`runner`]), a line per test,
//!   each failure's hint and first lines, `Score: N/100`, and Gradescope's and GitHub
//!   Classroom's JSON ([`report`]).
//! - `check [NAME]`: the reference scores 100, and the hand-out, applied in place, builds and
//!   scores less with every failing test explained; `cargo xtask test` runs it as
//!   `host::labs::NAME`.

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

pub mod journal;
pub mod markers;
pub mod report;
pub mod runner;
pub mod running;
pub mod spec;
#[cfg(test)]
mod testing;

use report::Grade;
use runner::{Runner, Verdict};
use spec::Lab;

/// Where a hand-out keeps the graded files as they were handed out, relative to its root.
pub const PRISTINE: &str = ".lab/pristine";

/// The names `cargo xtask test` gives the labs' checks: `host::labs::NAME`.
pub const CHECK_PREFIX: &str = "host::labs::";

/// Restores what an interrupted grade or check left overlaid in the tree at `root` (see
/// [`journal`]); `cargo xtask test` and every `lab` command start with it.
pub fn recover(root: &Path) -> Result<()> {
    journal::recover(root).map(|_| ())
}

fn load(root: &Path, name: &str) -> Result<Lab> {
    let names = spec::names(root)?;
    if !names.iter().any(|n| n == name) {
        bail!("no lab `{name}` (labs/{name}/lab.toml); the labs are: {}", names.join(", "));
    }
    spec::load(root, name).map_err(|e| anyhow::anyhow!("{e}"))
}

/// `lab list`: each lab of the tree at `root`, its hours, title and tests.
pub fn list(root: &Path) -> Result<u8> {
    recover(root)?;
    let mut status = 0;
    for name in spec::names(root)? {
        match spec::load(root, &name) {
            Ok(lab) => {
                let points: u32 = lab.tests.iter().map(|t| t.points).sum();
                println!(
                    "{name:<10} {:>6} h  {}  ({} tests, {points} points; docs/{})",
                    lab.hours,
                    lab.title,
                    lab.tests.len(),
                    lab.chapter
                );
            }
            Err(e) => {
                println!("{name:<10} error: {e}");
                status = 1;
            }
        }
    }
    Ok(status)
}

/// The files `git ls-files` lists in the tree at `root`.
fn tracked_files(root: &Path) -> Result<Vec<String>> {
    let out = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(root)
        .output()
        .context("a hand-out is made of the tracked files: cannot run `git ls-files`")?;
    if !out.status.success() {
        bail!("git ls-files failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .split('\0')
        .filter(|f| !f.is_empty())
        .map(String::from)
        .collect())
}

/// Writes lab `lab`'s hand-out of the tree at `root` into the empty or missing directory
/// `out`: the `files` (relative paths), student files cut at their markers, and the graded
/// files' pristine copy.
fn write_handout(root: &Path, lab: &Lab, files: &[String], out: &Path) -> Result<()> {
    for f in files {
        let from = root.join(f);
        let to = out.join(f);
        let Ok(meta) = std::fs::symlink_metadata(&from) else { continue }; // deleted, not committed
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)?;
        }
        if meta.file_type().is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&from)?, &to)?;
        } else if lab.student_files.contains(f) {
            let text = std::fs::read_to_string(&from)?;
            let cut =
                markers::handout(&lab.name, &text).map_err(|e| anyhow::anyhow!("{f}: {e}"))?;
            std::fs::write(&to, cut)?;
            std::fs::set_permissions(&to, meta.permissions())?;
        } else {
            std::fs::copy(&from, &to).with_context(|| format!("cannot copy {f}"))?;
        }
    }
    for f in &lab.graded_files {
        let to = out.join(PRISTINE).join(f);
        std::fs::create_dir_all(to.parent().expect("a file has a directory"))?;
        std::fs::copy(root.join(f), &to).with_context(|| format!("cannot copy {f}"))?;
    }
    Ok(())
}

/// `lab handout NAME [--out DIR]`: the student's tree for lab `name` (default
/// `target/labs/handout/NAME`, made afresh), with a git repository of one commit when git is
/// there.
pub fn handout(root: &Path, name: &str, out: Option<&Path>) -> Result<u8> {
    recover(root)?;
    let lab = load(root, name)?;
    let default = root.join("target/labs/handout").join(name);
    let out = out.map(Path::to_path_buf).unwrap_or(default.clone());
    if out == default {
        let _ = std::fs::remove_dir_all(&out);
    } else if out.exists() && std::fs::read_dir(&out)?.next().is_some() {
        bail!("{} exists and is not empty: name a new directory", out.display());
    }
    std::fs::create_dir_all(&out)?;
    let files = tracked_files(root)?;
    write_handout(root, &lab, &files, &out)?;
    let git = |args: &[&str]| {
        Command::new("git")
            .args(["-c", "user.name=Tessera labs", "-c", "user.email=labs@tessera.invalid"])
            .args(args)
            .current_dir(&out)
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    };
    let message = format!("Lab {name}: the hand-out ({})", lab.title);
    let committed =
        git(&["init", "-q"]) && git(&["add", "-A"]) && git(&["commit", "-q", "-m", &message]);
    println!("lab {name}: the hand-out is in {}", out.display());
    if committed {
        println!("  a git repository with one commit: `git diff` shows your work");
    }
    println!("  edit: {}", lab.student_files.join(", "));
    println!("  read: docs/{}", lab.chapter);
    println!("  grade: cargo xtask lab grade {name}");
    Ok(0)
}

/// The options of `lab grade`.
#[derive(Clone, Debug, Default)]
pub struct GradeOptions {
    /// A student's tree (or a directory holding the student files at their paths) whose
    /// student files are graded in this tree.
    pub submission: Option<PathBuf>,
    /// Where to write Gradescope's `results.json` (default
    /// `target/labs/NAME/results.json`); GitHub Classroom's result goes beside it.
    pub json: Option<PathBuf>,
    /// The architecture of the QEMU tests (`riscv64` when not given).
    pub arch: Option<String>,
}

/// Copies each graded file of `lab` back from the hand-out's pristine copy, if the tree at
/// `root` is a hand-out; returns how many it rewrote.
fn restore_graded(root: &Path, lab: &Lab) -> Result<usize> {
    let mut n = 0;
    for f in &lab.graded_files {
        let pristine = root.join(PRISTINE).join(f);
        let Ok(want) = std::fs::read(&pristine) else { continue };
        if std::fs::read(root.join(f)).ok().as_deref() != Some(want.as_slice()) {
            std::fs::write(root.join(f), want).with_context(|| format!("cannot restore {f}"))?;
            eprintln!("lab: {f} restored from {PRISTINE}/ (graded files are not yours to change)");
            n += 1;
        }
    }
    Ok(n)
}

/// Grades the tree at `root` as it is (its student files as they are) with `runner`.
fn grade_tree(root: &Path, lab: &Lab, runner: &mut dyn Runner, arch: &str) -> Grade {
    let tests: Vec<&spec::Test> = lab.tests.iter().collect();
    let outcomes = runner.run(root, &tests, arch);
    Grade::new(lab, outcomes, arch)
}

/// Grades lab `lab` in the tree at `root` with `runner`: graded files restored from the
/// pristine copy, the student files of `submission` overlaid for the run and put back.
pub fn grade_lab(
    root: &Path,
    lab: &Lab,
    submission: Option<&Path>,
    runner: &mut dyn Runner,
    arch: &str,
) -> Result<Grade> {
    restore_graded(root, lab)?;
    let Some(dir) = submission else { return Ok(grade_tree(root, lab, runner, arch)) };
    let mut files = Vec::new();
    for f in &lab.student_files {
        let bytes = std::fs::read(dir.join(f))
            .with_context(|| format!("the submission {} has no {f}", dir.display()))?;
        files.push((f.clone(), bytes));
    }
    let overlay =
        journal::Overlay::apply(root, &format!("lab grade {} --submission", lab.name), &files)?;
    let grade = grade_tree(root, lab, runner, arch);
    overlay.restore()?;
    Ok(grade)
}

/// `lab grade NAME ...`: grades, prints the result and writes the JSON; exits 0 when every
/// test passed, 1 otherwise.
pub fn grade(root: &Path, name: &str, options: &GradeOptions) -> Result<u8> {
    recover(root)?;
    let lab = load(root, name)?;
    let arch = options.arch.as_deref().unwrap_or("riscv64");
    eprintln!("lab {name}: running {} tests ({})", lab.tests.len(), lab.title);
    let grade = grade_lab(root, &lab, options.submission.as_deref(), &mut runner::Cargo, arch)?;
    print!("{}", grade.text());
    let json = options
        .json
        .clone()
        .unwrap_or_else(|| root.join("target/labs").join(name).join("results.json"));
    let classroom = json.with_file_name(match json.file_stem() {
        Some(stem) if json.file_name() != Some("results.json".as_ref()) => {
            format!("{}.classroom.json", stem.to_string_lossy())
        }
        _ => "classroom.json".into(),
    });
    if let Some(parent) = json.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(&json, serde_json::to_string_pretty(&grade.gradescope())?)?;
    std::fs::write(&classroom, serde_json::to_string_pretty(&grade.classroom())?)?;
    println!(
        "results: {} (Gradescope), {} (GitHub Classroom)",
        json.display(),
        classroom.display()
    );
    Ok(if grade.score() == spec::TOTAL_POINTS { 0 } else { 1 })
}

/// Checks lab `name` of the tree at `root` with `runner`: the reference scores 100, and the
/// hand-out (applied in place to the student files, put back afterwards) builds and scores
/// less, every failing test with its hint and some failure text. Returns what it saw.
pub fn check_lab(root: &Path, name: &str, runner: &mut dyn Runner) -> Result<String, String> {
    let lab = spec::load(root, name).map_err(|e| e.to_string())?;
    let arch = "riscv64";
    let reference = grade_lab(root, &lab, None, runner, arch).map_err(|e| format!("{e:#}"))?;
    if reference.score() != spec::TOTAL_POINTS {
        return Err(format!(
            "the reference solution scores {}/{}:\n{}",
            reference.score(),
            spec::TOTAL_POINTS,
            reference.text()
        ));
    }
    let mut files = Vec::new();
    for f in &lab.student_files {
        let text = std::fs::read_to_string(root.join(f)).map_err(|e| format!("{f}: {e}"))?;
        let cut = markers::handout(name, &text).map_err(|e| format!("{f}: {e}"))?;
        files.push((f.clone(), cut.into_bytes()));
    }
    let overlay = journal::Overlay::apply(root, &format!("lab check {name}"), &files)
        .map_err(|e| format!("{e:#}"))?;
    let handed = grade_tree(root, &lab, runner, arch);
    overlay.restore().map_err(|e| format!("restoring the student files: {e:#}"))?;
    let summary = format!(
        "reference {}/{}, hand-out {}/{}",
        reference.score(),
        spec::TOTAL_POINTS,
        handed.score(),
        spec::TOTAL_POINTS
    );
    if let Some(t) =
        handed.tests.iter().find(|t| matches!(t.outcome.verdict, Verdict::BuildFailed(_)))
    {
        return Err(format!(
            "the hand-out does not build ({}): a student must start from a tree that builds\n{}",
            t.name,
            handed.text()
        ));
    }
    if handed.score() == spec::TOTAL_POINTS {
        return Err(format!(
            "the hand-out scores {}/{} as the reference does: its tests do not see the solution \
             missing\n{}",
            handed.score(),
            spec::TOTAL_POINTS,
            handed.text()
        ));
    }
    if let Some(t) = handed.tests.iter().find(|t| !t.passed() && t.failure().trim().is_empty()) {
        return Err(format!(
            "the hand-out fails `{}` without a word of why: its failure must tell the student \
             what went wrong\n{}",
            t.name,
            handed.text()
        ));
    }
    Ok(summary)
}

/// `lab check [NAME]`: [`check_lab`] for lab `name`, or every lab; exits 1 if one failed.
pub fn check(root: &Path, name: Option<&str>) -> Result<u8> {
    recover(root)?;
    let names = match name {
        Some(n) => {
            load(root, n)?;
            vec![n.to_string()]
        }
        None => spec::names(root)?,
    };
    let mut failed = 0;
    for n in &names {
        eprintln!("lab {n}: grading the reference, then the hand-out");
        match check_lab(root, n, &mut runner::Cargo) {
            Ok(summary) => println!("lab {n}: ok ({summary})"),
            Err(why) => {
                failed += 1;
                println!("lab {n}: FAILED\n{why}");
            }
        }
    }
    Ok(if failed == 0 { 0 } else { 1 })
}

#[cfg(test)]
mod tests {
    use super::*;
    use runner::Outcome;
    use testing::Scratch;

    /// A runner that passes a test when the student file `src/work.rs` holds the word its
    /// test is named for, fails it otherwise (with `silent`, without a word), and fails every
    /// test as a build failure when the file holds `broken`.
    struct Words {
        silent: bool,
    }

    impl Runner for Words {
        fn run(&mut self, root: &Path, tests: &[&spec::Test], _arch: &str) -> Vec<Outcome> {
            let work = std::fs::read_to_string(root.join("src/work.rs")).unwrap();
            tests
                .iter()
                .map(|t| {
                    let spec::Run::Host { test, .. } = &t.run else { panic!() };
                    let verdict = if work.lines().any(|l| l.trim() == "broken") {
                        Verdict::BuildFailed("error: expected one of `;`".into())
                    } else if work.contains(test.as_str()) {
                        Verdict::Passed
                    } else if self.silent {
                        Verdict::Failed(String::new())
                    } else {
                        Verdict::Failed(format!("no `{test}` in src/work.rs"))
                    };
                    Outcome { verdict, seconds: 0.1 }
                })
                .collect()
        }
    }

    const LAB: &str = r#"title = "Words"
summary = "Write the words."
chapter = "labs/words.md"
hours = "1"
student_files = ["src/work.rs"]
graded_files = ["tests/graded.rs"]

[[test]]
name = "alpha"
run = "host::words::alpha"
points = 40
timeout_s = 10
hint = "Write alpha."

[[test]]
name = "beta"
run = "host::words::beta"
points = 60
timeout_s = 10
hint = "Write beta."
"#;

    fn tree(work: &str) -> Scratch {
        let s = Scratch::new("check");
        s.write("labs/words/lab.toml", LAB);
        s.write("docs/labs/words.md", "# Words\n");
        s.write("src/work.rs", work);
        s.write("tests/graded.rs", "graded\n");
        s
    }

    const SOLVED: &str =
        "// LAB(words) BEGIN\nalpha beta\n// LAB(words) HANDOUT\n// alpha\n// LAB(words) END\n";

    #[test]
    fn a_good_lab_passes_its_check_and_its_files_come_back() {
        let s = tree(SOLVED);
        let summary = check_lab(&s.path, "words", &mut Words { silent: false }).unwrap();
        assert_eq!(summary, "reference 100/100, hand-out 40/100");
        assert_eq!(s.read("src/work.rs"), SOLVED);
        assert!(!journal::dir(&s.path).exists());
    }

    #[test]
    fn the_check_fails_when_the_handout_passes() {
        // The hand-out region holds the solution itself.
        let s = tree(
            "// LAB(words) BEGIN\nalpha beta\n// LAB(words) HANDOUT\n// alpha beta\n// LAB(words) END\n",
        );
        let e = check_lab(&s.path, "words", &mut Words { silent: false }).unwrap_err();
        assert!(e.starts_with("the hand-out scores 100/100 as the reference does"), "{e}");
    }

    #[test]
    fn the_check_fails_when_the_reference_scores_below_100() {
        let s = tree(
            "// LAB(words) BEGIN\nalpha\n// LAB(words) HANDOUT\n// nothing\n// LAB(words) END\n",
        );
        let e = check_lab(&s.path, "words", &mut Words { silent: false }).unwrap_err();
        assert!(e.starts_with("the reference solution scores 40/100:"), "{e}");
        assert!(e.contains("FAIL   0/60  beta"), "{e}");
    }

    #[test]
    fn the_check_fails_when_the_handout_does_not_build_or_says_nothing() {
        let s = tree(
            "// LAB(words) BEGIN\nalpha beta\n// LAB(words) HANDOUT\n// broken\n// LAB(words) END\n",
        );
        let e = check_lab(&s.path, "words", &mut Words { silent: false }).unwrap_err();
        assert!(e.starts_with("the hand-out does not build (alpha)"), "{e}");
        assert!(e.contains("error: expected one of"), "{e}");
        let s = tree(SOLVED);
        let e = check_lab(&s.path, "words", &mut Words { silent: true }).unwrap_err();
        assert!(e.starts_with("the hand-out fails `beta` without a word of why"), "{e}");
        assert_eq!(s.read("src/work.rs"), SOLVED);
    }

    #[test]
    fn a_submission_is_graded_in_place_and_graded_files_come_from_the_pristine_copy() {
        let s = tree(SOLVED);
        let sub = Scratch::new("submission");
        sub.write("src/work.rs", "beta only");
        // A hand-out's pristine copy wins over a changed graded file.
        s.write(".lab/pristine/tests/graded.rs", "graded\n");
        s.write("tests/graded.rs", "weakened\n");
        let lab = spec::load(&s.path, "words").unwrap();
        let g = grade_lab(&s.path, &lab, Some(&sub.path), &mut Words { silent: false }, "riscv64")
            .unwrap();
        assert_eq!(g.score(), 60);
        assert_eq!(s.read("src/work.rs"), SOLVED);
        assert_eq!(s.read("tests/graded.rs"), "graded\n");
        // A submission without the student file is an error naming it.
        let empty = Scratch::new("empty");
        let e =
            grade_lab(&s.path, &lab, Some(&empty.path), &mut Words { silent: false }, "riscv64")
                .unwrap_err();
        assert!(format!("{e:#}").contains("has no src/work.rs"), "{e:#}");
    }

    #[test]
    fn a_handout_cuts_the_student_files_and_keeps_the_graded_ones() {
        let s = tree(SOLVED);
        let lab = spec::load(&s.path, "words").unwrap();
        let out = Scratch::new("handout");
        let files: Vec<String> =
            ["labs/words/lab.toml", "src/work.rs", "tests/graded.rs", "gone.rs"]
                .map(String::from)
                .into();
        write_handout(&s.path, &lab, &files, &out.path).unwrap();
        assert_eq!(out.read("src/work.rs"), "alpha\n");
        assert_eq!(out.read("tests/graded.rs"), "graded\n");
        assert_eq!(out.read(".lab/pristine/tests/graded.rs"), "graded\n");
        assert_eq!(out.read("labs/words/lab.toml"), LAB);
        assert!(!out.path.join("gone.rs").exists());
    }
}
