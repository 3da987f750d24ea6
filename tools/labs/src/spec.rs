//! `labs/NAME/lab.toml`: a lab's title, files and graded tests, read with serde and checked
//! (points add to 100, `run` filters name host or QEMU tests, the files exist, student and
//! graded files are disjoint, every student file holds the lab's markers). A bad file is
//! reported as a bad manifest is: `FILE:LINE: KEY: REASON`.

use std::collections::HashSet;
use std::path::Path;

use manifest::ManifestError;
use serde::Deserialize;
use toml::Spanned;

use crate::markers;

/// The points of a lab's tests add up to this.
pub const TOTAL_POINTS: u32 = 100;

/// A lab, as its `lab.toml` says, checked against the tree it lives in.
#[derive(Clone, Debug)]
pub struct Lab {
    /// The lab's name: its directory under `labs/` and the `NAME` of its `LAB(NAME)` markers.
    pub name: String,
    /// One line: what the lab is.
    pub title: String,
    /// A sentence: what the student does.
    pub summary: String,
    /// The lab's chapter, relative to `docs/`.
    pub chapter: String,
    /// Estimated hours for a student (`"3-5"`).
    pub hours: String,
    /// The files the student writes (relative to the tree's root); only these are taken from
    /// a submission.
    pub student_files: Vec<String>,
    /// The graded tests' files, restored from the pristine copy before grading.
    pub graded_files: Vec<String>,
    /// The graded tests.
    pub tests: Vec<Test>,
}

/// One graded test.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Test {
    /// What it checks, in words.
    pub name: String,
    /// The `cargo xtask test` name of the one test it runs.
    pub run: Run,
    /// Its points.
    pub points: u32,
    /// How long it may take, building included, in seconds.
    pub timeout_s: u64,
    /// What to look at when it fails.
    pub hint: String,
}

/// Which test a graded test runs.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Run {
    /// `host::PACKAGE::TEST`: the libtest test `TEST` of `cargo test -p PACKAGE`.
    Host {
        /// The package.
        package: String,
        /// The libtest name (`module::test`).
        test: String,
    },
    /// `qemu::ARCH::NAME`: the QEMU test `NAME` of `cargo xtask test` (on the architecture
    /// the grade is asked for; labs are written for riscv64).
    Qemu {
        /// The test's name after its architecture.
        name: String,
    },
}

impl Run {
    /// Parses a `run` filter.
    pub fn parse(run: &str) -> Result<Run, String> {
        if let Some(rest) = run.strip_prefix("host::") {
            let (package, test) = rest.split_once("::").ok_or_else(|| {
                format!("`{run}` names no test: want `host::PACKAGE::path::to::test`")
            })?;
            let word =
                |s: &str| !s.is_empty() && s.chars().all(|c| c.is_alphanumeric() || c == '_');
            if !word(package) || !test.split("::").all(word) {
                return Err(format!("`{run}` is not `host::PACKAGE::path::to::test`"));
            }
            return Ok(Run::Host { package: package.into(), test: test.into() });
        }
        if let Some(rest) = run.strip_prefix("qemu::") {
            let (arch, name) = rest.split_once("::").unwrap_or((rest, ""));
            if !["riscv64", "x86_64"].contains(&arch) || name.is_empty() {
                return Err(format!("`{run}` is not `qemu::riscv64::NAME` (or `qemu::x86_64::`)"));
            }
            return Ok(Run::Qemu { name: name.into() });
        }
        Err(format!(
            "`{run}` is neither a host test (`host::PACKAGE::test`) nor a QEMU test \
             (`qemu::riscv64::NAME`)"
        ))
    }

