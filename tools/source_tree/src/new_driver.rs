//! `cargo xtask new-driver NAME`: a new stretch driver that builds, boots and passes its tests
//! at once (`docs/stretch-driver-tutorial.md`).
//!
//! It makes, from `stretch_drivers/template` as it is now:
//!
//! - `stretch_drivers/NAME/`: the template crate, package `NAME_driver` (`-` written `_`), type
//!   `NameDriver`, its crate documentation naming the new driver, the `// ANCHOR:` lines of the
//!   tutorial removed. The workspace's members include `stretch_drivers/*`, so it is a member
//!   (and a default member: `cargo test` covers it) at once;
//! - `userland/apps/NAME-demo/`: an app that binds the driver to a stretch of [`DEMO_PAGES`]
//!   pages with `tessera::paging::bind`, writes every word of every page, reads them all back,
//!   prints `NAME-demo: ok pages=N` and exits 0, or names the first word that differs and exits
//!   1;
//! - `tests/manifests/user/NAME.toml`: one domain running the app, whose first line
//!   `# expect: NAME-demo: ok pages=N` is the check of the QEMU test
//!   `qemu::ARCH::user::NAME` (`tools/suites/src/user.rs`).
//!
//! The name must be lowercase letters, digits and `-`, start with a letter, and name no
//! existing crate, app or manifest; otherwise nothing is written.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use tool_base::util;

/// The pages the demo app binds its driver to.
pub const DEMO_PAGES: usize = 8;

/// The directory of user manifests, relative to the workspace: each is booted by the QEMU suite
/// `user` and checked against its `# expect:` line.
pub const USER_MANIFESTS: &str = "tests/manifests/user";

/// What [`generate`] made, relative to the workspace root.
#[derive(Debug)]
pub struct Made {
    /// The driver crate's directory.
    pub driver_dir: PathBuf,
    /// The driver's package name.
    pub package: String,
    /// The demo app's directory.
    pub app_dir: PathBuf,
    /// The demo app's name (its package, binary and domain).
    pub app: String,
    /// The manifest.
    pub manifest: PathBuf,
}

/// `cargo xtask new-driver NAME`: makes the driver, app and manifest in the workspace and says
/// what to run next.
pub fn run(name: &str) -> Result<u8> {
    let made = generate(&util::root(), name)?;
    let manifest = made.manifest.display();
    println!("made the stretch driver `{name}`:");
    println!(
        "  {}/  the driver: package {}, a copy of the template (demand-zero pages on guaranteed frames)",
        made.driver_dir.display(),
        made.package
    );
    println!(
        "  {}/  an app that binds it to {DEMO_PAGES} pages, writes every page and reads it back",
        made.app_dir.display()
    );
    println!(
        "  {manifest}  one domain running {}; its `# expect:` line is the QEMU test's check",
        made.app
    );
    println!("next:");
    println!("  cargo test -p {}   # the driver's tests against the host mock", made.package);
    println!("  cargo xtask run --manifest {manifest}   # boot it (add --arch x86_64)");
    println!("  cargo xtask test user::{name}   # the QEMU test qemu::<arch>::user::{name}");
    Ok(0)
}

/// Why `name` cannot name a new driver, if it cannot (the characters and the length only).
pub fn name_problem(name: &str) -> Option<String> {
    // The app is `NAME-demo`, which must fit a manifest's names.
    let max = manifest::MAX_NAME_LEN - "-demo".len();
    if name.is_empty() {
        return Some("the name is empty".into());
    }
    if name.len() > max {
        return Some(format!("`{name}` is {} bytes long (at most {max})", name.len()));
    }
    if let Some(c) = name.chars().find(|c| !matches!(c, 'a'..='z' | '0'..='9' | '-')) {
        return Some(format!("`{name}` has `{c}`: use lowercase letters, digits and `-`"));
    }
    if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        return Some(format!("`{name}` must start with a letter"));
    }
    if name.ends_with('-') || name.contains("--") {
        return Some(format!("`{name}` must not end with `-` or hold `--`"));
    }
    None
}

