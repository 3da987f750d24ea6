//! The book: `docs/` built by mdBook (`book.toml` at the root, the chapters' order in
//! `docs/SUMMARY.md`) into `target/book`, and checked.
//!
//! [`build`] installs the pinned mdBook ([`MDBOOK_VERSION`]) under `$CARGO_HOME/tessera-tools` when it is
//! missing (`cargo install --locked` from crates.io, without its web server), builds the book,
//! and points the links that leave `docs/` where a reader of the built book can follow them: a
//! doc (`../docs/X.md`, from a file the book includes) to its chapter, a file a chapter
//! includes whole (`manifests/README.md`) to that chapter, any other file of the repository to
//! the file in the tree.
//!
//! [`check`] fails, listing every problem, on what mdBook lets pass: a chapter in `docs/` that
//! `docs/SUMMARY.md` leaves out, an `{{#include}}` whose file or anchor is missing (mdBook
//! includes nothing for a missing anchor, without a word), an include mdBook left unexpanded,
//! and a link of the built pages whose target page or `#anchor` does not exist (mdBook checks
//! no link). mdBook's own errors and warnings fail the build.
//!
//! `cargo xtask book` and the suite's `host::book` run both.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Component, Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use tool_base::util;

/// The mdBook `cargo xtask book` installs and uses.
pub const MDBOOK_VERSION: &str = "0.5.4";

/// Where the book's chapters are, relative to the repository's root.
const SRC: &str = "docs";

/// The mdBook binary, installed if it is missing under Cargo's home
/// (`$CARGO_HOME/tessera-tools/mdbook-VERSION`, `~/.cargo` by default), outside the build
/// tree so that a clean checkout of the repository finds it again.
pub fn mdbook() -> Result<PathBuf> {
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .unwrap_or_else(|| util::target_dir().join("tools"));
    let root = cargo_home.join("tessera-tools").join(format!("mdbook-{MDBOOK_VERSION}"));
    let bin = root.join("bin/mdbook");
    let version = |bin: &Path| {
        Command::new(bin)
            .arg("--version")
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    let wanted = format!("mdbook v{MDBOOK_VERSION}");
    if bin.is_file() && version(&bin).as_deref() == Some(wanted.as_str()) {
        return Ok(bin);
    }
    eprintln!("book: installing mdbook {MDBOOK_VERSION} into {} (a few minutes)", root.display());
    let mut cmd = util::cargo();
    cmd.args(["install", "mdbook", "--locked", "--force", "--version", MDBOOK_VERSION])
        .args(["--no-default-features", "--features", "search", "--root"])
        .arg(&root)
        .env("CARGO_INCREMENTAL", "0");
    util::run(&mut cmd, "cargo install mdbook")?;
    match version(&bin) {
        Some(v) if v == wanted => Ok(bin),
        other => bail!("{} says {other:?}, not {wanted}", bin.display()),
    }
}

/// Builds the book into `target/book` and returns that directory: mdBook, then the links
/// that leave `docs/` pointed where the built book can follow them. Fails on any error or
/// warning mdBook prints.
pub fn build() -> Result<PathBuf> {
    let mdbook = mdbook()?;
    let root = util::root();
    let out = util::target_dir().join("book");
    let output = Command::new(&mdbook)
        .arg("build")
        .arg("--dest-dir")
        .arg(&out)
        .arg(&root)
        .output()
        .with_context(|| format!("could not start {}", mdbook.display()))?;
    let log = String::from_utf8_lossy(&output.stderr).into_owned()
        + &String::from_utf8_lossy(&output.stdout);
    let complaints: Vec<&str> =
        log.lines().filter(|l| l.contains("ERROR") || l.contains("WARN")).collect();
    if !output.status.success() || !complaints.is_empty() {
        bail!("mdbook build failed ({}):\n{}", output.status, log.trim_end());
    }
    let whole = whole_includes(&root)?;
    for page in pages(&out)? {
        let html = fs::read_to_string(&page)?;
        let fixed = rewrite_links(&html, &root, &out, &whole);
        if fixed != html {
            fs::write(&page, fixed)?;
        }
    }
    Ok(out)
}

/// Builds the book and checks it: what `cargo xtask book` and `host::book` run.
pub fn build_and_check() -> Result<PathBuf> {
    let out = build()?;
    check(&util::root(), &out)?;
    Ok(out)
}

/// `cargo xtask book`: builds and checks the book, and says where it is.
pub fn run() -> Result<u8> {
    let out = build_and_check()?;
    println!("book: {}", out.join("index.html").display());
    Ok(0)
}

/// The chapters `docs/SUMMARY.md` lists, as file names relative to `docs/`.
fn summary_chapters(root: &Path) -> Result<Vec<String>> {
    let path = root.join(SRC).join("SUMMARY.md");
    let text =
        fs::read_to_string(&path).with_context(|| format!("cannot read {SRC}/SUMMARY.md"))?;
    Ok(markdown_links(&text).into_iter().filter(|l| l.ends_with(".md")).collect())
}

/// Every `](TARGET)` of a markdown text, outside code.
fn markdown_links(text: &str) -> Vec<String> {
    let mut links = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            links.push(after[..end].trim().to_owned());
            rest = &after[end..];
        }
    }
    links
}

