//! Keeps the promise that only architecture files name an architecture: the kernel, the
//! libraries, the apps and the stretch drivers name one (`target_arch`, `riscv…`, `x86…`, inline
//! assembly) only in a file under a folder called `arch` (the kernel's `arch/` with its arch
//! contract, `libs/abi/src/arch/`, libtessera's and each app's `src/arch/`) or in a file itself
//! named `riscv64.rs` or `x86_64.rs`. `firmware/` (RISC-V M-mode firmware), `xtask/` and
//! `tools/` (the host tools that launch each architecture's QEMU) are architecture-specific as a
//! whole and are not scanned.
//!
//! The scan looks at code only: comments (`//`, `///`, `//!`, `/* */`) and the contents of
//! string and character literals are blanked first, so prose may explain what RISC-V or x86_64
//! do. Arch code always has a token outside a literal (`target_arch`, `asm!`, a `riscv::` or
//! `::x86_64::` path), so blanking literals hides none. The words are matched without regard to
//! case; the one hit that is data rather than arch code is the manifest's QEMU machine names
//! (`Machine::RiscvVirt`), which [`ALLOWED_WORDS`] lets through.
//!
//! `tests::no_architecture_named_outside_arch_files` runs the scan over the tree, so `cargo
//! test -p source_tree` (and `cargo xtask test`) fails, listing `file:line`, when code names an
//! architecture elsewhere. Nothing but the tests calls the module, so it is compiled for them
//! only.

#![cfg(test)]

use std::path::{Path, PathBuf};

/// The folders scanned, relative to the repository's root.
const ROOTS: &[&str] = &["kernel", "libs", "userland", "stretch_drivers"];

/// What names an architecture in code (matched without regard to case).
const WORDS: &[&str] = &["target_arch", "riscv", "x86", "asm!"];

/// Identifiers that contain a word but name data, not an architecture's code: the QEMU
/// machines a manifest names (`libs/manifest`'s `Machine` enum).
const ALLOWED_WORDS: &[&str] = &["RiscvVirt"];

/// Whether the file at `path` (relative to the repository's root, `/`-separated) may name an
/// architecture: it is under a folder called `arch`, or is itself `riscv64.rs` or `x86_64.rs`,
/// or is part of the firmware or of the host tools (`xtask/`, `tools/`).
fn may_name_arch(path: &str) -> bool {
    let parts: Vec<&str> = path.split('/').collect();
    let (file, folders) = parts.split_last().expect("a path has a file name");
    matches!(*file, "riscv64.rs" | "x86_64.rs")
        || folders.contains(&"arch")
        || matches!(folders.first(), Some(&"firmware" | &"xtask" | &"tools"))
}

