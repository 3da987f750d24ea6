//! Keeps the Rust code in the docs true: each block is included from a source file that is
//! built and tested, and checked against it.
//!
//! A doc marks an included block with a marker line, immediately followed by a fenced block:
//!
//! ````text
//! <!-- include: stretch_drivers/recorder/src/lib.rs:fault -->
//! ```rust
//! ...the anchored lines...
//! ```
//! ````
//!
//! The path is relative to the repository's root; after its last `:` comes the anchor. In the
//! source, an anchor is the lines between `// ANCHOR: NAME` and `// ANCHOR_END: NAME`, each
//! alone on its line (the anchors of mdBook's `{{#include}}`). The anchor lines are left out,
//! and so are the lines of other anchors nested inside; the common leading indentation is
//! removed. The block must hold exactly those lines.
//!
//! A doc that has at least one marker must include every `rust` block it has; docs without
//! markers are not checked. Markers inside a fenced block are text, not markers.
//!
//! [`check`] reports every block that differs from its source, every missing, doubly defined
//! or unterminated anchor, and every marker without its block; [`fix`] rewrites the blocks
//! from their sources. The unit tests run `check` on every `docs/*.md`, so `cargo test -p
//! source_tree` (and `cargo xtask test`) fails when a doc drifts from the code;
//! `UPDATE_DOCS=1 cargo test -p source_tree doc_includes` runs `fix` on them first. Nothing but the
//! tests calls the module, so it is compiled for them only.

#![cfg(test)]

use std::fs;
use std::ops::Range;
use std::path::{Component, Path};

use anyhow::{Context, Result, bail};

/// How a marker line starts.
const MARKER_OPEN: &str = "<!-- include: ";
/// How a marker line ends.
const MARKER_CLOSE: &str = " -->";
/// The line that opens an included block.
const RUST_FENCE: &str = "```rust";
/// The shortest fence, which closes an included block.
const FENCE: &str = "```";

/// An included block of a doc.
struct Block {
    /// The index of the marker line (from 0).
    marker: usize,
    /// The source file, relative to the repository's root.
    path: String,
    /// The anchor's name.
    anchor: String,
    /// The indices of the block's lines between its fences, or `None` if the marker is not
    /// followed by a `rust` block.
    body: Option<Range<usize>>,
}

/// A doc split into lines, its included blocks, and what is wrong with its structure.
struct Doc {
    lines: Vec<String>,
    blocks: Vec<Block>,
    /// Unterminated blocks and `rust` blocks without a marker, as `(line index, message)`.
    problems: Vec<(usize, String)>,
}

/// The number of backticks opening a fence, if `line` opens (or closes) one.
fn fence_len(line: &str) -> Option<usize> {
    let n = line.trim_start().chars().take_while(|c| *c == '`').count();
    (n >= FENCE.len()).then_some(n)
}

/// Whether a fence's info string names Rust (`rust`, `rs`, `rust,ignore`, ...).
fn is_rust_fence(line: &str) -> bool {
    let info = line.trim().trim_start_matches('`');
    let lang = info.split([',', ' ', '{']).next().unwrap_or("");
    lang == "rust" || lang == "rs"
}

/// The first line at or after `from` that closes a fence opened with `len` backticks: nothing
/// but at least as many backticks.
fn closing_fence(lines: &[String], from: usize, len: usize) -> Option<usize> {
    (from..lines.len()).find(|&i| {
        let t = lines[i].trim();
        !t.is_empty() && t.chars().all(|c| c == '`') && t.len() >= len
    })
}

/// Splits `text` into lines and finds its markers and blocks.
fn parse(text: &str) -> Doc {
    let lines: Vec<String> = text.split('\n').map(str::to_owned).collect();
    let mut blocks = Vec::new();
    let mut problems = Vec::new();
    let mut rust_without_marker = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim();
        let marker = line.strip_prefix(MARKER_OPEN).and_then(|m| m.strip_suffix(MARKER_CLOSE));
        if let Some(target) = marker {
            let target = target.trim();
            let (path, anchor) = target.rsplit_once(':').unwrap_or((target, ""));
            let mut block =
                Block { marker: i, path: path.to_owned(), anchor: anchor.to_owned(), body: None };
            if lines.get(i + 1).is_some_and(|l| l.trim_end() == RUST_FENCE) {
                i += 1;
                match closing_fence(&lines, i + 1, FENCE.len()) {
                    Some(end) => {
                        block.body = Some(i + 1..end);
                        i = end;
                    }
                    None => {
                        problems.push((i, format!("the block of {target} is unterminated")));
                        break;
                    }
                }
            }
            blocks.push(block);
        } else if let Some(len) = fence_len(line) {
            if is_rust_fence(line) {
                rust_without_marker.push(i);
            }
            match closing_fence(&lines, i + 1, len) {
                Some(end) => i = end,
                None => {
                    problems.push((i, "the fenced block is unterminated".to_owned()));
                    i = lines.len();
                }
            }
        }
        i += 1;
    }
    if !blocks.is_empty() {
        for i in rust_without_marker {
            let what = "a rust block without an include marker (the doc includes its other blocks)";
            problems.push((i, what.to_owned()));
        }
    }
    Doc { lines, blocks, problems }
}