    /// The `cargo xtask test` name of the test on `arch` (`riscv64`, `x86_64`).
    pub fn full_name(&self, arch: &str) -> String {
        match self {
            Run::Host { package, test } => format!("host::{package}::{test}"),
            Run::Qemu { name } => format!("qemu::{arch}::{name}"),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLab {
    title: Spanned<String>,
    summary: Spanned<String>,
    chapter: Spanned<String>,
    hours: Spanned<String>,
    student_files: Spanned<Vec<Spanned<String>>>,
    graded_files: Spanned<Vec<Spanned<String>>>,
    #[serde(default, rename = "test")]
    tests: Vec<Spanned<RawTest>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTest {
    name: Spanned<String>,
    run: Spanned<String>,
    points: Spanned<u32>,
    timeout_s: Spanned<u64>,
    hint: Spanned<String>,
}

/// Whether `name` may name a lab: `[a-z0-9_]+`.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// Reads and checks lab `name` of the tree at `root` (`root/labs/NAME/lab.toml`).
pub fn load(root: &Path, name: &str) -> Result<Lab, ManifestError> {
    let rel = format!("labs/{name}/lab.toml");
    let text = std::fs::read_to_string(root.join(&rel)).map_err(|e| ManifestError {
        file: rel.clone(),
        line: None,
        key: None,
        reason: format!("cannot read it: {e}"),
    })?;
    parse(root, name, &rel, &text)
}

/// Parses and checks the `lab.toml` `text` of lab `name` (named `file` in errors) against the
/// tree at `root`; the first problem found.
pub fn parse(root: &Path, name: &str, file: &str, text: &str) -> Result<Lab, ManifestError> {
    let at = |span: std::ops::Range<usize>, key: String, reason: String| {
        ManifestError::at_offset(file, text, Some(span.start), Some(key), reason)
    };
    if !valid_name(name) {
        return Err(ManifestError::at_offset(
            file,
            text,
            None,
            None,
            format!(
                "the lab's name `{name}` (its directory) must be lowercase letters, digits and `_`"
            ),
        ));
    }
    let raw: RawLab = toml::from_str(text).map_err(|e| ManifestError::from_toml(file, text, &e))?;
    for (key, value) in [
        ("title", &raw.title),
        ("summary", &raw.summary),
        ("hours", &raw.hours),
        ("chapter", &raw.chapter),
    ] {
        if value.get_ref().trim().is_empty() {
            return Err(at(value.span(), key.into(), "must not be empty".into()));
        }
    }
    if !root.join("docs").join(raw.chapter.get_ref()).is_file() {
        return Err(at(
            raw.chapter.span(),
            "chapter".into(),
            format!("no chapter docs/{} (the path is relative to docs/)", raw.chapter.get_ref()),
        ));
    }
    let files =
        |key: &str, list: &Spanned<Vec<Spanned<String>>>| -> Result<Vec<String>, ManifestError> {
            if list.get_ref().is_empty() {
                return Err(at(list.span(), key.into(), "must name at least one file".into()));
            }
            let mut seen = HashSet::new();
            for (i, f) in list.get_ref().iter().enumerate() {
                let path = f.get_ref();
                let bad = path.is_empty()
                    || Path::new(path).is_absolute()
                    || path.split('/').any(|p| p == ".." || p == "." || p.is_empty());
                if bad {
                    let why = format!(
                        "`{path}` must be a path relative to the tree's root, without `.` or `..`"
                    );
                    return Err(at(f.span(), format!("{key}[{i}]"), why));
                }
                if !root.join(path).is_file() {
                    return Err(at(f.span(), format!("{key}[{i}]"), format!("no file `{path}`")));
                }
                if !seen.insert(path.clone()) {
                    return Err(at(
                        f.span(),
                        format!("{key}[{i}]"),
                        format!("`{path}` is listed twice"),
                    ));
                }
            }
            Ok(list.get_ref().iter().map(|f| f.get_ref().clone()).collect())
        };
    let student_files = files("student_files", &raw.student_files)?;
    let graded_files = files("graded_files", &raw.graded_files)?;
    for (i, f) in raw.graded_files.get_ref().iter().enumerate() {
        if student_files.contains(f.get_ref()) {
            let why = format!(
                "`{}` is also a student file: a graded file is restored before grading, so the \
                 student's work in it would be lost",
                f.get_ref()
            );
            return Err(at(f.span(), format!("graded_files[{i}]"), why));
        }
    }
    for (i, f) in raw.student_files.get_ref().iter().enumerate() {
        let body = std::fs::read_to_string(root.join(f.get_ref())).map_err(|e| {
            at(
                f.span(),
                format!("student_files[{i}]"),
                format!("cannot read `{}`: {e}", f.get_ref()),
            )
        })?;
        match markers::regions(name, &body) {
            Ok(0) => {
                let why = format!(
                    "`{}` holds no `LAB({name}) BEGIN` ... `LAB({name}) END` region",
                    f.get_ref()
                );
                return Err(at(f.span(), format!("student_files[{i}]"), why));
            }
            Ok(_) => {}
            Err(e) => {
                return Err(ManifestError {
                    file: f.get_ref().clone(),
                    line: Some(e.line),
                    key: None,
                    reason: format!("{} (a student file of lab `{name}`, {file})", e.reason),
                });
            }
        }
    }

    if raw.tests.is_empty() {
        return Err(ManifestError::at_offset(
            file,
            text,
            None,
            Some("test".into()),
            "a lab needs at least one [[test]]".into(),
        ));
    }
    let mut tests = Vec::new();
    let mut names = HashSet::new();
    let mut runs = HashSet::new();
    for (i, t) in raw.tests.iter().enumerate() {
        let t = t.get_ref();
        let key = |k: &str| format!("test[{i}].{k}");
        for (k, v) in [("name", &t.name), ("hint", &t.hint)] {
            if v.get_ref().trim().is_empty() {
                return Err(at(v.span(), key(k), "must not be empty".into()));
            }
        }
        if !names.insert(t.name.get_ref().clone()) {
            return Err(at(t.name.span(), key("name"), "another test has this name".into()));
        }
        let run = Run::parse(t.run.get_ref()).map_err(|why| at(t.run.span(), key("run"), why))?;
        if !runs.insert(run.clone()) {
            return Err(at(t.run.span(), key("run"), "another test runs this test".into()));
        }
        if *t.points.get_ref() == 0 {
            return Err(at(t.points.span(), key("points"), "must be at least 1".into()));
        }
        if *t.timeout_s.get_ref() == 0 {
            return Err(at(t.timeout_s.span(), key("timeout_s"), "must be at least 1".into()));
        }
        tests.push(Test {
            name: t.name.get_ref().clone(),
            run,
            points: *t.points.get_ref(),
            timeout_s: *t.timeout_s.get_ref(),
            hint: t.hint.get_ref().trim().to_string(),
        });
    }
    let total: u32 = tests.iter().map(|t| t.points).sum();
    if total != TOTAL_POINTS {
        let first = raw.tests[0].get_ref().points.span();
        let why = format!("the tests' points add up to {total}, not {TOTAL_POINTS}");
        return Err(at(first, "test[0].points".into(), why));
    }
    Ok(Lab {
        name: name.into(),
        title: raw.title.into_inner(),
        summary: raw.summary.into_inner(),
        chapter: raw.chapter.into_inner(),
        hours: raw.hours.into_inner(),
        student_files,
        graded_files,
        tests,
    })
}

/// The names of the labs of the tree at `root` (the directories of `labs/` with a
/// `lab.toml`), sorted.
pub fn names(root: &Path) -> std::io::Result<Vec<String>> {
    let dir = root.join("labs");
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let mut names: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("lab.toml").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Scratch;

    const GOOD: &str = r#"title = "A lab"
summary = "Do a thing."
chapter = "labs/demo.md"
hours = "1-2"
student_files = ["src/work.rs"]
graded_files = ["tests/graded.rs"]

[[test]]
name = "the first"
run = "host::demo::tests::first"
points = 60
timeout_s = 100
hint = "Look at the first thing."

[[test]]
name = "the boot"
run = "qemu::riscv64::lab_demo_boot"
points = 40
timeout_s = 300
hint = "Look at the second thing."
"#;

    fn tree() -> Scratch {
        let s = Scratch::new("spec");
        s.write("docs/labs/demo.md", "# Demo\n");
        s.write("src/work.rs", "fn f() {\n    // LAB(demo) BEGIN\n    1\n    // LAB(demo) HANDOUT\n    // todo!()\n    // LAB(demo) END\n}\n");
        s.write("tests/graded.rs", "#[test] fn first() {}\n");
        s
    }

    fn error(text: &str) -> String {
        let s = tree();
        parse(&s.path, "demo", "labs/demo/lab.toml", text).unwrap_err().to_string()
    }

    #[test]
    fn a_good_lab_parses() {
        let s = tree();
        let lab = parse(&s.path, "demo", "labs/demo/lab.toml", GOOD).unwrap();
        assert_eq!(lab.student_files, ["src/work.rs"]);
        assert_eq!(lab.tests.len(), 2);
        assert_eq!(
            lab.tests[0].run,
            Run::Host { package: "demo".into(), test: "tests::first".into() }
        );
        assert_eq!(lab.tests[1].run.full_name("x86_64"), "qemu::x86_64::lab_demo_boot");
    }

    #[test]
    fn errors_name_the_file_line_key_and_reason() {
        let points = GOOD.replace("points = 40", "points = 30");
        assert_eq!(
            error(&points),
            "labs/demo/lab.toml:11: test[0].points: the tests' points add up to 90, not 100"
        );
        let unknown = GOOD.replace("hours = \"1-2\"", "hours = \"1-2\"\nminutes = 3");
        let e = error(&unknown);
        assert!(e.starts_with("labs/demo/lab.toml:5: minutes: unknown field `minutes`"), "{e}");
        let run = GOOD.replace("qemu::riscv64::lab_demo_boot", "sched::demo");
        let e = error(&run);
        assert!(
            e.starts_with("labs/demo/lab.toml:17: test[1].run: `sched::demo` is neither"),
            "{e}"
        );
        let arch = GOOD.replace("qemu::riscv64::", "qemu::arm::");
        assert!(error(&arch).contains("test[1].run: `qemu::arm::lab_demo_boot` is not"));
        let missing = GOOD.replace("tests/graded.rs", "tests/nothing.rs");
        assert_eq!(
            error(&missing),
            "labs/demo/lab.toml:6: graded_files[0]: no file `tests/nothing.rs`"
        );
        let both = GOOD.replace("tests/graded.rs", "src/work.rs");
        assert!(error(&both).starts_with(
            "labs/demo/lab.toml:6: graded_files[0]: `src/work.rs` is also a student file"
        ));
        let outside = GOOD.replace("src/work.rs", "../work.rs");
        assert!(error(&outside).contains("student_files[0]: `../work.rs` must be a path relative"));
        let no_hint = GOOD.replace("hint = \"Look at the first thing.\"", "hint = \" \"");
        assert_eq!(error(&no_hint), "labs/demo/lab.toml:13: test[0].hint: must not be empty");
        let twice = GOOD.replace("the boot", "the first");
        assert_eq!(
            error(&twice),
            "labs/demo/lab.toml:16: test[1].name: another test has this name"
        );
        let chapter = GOOD.replace("labs/demo.md", "labs/none.md");
        assert!(
            error(&chapter)
                .starts_with("labs/demo/lab.toml:3: chapter: no chapter docs/labs/none.md")
        );
        let no_tests = GOOD.split("[[test]]").next().unwrap().to_string();
        assert_eq!(error(&no_tests), "labs/demo/lab.toml: test: a lab needs at least one [[test]]");
        let no_title = GOOD.replace("title = \"A lab\"\n", "");
        assert!(error(&no_title).contains("missing field `title`"), "{}", error(&no_title));
        let syntax = GOOD.replace("points = 60", "points = ");
        assert!(error(&syntax).starts_with("labs/demo/lab.toml:11:"), "{}", error(&syntax));
    }

    #[test]
    fn student_files_must_hold_balanced_markers() {
        let s = tree();
        s.write("src/work.rs", "fn f() {}\n");
        let e = parse(&s.path, "demo", "labs/demo/lab.toml", GOOD).unwrap_err().to_string();
        assert!(e.contains("student_files[0]: `src/work.rs` holds no `LAB(demo) BEGIN`"), "{e}");
        s.write("src/work.rs", "// LAB(demo) BEGIN\n// LAB(demo) BEGIN\n// LAB(demo) END\n");
        let e = parse(&s.path, "demo", "labs/demo/lab.toml", GOOD).unwrap_err().to_string();
        assert!(e.starts_with("src/work.rs:2: `LAB(demo) BEGIN` inside the region"), "{e}");
    }

    #[test]
    fn a_lab_name_is_lowercase() {
        assert!(valid_name("clock") && valid_name("cow_swap2"));
        assert!(!valid_name("Clock") && !valid_name("a-b") && !valid_name(""));
        let s = tree();
        let e = parse(&s.path, "Demo", "labs/Demo/lab.toml", GOOD).unwrap_err().to_string();
        assert!(e.contains("must be lowercase"), "{e}");
    }
}