/// `src` with comments and the contents of string and character literals replaced by spaces,
/// line breaks kept (so line numbers stay). Block comments nest, as in Rust; raw strings
/// (`r"…"`, `r#"…"#`) and byte strings are literals too; a `'` that does not open a character
/// literal is a lifetime's.
fn code_only(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let blank = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    let mut i = 0;
    while i < c.len() {
        let next = c.get(i + 1).copied();
        if c[i] == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                blank(&mut out, c[i]);
                i += 1;
            }
        } else if c[i] == '/' && next == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
        } else if c[i] == 'r'
            && matches!(next, Some('"' | '#'))
            && (i == 0 || !(c[i - 1].is_alphanumeric() || c[i - 1] == '_'))
        {
            // A raw string: r, hashes, a quote; it ends at a quote and as many hashes.
            let mut j = i + 1;
            while c.get(j) == Some(&'#') {
                j += 1;
            }
            if c.get(j) != Some(&'"') {
                out.push(c[i]);
                i += 1;
                continue;
            }
            let hashes = j - i - 1;
            c[i..=j].iter().for_each(|&ch| out.push(ch));
            i = j + 1;
            while i < c.len() {
                if c[i] == '"' && (1..=hashes).all(|k| c.get(i + k) == Some(&'#')) {
                    c[i..=i + hashes].iter().for_each(|&ch| out.push(ch));
                    i += hashes + 1;
                    break;
                }
                blank(&mut out, c[i]);
                i += 1;
            }
        } else if c[i] == '"' {
            out.push('"');
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' && i + 1 < c.len() {
                    blank(&mut out, c[i]);
                    i += 1;
                }
                blank(&mut out, c[i]);
                i += 1;
            }
            if i < c.len() {
                out.push('"');
                i += 1;
            }
        } else if c[i] == '\'' && (next == Some('\\') || c.get(i + 2) == Some(&'\'')) {
            // A character literal ('x' or an escape); otherwise the quote starts a lifetime.
            out.push('\'');
            i += 1;
            while i < c.len() && c[i] != '\'' {
                if c[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < c.len() {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
            if i < c.len() {
                out.push('\'');
                i += 1;
            }
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// The lines of `src` (1-based) whose code names an architecture, with the line as written.
fn arch_lines(src: &str) -> Vec<(usize, String)> {
    let code = code_only(src);
    let mut found = Vec::new();
    for (n, (line, written)) in code.lines().zip(src.lines()).enumerate() {
        let mut cleaned = line.to_string();
        for allowed in ALLOWED_WORDS {
            cleaned = cleaned.replace(allowed, "");
        }
        let lower = cleaned.to_lowercase();
        if WORDS.iter().any(|w| lower.contains(w)) {
            found.push((n + 1, written.trim().to_string()));
        }
    }
    found
}

/// Every `.rs` file under `dir`, skipping `target` folders.
fn rust_files(dir: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        if path.is_dir() {
            if entry.file_name() != "target" {
                rust_files(&path, files);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

/// `file:line: code` for every line of the scanned folders under `root` that names an
/// architecture outside the files allowed to.
fn offences(root: &Path) -> Vec<String> {
    let mut files = Vec::new();
    for dir in ROOTS {
        rust_files(&root.join(dir), &mut files);
    }
    files.sort();
    let mut found = Vec::new();
    for file in files {
        let rel = file.strip_prefix(root).expect("scanned under the root");
        let rel = rel.to_string_lossy().replace('\\', "/");
        if may_name_arch(&rel) {
            continue;
        }
        let src = std::fs::read_to_string(&file).expect("a readable source file");
        for (line, code) in arch_lines(&src) {
            found.push(format!("{rel}:{line}: {code}"));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_architecture_named_outside_arch_files() {
        let root = tool_base::util::root();
        let scanned: usize = ROOTS.iter().filter(|d| root.join(d).is_dir()).count();
        assert_eq!(scanned, ROOTS.len(), "a scanned folder is missing");
        let found = offences(&root);
        assert!(
            found.is_empty(),
            "code names an architecture outside `arch` folders and `riscv64.rs`/`x86_64.rs` \
             files (move it into the architecture's files or behind the arch contract):\n{}",
            found.join("\n")
        );
    }

    #[test]
    fn arch_code_is_flagged() {
        let src = "fn a() {}\n\
                   #[cfg(target_arch = \"riscv64\")]\n\
                   use riscv::register::satp;\n\
                   let cr3 = ::x86_64::registers::control::Cr3::read();\n\
                   unsafe { core::arch::asm!(\"ud2\") }\n\
                   global_asm!(include_str!(\"entry.S\"));\n\
                   const A: bool = cfg!(TARGET_ARCH = \"x\");\n";
        let lines: Vec<usize> = arch_lines(src).into_iter().map(|(n, _)| n).collect();
        assert_eq!(lines, [2, 3, 4, 5, 6, 7]);
    }

    #[test]
    fn comments_and_literals_are_not_code() {
        let src = "//! Runs on RISC-V and x86_64.\n\
                   /// `riscv::register` is used by the arch.\n\
                   let a = 1; // on x86_64 this is rax\n\
                   /* x86 /* nested riscv */ still a comment: asm! */ let b = 2;\n\
                   let s = \"QEMU virt (riscv64), x86_64 \\\" asm!\";\n\
                   let r = r#\"target_arch \"x86\" \"#;\n\
                   let q = '\"'; let t: &'static str = \"x86\";\n\
                   Machine::RiscvVirt => 1,\n";
        assert_eq!(arch_lines(src), []);
        // Line numbers survive blanking a block comment over several lines.
        let src = "/* riscv\nx86\n*/\nlet x = riscv::register::sstatus::read();\n";
        assert_eq!(arch_lines(src).iter().map(|l| l.0).collect::<Vec<_>>(), [4]);
    }

    #[test]
    fn only_arch_files_may_name_an_architecture() {
        for allowed in [
            "kernel/src/arch/contract.rs",
            "kernel/src/arch/x86_64/tests/user.rs",
            "libs/abi/src/arch/mod.rs",
            "userland/apps/faulty/src/arch/riscv64.rs",
            "userland/libtessera/src/arch/x86_64.rs",
            "libs/anything/src/x86_64.rs",
            "firmware/src/main.rs",
        ] {
            assert!(may_name_arch(allowed), "{allowed}");
        }
        for refused in [
            "kernel/src/tests/mod.rs",
            "kernel/src/main.rs",
            "libs/abi/src/lib.rs",
            "userland/apps/fpcheck/src/main.rs",
            "stretch_drivers/nailed/src/lib.rs",
            "kernel/src/archive.rs",
            "kernel/src/x86_64_helpers.rs",
        ] {
            assert!(!may_name_arch(refused), "{refused}");
        }
    }
}