/// The lines of `anchor` in `source`, anchor lines left out, common indentation removed.
fn anchored(source: &str, anchor: &str) -> std::result::Result<Vec<String>, String> {
    let open = format!("// ANCHOR: {anchor}");
    let close = format!("// ANCHOR_END: {anchor}");
    let lines: Vec<&str> = source.lines().collect();
    let starts: Vec<usize> = (0..lines.len()).filter(|&i| lines[i].trim() == open).collect();
    let start = match starts[..] {
        [] => return Err(format!("the anchor is missing (no `{open}` line)")),
        [start] => start,
        [_, second, ..] => {
            return Err(format!("the anchor is defined twice (again at line {})", second + 1));
        }
    };
    let Some(end) = (start + 1..lines.len()).find(|&i| lines[i].trim() == close) else {
        return Err(format!("the anchor is unterminated (no `{close}` after line {})", start + 1));
    };
    let is_anchor_line = |l: &&str| {
        let t = l.trim();
        t.starts_with("// ANCHOR: ") || t.starts_with("// ANCHOR_END: ")
    };
    let body: Vec<&str> =
        lines[start + 1..end].iter().filter(|l| !is_anchor_line(l)).copied().collect();
    let indent = body
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start_matches([' ', '\t']).len())
        .min()
        .unwrap_or(0);
    Ok(body
        .iter()
        .map(|l| if l.trim().is_empty() { String::new() } else { l[indent..].to_owned() })
        .collect())
}

/// The lines `block` should hold, read from its source under `repo_root`.
fn expected(repo_root: &Path, block: &Block) -> std::result::Result<Vec<String>, String> {
    let relative = Path::new(&block.path);
    if block.path.is_empty()
        || block.anchor.is_empty()
        || !relative.components().all(|c| matches!(c, Component::Normal(_)))
    {
        return Err("a marker names a relative path inside the repository and an anchor, \
                    as `<!-- include: PATH:ANCHOR -->`"
            .to_owned());
    }
    let source = fs::read_to_string(repo_root.join(relative))
        .map_err(|e| format!("cannot read the source: {e}"))?;
    anchored(&source, &block.anchor)
}

/// What differs between a block's lines (`doc`, starting at line index `first`) and its
/// source's, or `None` if nothing does.
fn difference(doc: &[String], source: &[String], first: usize) -> Option<String> {
    let at = (0..doc.len().max(source.len())).find(|&k| doc.get(k) != source.get(k))?;
    let line = first + at + 1;
    Some(match (doc.get(at), source.get(at)) {
        (Some(d), Some(s)) => {
            format!("line {line} differs from the source: the doc has `{d}`, the source `{s}`")
        }
        (Some(d), None) => format!("line {line} (`{d}`) is not in the source, which ends before"),
        (None, Some(s)) => {
            format!("the block ends at line {line}, where the source goes on with `{s}`")
        }
        (None, None) => unreachable!("the lines differ at index {at}"),
    })
}

/// How errors name a doc: relative to the repository's root if it lies inside.
fn shown(repo_root: &Path, doc: &Path) -> String {
    doc.strip_prefix(repo_root).unwrap_or(doc).display().to_string()
}

/// Fails with every error found, one per line, each starting with `name:line:`.
fn report(name: &str, mut errors: Vec<(usize, String)>) -> Result<()> {
    if errors.is_empty() {
        return Ok(());
    }
    errors.sort_by_key(|(line, _)| *line);
    let lines: Vec<String> =
        errors.iter().map(|(line, what)| format!("{name}:{}: {what}", line + 1)).collect();
    bail!("{}", lines.join("\n"))
}