/// Every `{{#include ...}}` (or `{{#rustdoc_include ...}}`) of a chapter's text: the path as
/// written and the anchor, if the part after the path is one (not a line range).
fn includes(text: &str) -> Vec<(String, Option<String>)> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("{{#") {
        let after = &rest[at + 3..];
        let Some(end) = after.find("}}") else { break };
        let inner = after[..end].trim();
        rest = &after[end..];
        let Some(arg) =
            inner.strip_prefix("include ").or_else(|| inner.strip_prefix("rustdoc_include "))
        else {
            continue;
        };
        let arg = arg.trim();
        let (path, anchor) = match arg.split_once(':') {
            Some((path, tail)) => {
                let first = tail.split(':').next().unwrap_or("");
                let anchor = (!first.is_empty() && !first.bytes().all(|b| b.is_ascii_digit()))
                    .then(|| first.to_owned());
                (path.to_owned(), anchor)
            }
            None => (arg.to_owned(), None),
        };
        found.push((path, anchor));
    }
    found
}

/// The files a chapter includes whole, as it is nothing but the include (and comments): the
/// file's path relative to the root, and the chapter's page.
fn whole_includes(root: &Path) -> Result<BTreeMap<PathBuf, String>> {
    let mut whole = BTreeMap::new();
    for chapter in summary_chapters(root)? {
        let text = fs::read_to_string(root.join(SRC).join(&chapter)).unwrap_or_default();
        let body: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .filter(|l| !(l.starts_with("<!--") && l.ends_with("-->")))
            .collect();
        if let [line] = body[..]
            && let [(path, None)] = &includes(line)[..]
            && let Some(file) = normalize(&Path::new(SRC).join(path))
        {
            whole.insert(file, html_name(&chapter));
        }
    }
    Ok(whole)
}

/// A chapter's page: `x.md` is `x.html`.
fn html_name(chapter: &str) -> String {
    format!("{}.html", chapter.strip_suffix(".md").unwrap_or(chapter))
}

/// `path` with `.` and `..` resolved, or `None` if it climbs above its start.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::Normal(p) => out.push(p),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// The book's pages: the `.html` files at its top.
fn pages(out: &Path) -> Result<Vec<PathBuf>> {
    let mut pages: Vec<PathBuf> = fs::read_dir(out)
        .with_context(|| format!("cannot read {}", out.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "html"))
        .collect();
    pages.sort();
    Ok(pages)
}

/// Whether an `href` is one the checks follow: relative, to a file or an anchor.
fn is_relative(href: &str) -> bool {
    let scheme = href.split_once(':').is_some_and(|(s, _)| {
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
    });
    !scheme && !href.starts_with('/') && !href.starts_with("//")
}

/// Every `href="..."` value in `html`, with its byte range.
fn hrefs(html: &str) -> Vec<(std::ops::Range<usize>, &str)> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = html[from..].find("href=\"") {
        let start = from + at + "href=\"".len();
        let Some(len) = html[start..].find('"') else { break };
        found.push((start..start + len, &html[start..start + len]));
        from = start + len;
    }
    found
}