/// The package names of the crates in `root` (every `Cargo.toml` up to three directories deep,
/// `target` and hidden directories left out).
fn package_names(root: &Path) -> Vec<String> {
    fn walk(dir: &Path, depth: usize, out: &mut Vec<String>) {
        if let Ok(toml) = std::fs::read_to_string(dir.join("Cargo.toml"))
            && let Ok(value) = toml.parse::<toml::Table>()
            && let Some(name) = value.get("package").and_then(|p| p.get("name"))
            && let Some(name) = name.as_str()
        {
            out.push(name.to_string());
        }
        if depth == 0 {
            return;
        }
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for e in entries.filter_map(|e| e.ok()) {
            let file_name = e.file_name();
            let n = file_name.to_string_lossy();
            if e.path().is_dir() && n != "target" && !n.starts_with('.') {
                walk(&e.path(), depth - 1, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(root, 3, &mut out);
    out
}

/// `my-pager` as `MyPager`.
fn camel(name: &str) -> String {
    name.split('-')
        .map(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .map_or(String::new(), |c| c.to_ascii_uppercase().to_string() + chars.as_str())
        })
        .collect()
}

/// Makes the driver, the demo app and the manifest for `name` in the workspace at `root`, which
/// must hold `stretch_drivers/template`. Checks everything before writing anything.
pub fn generate(root: &Path, name: &str) -> Result<Made> {
    if let Some(why) = name_problem(name) {
        bail!("cannot make driver `{name}`: {why}");
    }
    let snake = name.replace('-', "_");
    let package = format!("{snake}_driver");
    let app = format!("{name}-demo");
    let type_name = format!("{}Driver", camel(name));
    let driver_dir = Path::new("stretch_drivers").join(name);
    let app_dir = Path::new("userland/apps").join(&app);
    let manifest = Path::new(USER_MANIFESTS).join(format!("{name}.toml"));

    // Nothing of that name may exist: directories, packages, apps (driver domains included).
    let taken = [
        driver_dir.clone(),
        app_dir.clone(),
        manifest.clone(),
        Path::new("drivers").join(&snake),
        Path::new("drivers").join(app.replace('-', "_")),
        Path::new("manifests").join(format!("{name}.toml")),
    ];
    if let Some(path) = taken.iter().find(|p| root.join(p).exists()) {
        bail!("cannot make driver `{name}`: {} exists", path.display());
    }
    let packages = package_names(root);
    for wanted in [&package, &app, &name.to_string(), &snake] {
        if packages.contains(wanted) {
            bail!("cannot make driver `{name}`: the workspace has a package `{wanted}`");
        }
    }
    let template = root.join("stretch_drivers/template");
    let lib = std::fs::read_to_string(template.join("src/lib.rs"))
        .with_context(|| format!("reading {}", template.join("src/lib.rs").display()))?;
    let cargo = std::fs::read_to_string(template.join("Cargo.toml"))
        .with_context(|| format!("reading {}", template.join("Cargo.toml").display()))?;
    let driver_lib = driver_source(&lib, name, &type_name);
    let driver_cargo = driver_manifest(&cargo, name, &package)?;

    // Write: the driver (every file of the template, the two rewritten), the app, the manifest.
    let mut files: Vec<(PathBuf, String)> = Vec::new();
    for rel in template_files(&template)? {
        let text = match rel.to_str() {
            Some("Cargo.toml") => driver_cargo.clone(),
            Some("src/lib.rs") => driver_lib.clone(),
            _ => std::fs::read_to_string(template.join(&rel))
                .with_context(|| format!("reading {}", template.join(&rel).display()))?
                .replace("TemplateDriver", &type_name),
        };
        files.push((driver_dir.join(rel), text));
    }
    files.push((app_dir.join("Cargo.toml"), app_manifest(name, &app, &package)));
    files.push((app_dir.join("src/main.rs"), app_source(name, &app, &snake, &type_name)));
    files.push((manifest.clone(), demo_manifest(name, &app)));
    for (rel, text) in &files {
        let path = root.join(rel);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(Made { driver_dir, package, app_dir, app, manifest })
}

/// The files of the template crate, relative to it, sorted (`target` left out).
fn template_files(template: &Path) -> Result<Vec<PathBuf>> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        for e in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
            let path = e?.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "target") {
                    walk(base, &path, out)?;
                }
            } else {
                out.push(path.strip_prefix(base)?.to_path_buf());
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(template, template, &mut out)?;
    out.sort();
    Ok(out)
}

/// The template's `src/lib.rs` for driver `name`: the type renamed, the `// ANCHOR:` lines
/// gone, and the crate documentation's first paragraph (and the one on copying the template)
/// replaced by one naming the driver.
fn driver_source(lib: &str, name: &str, type_name: &str) -> String {
    let lines: Vec<&str> = lib.lines().collect();
    // The paragraphs of the leading `//!` block.
    let doc_end = lines.iter().position(|l| !l.starts_with("//!")).unwrap_or(lines.len());
    let mut out = vec![
        format!(
            "//! The `{name}` stretch driver, made by `cargo xtask new-driver {name}` from the"
        ),
        "//! template. Keep this documentation true as the driver changes: what it is for, its"
            .to_string(),
        "//! invariants, what it does not implement.".to_string(),
    ];
    let mut need_blank = true;
    let mut paragraph_start = 0;
    let mut skip = true; // the first paragraph: replaced above
    for (i, line) in lines[..doc_end].iter().enumerate() {
        if i == paragraph_start {
            skip |= line.starts_with("//! To start a driver of your own");
        }
        if line.trim_end() == "//!" {
            if !skip {
                out.push(line.to_string());
            }
            paragraph_start = i + 1;
            skip = false;
            continue;
        }
        if !skip {
            if need_blank {
                out.push("//!".into());
                need_blank = false;
            }
            out.push(line.to_string());
        }
    }
    out.extend(
        lines[doc_end..]
            .iter()
            .filter(|l| !l.trim_start().starts_with("// ANCHOR"))
            .map(|l| l.to_string()),
    );
    let mut text = out.join("\n").replace("TemplateDriver", type_name);
    text = text.replace("/// The template driver.", &format!("/// The `{name}` driver."));
    text.push('\n');
    text
}

/// The template's `Cargo.toml` for driver `name`: the package and its description renamed.
fn driver_manifest(cargo: &str, name: &str, package: &str) -> Result<String> {
    let mut renamed = false;
    let lines: Vec<String> = cargo
        .lines()
        .map(|l| {
            if l.starts_with("name = ") && !renamed {
                renamed = true;
                format!("name = \"{package}\"")
            } else if l.starts_with("description = ") {
                format!(
                    "description = \"The {name} stretch driver for Tessera (from the template: demand-zero pages on guaranteed frames)\""
                )
            } else {
                l.to_string()
            }
        })
        .collect();
    if !renamed {
        bail!("stretch_drivers/template/Cargo.toml has no `name = ` line");
    }
    Ok(lines.join("\n") + "\n")
}

fn app_manifest(name: &str, app: &str, package: &str) -> String {
    format!(
        r#"[package]
name = "{app}"
description = "Tessera app: binds the {name} stretch driver to a stretch, writes every page and reads it back"
version.workspace = true
edition.workspace = true
rust-version.workspace = true
license.workspace = true
publish = false

[[bin]]
name = "{app}"
test = false
bench = false

[dependencies]
libtessera = {{ path = "../../libtessera" }}
{package} = {{ path = "../../../stretch_drivers/{name}" }}

[lints]
workspace = true
"#
    )
}

fn app_source(name: &str, app: &str, snake: &str, type_name: &str) -> String {
    format!(
        r#"//! `{app}`: the `{name}` stretch driver in a domain.
//!
//! Usage: `{app} [--pages N]` (default {DEMO_PAGES}).
//!
//! It binds a [`{type_name}`] to a read-write managed stretch of `N` pages with
//! `tessera::paging::bind`, stores once to each page (each store faults, and the driver maps
//! the page) and once more (none faults), timing both rounds for `cargo xtask bench fault
//! --manifest` (`{app}: bench faults=N fault_ns=T touch_ns=U`), then writes every word of
//! every page and reads them all back. It prints `{app}: ok pages=N`
//! and exits 0 when every word holds what was written; otherwise it names the first word that
//! does not and exits 1.
//!
//! Made by `cargo xtask new-driver {name}`; `tests/manifests/user/{name}.toml` runs it, and
//! `cargo xtask test user::{name}` boots that manifest and looks for the `ok` line.

#![no_std]
#![no_main]

extern crate alloc;

use alloc::boxed::Box;

use tessera::{{Env, PAGE_SIZE, Rights, paging, println}};

use {snake}_driver::{type_name};

tessera::main!(main);

/// Page faults the kernel delivered to this domain so far.
fn kernel_faults() -> u64 {{
    tessera::dcb().frames.faults.load(core::sync::atomic::Ordering::Acquire)
}}

/// The value written at word `word` of page `page`: different on every word of the stretch.
fn pattern(page: usize, word: usize) -> u64 {{
    ((page as u64) << 32 | word as u64) ^ 0x5a5a_5a5a_5a5a_5a5a
}}

fn main(env: Env) -> i32 {{
    let mut pages = {DEMO_PAGES}usize;
    let mut args = env.args;
    while let Some(arg) = args.next() {{
        match (arg, args.next().and_then(|v| v.parse::<usize>().ok())) {{
            ("--pages", Some(n)) if n > 0 => pages = n,
            _ => {{
                println!("{app}: usage: {app} [--pages N]");
                return 2;
            }}
        }}
    }}
    let driver = Box::leak(Box::new({type_name}::new()));
    let rw = Rights::READ.union(Rights::WRITE);
    let stretch = match paging::bind(driver, pages * PAGE_SIZE, rw) {{
        Ok(stretch) => stretch,
        Err(e) => {{
            println!("{app}: bind failed: {{}}", e);
            return 1;
        }}
    }};
    // The fault round trip, as `cargo xtask bench fault --manifest` reads it: one store to
    // each page faults (the driver maps it), a second store to each does not.
    let faults_before = kernel_faults();
    let t0 = tessera::time_ns();
    for page in 0..pages {{
        // SAFETY: as below.
        unsafe {{ (stretch.page_addr(page) as *mut u64).write_volatile(pattern(page, 0)) }};
    }}
    let t1 = tessera::time_ns();
    for page in 0..pages {{
        // SAFETY: as below.
        unsafe {{ (stretch.page_addr(page) as *mut u64).write_volatile(pattern(page, 0)) }};
    }}
    let t2 = tessera::time_ns();
    println!(
        "{app}: bench faults={{}} fault_ns={{}} touch_ns={{}}",
        kernel_faults() - faults_before,
        t1 - t0,
        t2 - t1
    );
    let words = PAGE_SIZE / 8;
    for page in 0..pages {{
        let base = stretch.page_addr(page) as *mut u64;
        for word in 0..words {{
            // SAFETY: `base` is a page of the stretch bound above, read-write for this domain;
            // the first write faults and the driver maps the page before it completes.
            unsafe {{ base.add(word).write_volatile(pattern(page, word)) }};
        }}
    }}
    for page in 0..pages {{
        let base = stretch.page_addr(page) as *const u64;
        for word in 0..words {{
            // SAFETY: as above.
            let got = unsafe {{ base.add(word).read_volatile() }};
            if got != pattern(page, word) {{
                println!(
                    "{app}: page {{}} word {{}} reads {{:#x}}, {{:#x}} was written",
                    page,
                    word,
                    got,
                    pattern(page, word)
                );
                return 1;
            }}
        }}
    }}
    println!("{app}: ok pages={{}}", pages);
    0
}}
"#
    )
}

fn demo_manifest(name: &str, app: &str) -> String {
    format!(
        r#"# expect: {app}: ok pages={DEMO_PAGES}
# The {name} stretch driver in a domain: {app} binds it to {DEMO_PAGES} pages, writes every page
# and reads it back. `cargo xtask test user::{name}` boots this on both architectures and passes
# when the kernel exits 0, every domain exits 0, no ERROR or WARN is logged and a line holds
# the text of the first line. Made by `cargo xtask new-driver {name}`.
[system]
memory = "64M"

[[domain]]
name = "{app}"
app = "{app}"
args = ["--pages", "{DEMO_PAGES}"]
memory = {{ guaranteed = "1M" }}
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory holding a copy of the template crate and the other directories the
    /// generator looks at.
    fn scratch(tag: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("tessera-new-driver-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let real = util::root().join("stretch_drivers/template");
        for rel in template_files(&real).unwrap() {
            let to = dir.join("stretch_drivers/template").join(&rel);
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(real.join(&rel), to).unwrap();
        }
        std::fs::create_dir_all(dir.join("userland/apps/hello")).unwrap();
        std::fs::write(dir.join("userland/apps/hello/Cargo.toml"), "[package]\nname = \"hello\"\n")
            .unwrap();
        dir
    }

    fn read(root: &Path, rel: &str) -> String {
        std::fs::read_to_string(root.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
    }

    #[test]
    fn makes_driver_app_and_manifest() {
        let root = scratch("ok");
        let made = generate(&root, "my-pager").unwrap();
        assert_eq!(made.package, "my_pager_driver");
        assert_eq!(made.app, "my-pager-demo");

        let cargo = read(&root, "stretch_drivers/my-pager/Cargo.toml");
        assert!(cargo.contains("name = \"my_pager_driver\""), "{cargo}");
        assert!(!cargo.contains("template_driver"), "{cargo}");
        let lib = read(&root, "stretch_drivers/my-pager/src/lib.rs");
        assert!(lib.starts_with("//! The `my-pager` stretch driver"), "{lib}");
        assert!(lib.contains("pub struct MyPagerDriver"));
        assert!(lib.contains("MyPagerDriver::new()"), "the test uses the new type");
        for gone in ["ANCHOR", "TemplateDriver", "template driver", "To start a driver"] {
            assert!(!lib.contains(gone), "`{gone}` left in:\n{lib}");
        }
        // The rest of the crate documentation stays, and the code after it.
        assert!(lib.contains("//! # Invariants"));
        assert!(lib.contains("#![forbid(unsafe_code)]"));

        let app_cargo = read(&root, "userland/apps/my-pager-demo/Cargo.toml");
        assert!(app_cargo.contains("name = \"my-pager-demo\""));
        assert!(
            app_cargo
                .contains("my_pager_driver = { path = \"../../../stretch_drivers/my-pager\" }")
        );
        let main = read(&root, "userland/apps/my-pager-demo/src/main.rs");
        assert!(main.contains("use my_pager_driver::MyPagerDriver;"));
        assert!(main.contains("\"my-pager-demo: ok pages={}\""));

        let manifest = read(&root, "tests/manifests/user/my-pager.toml");
        assert_eq!(manifest.lines().next(), Some("# expect: my-pager-demo: ok pages=8"));
        assert!(manifest.contains("app = \"my-pager-demo\""));
        // It is a manifest the manifest crate accepts.
        let known = ["my-pager-demo"];
        manifest::parse_file_for(
            &root.join("tests/manifests/user/my-pager.toml"),
            &known,
            manifest::Machine::RiscvVirt,
        )
        .unwrap();

        // A second run refuses: the driver exists now.
        let again = generate(&root, "my-pager").unwrap_err().to_string();
        assert!(again.contains("stretch_drivers/my-pager exists"), "{again}");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn refuses_bad_and_taken_names_writing_nothing() {
        let root = scratch("bad");
        let before = template_files(&root).unwrap();
        for bad in ["", "Mine", "my_pager", "9lives", "-x", "x-", "a--b", "a b", &"x".repeat(27)] {
            let err = generate(&root, bad).unwrap_err().to_string();
            assert!(err.starts_with("cannot make driver"), "{bad:?}: {err}");
        }
        // Taken: an existing driver directory, an app, a package name.
        for taken in ["template", "hello"] {
            let err = generate(&root, taken).unwrap_err().to_string();
            assert!(err.contains("exists") || err.contains("package"), "{taken}: {err}");
        }
        std::fs::create_dir_all(root.join("tests/manifests/user")).unwrap();
        std::fs::write(root.join("tests/manifests/user/taken.toml"), "").unwrap();
        assert!(generate(&root, "taken").unwrap_err().to_string().contains("taken.toml exists"));
        std::fs::remove_file(root.join("tests/manifests/user/taken.toml")).unwrap();
        // Nothing was written.
        assert_eq!(template_files(&root).unwrap(), before);
        assert!(name_problem(&"x".repeat(26)).is_none());
        std::fs::remove_dir_all(&root).unwrap();
    }
}