/// Checks every included block of the doc at `doc` against its source under `repo_root`;
/// returns how many blocks were checked.
///
/// Errors name the doc, the line, the included `path:anchor` and what is wrong: a block that
/// differs from its source (the first line that does), an anchor that is missing, defined
/// twice or unterminated, an unreadable source, a marker without its block, an unterminated
/// block, or (in a doc with markers) a `rust` block without a marker.
pub fn check(repo_root: &Path, doc: &Path) -> Result<usize> {
    let name = shown(repo_root, doc);
    let text = fs::read_to_string(doc).with_context(|| format!("cannot read {name}"))?;
    let parsed = parse(&text);
    let mut errors = parsed.problems;
    for block in &parsed.blocks {
        let target = format!("{}:{}", block.path, block.anchor);
        let want = match expected(repo_root, block) {
            Ok(want) => want,
            Err(e) => {
                errors.push((block.marker, format!("{target}: {e}")));
                continue;
            }
        };
        let Some(body) = block.body.clone() else {
            let what = format!("{target}: the marker is not followed by a ```rust block");
            errors.push((block.marker, what));
            continue;
        };
        if let Some(what) = difference(&parsed.lines[body.clone()], &want, body.start) {
            let fix = "(`UPDATE_DOCS=1 cargo test -p source_tree doc_includes` rewrites it)";
            errors.push((block.marker, format!("{target}: {what} {fix}")));
        }
    }
    report(&name, errors)?;
    Ok(parsed.blocks.len())
}

/// Rewrites every included block of the doc at `doc` from its source under `repo_root`, and
/// adds the block after a marker that has none; returns how many blocks it changed. The doc is
/// written only if something changed. Fails without writing on what it cannot fix: a missing,
/// doubly defined or unterminated anchor, an unreadable source, an unterminated block, a
/// `rust` block without a marker.
pub fn fix(repo_root: &Path, doc: &Path) -> Result<usize> {
    let name = shown(repo_root, doc);
    let text = fs::read_to_string(doc).with_context(|| format!("cannot read {name}"))?;
    let parsed = parse(&text);
    let mut errors = parsed.problems;
    let mut out: Vec<String> = Vec::with_capacity(parsed.lines.len());
    let mut next = 0; // The first line of the doc not yet copied to `out`.
    let mut changed = 0;
    for block in &parsed.blocks {
        let want = match expected(repo_root, block) {
            Ok(want) => want,
            Err(e) => {
                errors.push((block.marker, format!("{}:{}: {e}", block.path, block.anchor)));
                continue;
            }
        };
        out.extend_from_slice(&parsed.lines[next..=block.marker]);
        out.push(RUST_FENCE.to_owned());
        match &block.body {
            Some(body) => {
                if parsed.lines[body.clone()] != want[..] {
                    changed += 1;
                }
                out.extend(want);
                next = body.end; // The closing fence is copied with what follows.
            }
            None => {
                out.extend(want);
                out.push(FENCE.to_owned());
                changed += 1;
                next = block.marker + 1;
            }
        }
    }
    report(&name, errors)?;
    out.extend_from_slice(&parsed.lines[next..]);
    if changed > 0 {
        fs::write(doc, out.join("\n")).with_context(|| format!("cannot write {name}"))?;
    }
    Ok(changed)
}

mod tests {
    use std::path::PathBuf;

    use super::*;

    /// A directory of sample files under the system's temporary directory, removed on drop.
    struct Sample(PathBuf);