/// The page's links that leave the book pointed at what the reader can open: a doc's
/// chapter, the chapter that includes a file whole, or the file in the repository.
fn rewrite_links(html: &str, root: &Path, out: &Path, whole: &BTreeMap<PathBuf, String>) -> String {
    let repo_from_book = relative_to(out, root);
    let mut fixed = String::with_capacity(html.len());
    let mut copied = 0;
    for (range, href) in hrefs(html) {
        if !is_relative(href) || href.starts_with('#') {
            continue;
        }
        let (path, anchor) = href.split_once('#').map_or((href, None), |(p, a)| (p, Some(a)));
        // The book's pages are at its top, and its top is `docs/` in the repository.
        if normalize(Path::new(path)).is_some() {
            continue;
        }
        let Some(mut file) = normalize(&Path::new(SRC).join(path)) else { continue };
        // mdBook writes a link to any `.md` file as one to `.html`.
        if file.extension().is_some_and(|e| e == "html") && !root.join(&file).exists() {
            file.set_extension("md");
        }
        let target = if let Ok(doc) = file.strip_prefix(SRC)
            && doc.extension().is_some_and(|e| e == "md")
        {
            html_name(&doc.to_string_lossy())
        } else if let Some(chapter) = whole.get(&file) {
            chapter.clone()
        } else {
            match &repo_from_book {
                Some(up) => up.join(&file).to_string_lossy().into_owned(),
                None => format!("file://{}", root.join(&file).display()),
            }
        };
        fixed.push_str(&html[copied..range.start]);
        fixed.push_str(&target);
        if let Some(anchor) = anchor {
            fixed.push('#');
            fixed.push_str(anchor);
        }
        copied = range.end;
    }
    fixed.push_str(&html[copied..]);
    fixed
}

/// The relative path from the directory `from` up to its ancestor `to` (`../..`), if `to` is
/// one.
fn relative_to(from: &Path, to: &Path) -> Option<PathBuf> {
    let below = from.strip_prefix(to).ok()?;
    Some(below.components().map(|_| Component::ParentDir).collect())
}

/// Every `id="..."` in `html`.
fn ids(html: &str) -> BTreeSet<&str> {
    let mut found = BTreeSet::new();
    let mut from = 0;
    while let Some(at) = html[from..].find(" id=\"") {
        let start = from + at + " id=\"".len();
        let Some(len) = html[start..].find('"') else { break };
        found.insert(&html[start..start + len]);
        from = start + len;
    }
    found
}