    impl Sample {
        fn new(name: &str) -> Sample {
            let dir = std::env::temp_dir()
                .join(format!("tessera-doc-includes-{}-{name}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(dir.join("src")).unwrap();
            fs::write(dir.join("src/lib.rs"), SOURCE).unwrap();
            Sample(dir)
        }

        /// Writes `text` as `doc.md` and returns its path.
        fn doc(&self, text: &str) -> PathBuf {
            let path = self.0.join("doc.md");
            fs::write(&path, text).unwrap();
            path
        }
    }

    impl Drop for Sample {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    const SOURCE: &str = "\
pub fn outer() {
    // ANCHOR: body
    let x = 1;
    // ANCHOR: inner
    if x > 0 {
        println!(\"{x}\");
    }
    // ANCHOR_END: inner

    drop(x);
    // ANCHOR_END: body
}
// ANCHOR: open
fn never_closed() {}
";

    const GOOD: &str = "\
# Sample

<!-- include: src/lib.rs:body -->
```rust
let x = 1;
if x > 0 {
    println!(\"{x}\");
}

drop(x);
```

Text, then a nested anchor:

<!-- include: src/lib.rs:inner -->
```rust
if x > 0 {
    println!(\"{x}\");
}
```

````markdown
<!-- include: src/lib.rs:nowhere -->
```rust
```
````
";

    #[test]
    fn samples_match_mismatch_missing_and_unterminated_anchors() {
        let s = Sample::new("check");
        assert_eq!(check(&s.0, &s.doc(GOOD)).unwrap(), 2, "a marker inside a fence is text");

        let changed = GOOD.replacen("drop(x);", "drop(y);", 1);
        let e = check(&s.0, &s.doc(&changed)).unwrap_err().to_string();
        assert!(e.starts_with("doc.md:3: src/lib.rs:body: line 10 differs"), "{e}");
        assert!(e.contains("the doc has `drop(y);`, the source `drop(x);`"), "{e}");

        let shorter = GOOD.replacen("\ndrop(x);\n", "\n", 1);
        let e = check(&s.0, &s.doc(&shorter)).unwrap_err().to_string();
        assert!(e.contains("doc.md:3: src/lib.rs:body: the block ends at line 10"), "{e}");

        let missing = GOOD.replacen("src/lib.rs:inner", "src/lib.rs:outer", 1);
        let e = check(&s.0, &s.doc(&missing)).unwrap_err().to_string();
        assert!(e.starts_with("doc.md:15: src/lib.rs:outer: the anchor is missing"), "{e}");

        let open = GOOD.replacen("src/lib.rs:inner", "src/lib.rs:open", 1);
        let e = check(&s.0, &s.doc(&open)).unwrap_err().to_string();
        assert!(e.starts_with("doc.md:15: src/lib.rs:open: the anchor is unterminated"), "{e}");

        let no_file = GOOD.replacen("src/lib.rs:inner", "src/gone.rs:inner", 1);
        let e = check(&s.0, &s.doc(&no_file)).unwrap_err().to_string();
        assert!(e.starts_with("doc.md:15: src/gone.rs:inner: cannot read the source"), "{e}");

        let outside = GOOD.replacen("src/lib.rs:inner", "../lib.rs:inner", 1);
        assert!(check(&s.0, &s.doc(&outside)).is_err());
    }

    #[test]
    fn samples_with_broken_structure() {
        let s = Sample::new("structure");
        let bare = format!("{GOOD}\n```rust\nfn main() {{}}\n```\n");
        let e = check(&s.0, &s.doc(&bare)).unwrap_err().to_string();
        assert!(e.starts_with("doc.md:28: a rust block without an include marker"), "{e}");
        assert_eq!(check(&s.0, &s.doc("```rust\nfn main() {}\n```\n")).unwrap(), 0);

        let no_block = "<!-- include: src/lib.rs:inner -->\n\nText.\n";
        let e = check(&s.0, &s.doc(no_block)).unwrap_err().to_string();
        assert!(e.starts_with("doc.md:1: src/lib.rs:inner: the marker is not followed"), "{e}");

        let unterminated = "<!-- include: src/lib.rs:inner -->\n```rust\nif x > 0 {\n";
        let e = check(&s.0, &s.doc(unterminated)).unwrap_err().to_string();
        assert!(e.starts_with("doc.md:2: the block of src/lib.rs:inner is unterminated"), "{e}");

        let twice = format!("{SOURCE}// ANCHOR: inner\n// ANCHOR_END: inner\n");
        fs::write(s.0.join("src/lib.rs"), twice).unwrap();
        let e = check(&s.0, &s.doc(GOOD)).unwrap_err().to_string();
        assert!(e.contains("doc.md:15: src/lib.rs:inner: the anchor is defined twice"), "{e}");
    }

    #[test]
    fn fix_rewrites_blocks_from_their_sources() {
        let s = Sample::new("fix");
        let drifted = GOOD.replacen("drop(x);", "drop(y);", 1).replacen(
            "```rust\nif x > 0 {\n    println!(\"{x}\");\n}\n```\n",
            "",
            1,
        );
        let doc = s.doc(&drifted);
        assert!(check(&s.0, &doc).is_err());
        assert_eq!(fix(&s.0, &doc).unwrap(), 2, "one block rewritten, one added");
        assert_eq!(fs::read_to_string(&doc).unwrap(), GOOD);
        assert_eq!(fix(&s.0, &doc).unwrap(), 0);
        assert_eq!(check(&s.0, &doc).unwrap(), 2);

        let missing = s.doc(&GOOD.replacen("src/lib.rs:inner", "src/lib.rs:outer", 1));
        assert!(fix(&s.0, &missing).is_err());
    }

    #[test]
    fn every_doc_of_the_repository_matches_its_sources() {
        let root = tool_base::util::root();
        let update = std::env::var_os("UPDATE_DOCS").is_some();
        let mut docs: Vec<PathBuf> = fs::read_dir(root.join("docs"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "md"))
            .collect();
        docs.sort();
        let mut errors = Vec::new();
        let mut blocks = 0;
        for doc in &docs {
            if update && let Err(e) = fix(&root, doc) {
                errors.push(e.to_string());
            }
            match check(&root, doc) {
                Ok(n) => blocks += n,
                Err(e) => errors.push(e.to_string()),
            }
        }
        assert!(errors.is_empty(), "docs differ from their sources:\n{}", errors.join("\n"));
        assert!(blocks > 0, "no included block in {} docs", docs.len());
    }
}