/// Checks the book's sources under `root` and the built book in `out`; fails listing every
/// problem, one per line.
pub fn check(root: &Path, out: &Path) -> Result<()> {
    let mut problems = Vec::new();
    let chapters = summary_chapters(root)?;

    // Every doc is a chapter.
    let mut docs: Vec<String> = fs::read_dir(root.join(SRC))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md") && n != "SUMMARY.md")
        .collect();
    docs.sort();
    for doc in &docs {
        if !chapters.contains(doc) {
            problems.push(format!("{SRC}/{doc}: not a chapter: {SRC}/SUMMARY.md does not list it"));
        }
    }

    // Every include names a file and, if it names one, an anchor of it.
    for chapter in &chapters {
        let Ok(text) = fs::read_to_string(root.join(SRC).join(chapter)) else {
            problems.push(format!("{SRC}/SUMMARY.md: lists {chapter}, which cannot be read"));
            continue;
        };
        for (path, anchor) in includes(&text) {
            let written = anchor.as_ref().map_or(path.clone(), |a| format!("{path}:{a}"));
            let shown = format!("{SRC}/{chapter}: {{{{#include {written}}}}}");
            // mdBook reads an include's path from the chapter's own directory.
            let dir = Path::new(SRC).join(chapter);
            let Some(file) = normalize(&dir.parent().unwrap_or(Path::new(SRC)).join(&path)) else {
                problems.push(format!("{shown}: the path leaves the repository"));
                continue;
            };
            let Ok(source) = fs::read_to_string(root.join(&file)) else {
                problems.push(format!("{shown}: no such file {}", file.display()));
                continue;
            };
            if let Some(anchor) = anchor
                && let Err(e) = anchor_lines(&source, &anchor)
            {
                problems.push(format!("{shown}: anchor `{anchor}`: {e}"));
            }
        }
    }

    // Every link of the built pages reaches its page and anchor.
    let pages = pages(out)?;
    let mut page_ids: BTreeMap<PathBuf, BTreeSet<String>> = BTreeMap::new();
    let mut texts = Vec::new();
    for page in &pages {
        let html = fs::read_to_string(page)?;
        page_ids.insert(page.clone(), ids(&html).into_iter().map(str::to_owned).collect());
        texts.push((page.clone(), html));
    }
    for (page, html) in &texts {
        let name = page.file_name().unwrap_or_default().to_string_lossy().into_owned();
        for marker in ["{{#include", "{{#rustdoc_include"] {
            if html.contains(marker) {
                problems.push(format!("{name}: an include mdBook left as text ({marker} ...)"));
            }
        }
        for (_, href) in hrefs(html) {
            if !is_relative(href) {
                continue;
            }
            let (path, anchor) = href.split_once('#').map_or((href, ""), |(p, a)| (p, a));
            let target = if path.is_empty() {
                page.clone()
            } else {
                let joined = out.join(path);
                match normalize_abs(&joined) {
                    Some(t) => t,
                    None => {
                        problems.push(format!("{name}: link `{href}` leads nowhere"));
                        continue;
                    }
                }
            };
            if !target.exists() {
                problems.push(format!("{name}: link `{href}`: no such page or file"));
                continue;
            }
            if !target.starts_with(out) && target.starts_with(util::target_dir()) {
                problems.push(format!("{name}: link `{href}` leads into the build's output"));
                continue;
            }
            if !anchor.is_empty()
                && let Some(ids) = page_ids.get(&target)
                && !ids.contains(anchor)
            {
                let shown = target.file_name().unwrap_or_default().to_string_lossy();
                problems.push(format!("{name}: link `{href}`: {shown} has no anchor #{anchor}"));
            }
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    bail!("the book has {} problem(s):\n{}", problems.len(), problems.join("\n"))
}

/// An absolute path with `.` and `..` resolved.
fn normalize_abs(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    Some(out)
}

/// Checks that `source` has the anchor `name` as mdBook reads anchors: a line with
/// `ANCHOR: name`, a later one with `ANCHOR_END: name`, and something between.
fn anchor_lines(source: &str, name: &str) -> std::result::Result<(), String> {
    let names = |line: &str, key: &str| {
        line.find(key).is_some_and(|at| {
            let rest = line[at + key.len()..].trim_start();
            rest.strip_prefix(name).is_some_and(|tail| {
                !tail.starts_with(|c: char| c.is_alphanumeric() || c == '_' || c == '-')
            })
        })
    };
    let lines: Vec<&str> = source.lines().collect();
    let Some(start) = lines.iter().position(|l| names(l, "ANCHOR:")) else {
        return Err("no `ANCHOR:` line names it".to_owned());
    };
    let Some(end) = lines[start + 1..].iter().position(|l| names(l, "ANCHOR_END:")) else {
        return Err("no `ANCHOR_END:` line after its start".to_owned());
    };
    if lines[start + 1..start + 1 + end].iter().all(|l| l.trim().is_empty()) {
        return Err("nothing between its lines".to_owned());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn includes_and_their_anchors() {
        let text = "a {{#include ../x/y.rs:app}} b {{#include ../z.toml}} \
                    {{#include f.rs:3:9}} {{#rustdoc_include g.rs:main}} {{#title T}}";
        assert_eq!(
            includes(text),
            [
                ("../x/y.rs".to_owned(), Some("app".to_owned())),
                ("../z.toml".to_owned(), None),
                ("f.rs".to_owned(), None),
                ("g.rs".to_owned(), Some("main".to_owned())),
            ]
        );
        let source = "x\n// ANCHOR: app\nfn main() {}\n// ANCHOR_END: app\n# ANCHOR: empty\n\
                      # ANCHOR_END: empty\n// ANCHOR: application\n";
        assert_eq!(anchor_lines(source, "app"), Ok(()));
        assert!(anchor_lines(source, "empty").unwrap_err().contains("nothing between"));
        assert!(anchor_lines(source, "application").unwrap_err().contains("ANCHOR_END"));
        assert!(anchor_lines(source, "ap").unwrap_err().contains("no `ANCHOR:`"));
    }

    #[test]
    fn links_leaving_the_book_are_pointed_at_chapters_or_files() {
        let root = Path::new("/r");
        let out = Path::new("/r/target/book");
        let whole = BTreeMap::from([(PathBuf::from("manifests/README.md"), "m.html".to_owned())]);
        let html = "<a href=\"../manifests/README.html#paging\">p</a> \
                    <a href=\"../docs/memory.html#address-space\">m</a> \
                    <a href=\"../stretch_drivers/x/src/lib.rs\">s</a> \
                    <a href=\"cpu.html#rules\">c</a> <a href=\"https://x/y\">w</a>";
        assert_eq!(
            rewrite_links(html, root, out, &whole),
            "<a href=\"m.html#paging\">p</a> <a href=\"memory.html#address-space\">m</a> \
             <a href=\"../../stretch_drivers/x/src/lib.rs\">s</a> \
             <a href=\"cpu.html#rules\">c</a> <a href=\"https://x/y\">w</a>"
        );
        assert_eq!(
            markdown_links("- [A](a.md)\n```\n[B](b.md)\n```\n  - [C](c.md#x) and [D](d.md)"),
            ["a.md", "c.md#x", "d.md"]
        );
    }
}
