//! Device trees for tests (RISC-V): QEMU's own, dumped for a boot's exact settings
//! (`-machine virt,dumpdtb=FILE`), with changes a test asks for, compiled with `dtc` and passed
//! back to QEMU with `-dtb`: more `/reserved-memory` children than the kernel once kept, entries
//! of the memory reservation block, RAM where QEMU has none.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use tool_base::util;

/// What a test changes in QEMU's device tree. Ranges are `(start, size)` in bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DtbChanges {
    /// Names the compiled file (`target/dtb/NAME.dtb`).
    pub name: String,
    /// Children added to `/reserved-memory` (created if missing), one range each.
    pub reserved: Vec<(u64, u64)>,
    /// Entries added to the memory reservation block (`/memreserve/`).
    pub memreserve: Vec<(u64, u64)>,
    /// `memory@...` nodes added (RAM the machine does not have: only for what the kernel must
    /// leave out).
    pub memory: Vec<(u64, u64)>,
}

/// Where the device tree of `changes` is compiled to.
pub fn path(changes: &DtbChanges) -> PathBuf {
    util::target_dir().join("dtb").join(format!("{}.dtb", changes.name))
}

/// `(start, size)` as two pairs of 32-bit cells (`#address-cells = #size-cells = 2`).
fn cells(start: u64, size: u64) -> String {
    format!(
        "{:#x} {:#x} {:#x} {:#x}",
        start >> 32,
        start & 0xffff_ffff,
        size >> 32,
        size & 0xffff_ffff
    )
}

/// `dts` (the source `dtc` decompiles a device tree to) with `changes` made.
pub fn edit(dts: &str, changes: &DtbChanges) -> Result<String> {
    let Some(header_end) = dts.find("/dts-v1/;\n").map(|i| i + "/dts-v1/;\n".len()) else {
        bail!("no /dts-v1/ header in the decompiled device tree");
    };
    let mut out = dts[..header_end].to_string();
    for (start, size) in &changes.memreserve {
        out.push_str(&format!("/memreserve/ {start:#x} {size:#x};\n"));
    }
    let mut body = dts[header_end..].to_string();
    let mut nodes = String::new();
    for (start, size) in &changes.memory {
        nodes.push_str(&format!(
            "\n\tmemory@{start:x} {{\n\t\tdevice_type = \"memory\";\n\t\treg = <{}>;\n\t}};\n",
            cells(*start, *size)
        ));
    }
    let children: String = changes
        .reserved
        .iter()
        .map(|(start, size)| {
            format!(
                "\n\t\ttest@{start:x} {{\n\t\t\treg = <{}>;\n\t\t\tno-map;\n\t\t}};\n",
                cells(*start, *size)
            )
        })
        .collect();
    if !children.is_empty() {
        match body.find("\treserved-memory {\n") {
            Some(at) => {
                let open = at + "\treserved-memory {\n".len();
                // Children go last in the node: after its properties and existing children.
                let close = open + body[open..].find("\n\t};").context("unterminated reserved-memory")?;
                body.insert_str(close + 1, &children);
            }
            None => nodes.push_str(&format!(
                "\n\treserved-memory {{\n\t\t#address-cells = <0x02>;\n\t\t#size-cells = <0x02>;\n\t\tranges;\n{children}\t}};\n"
            )),
        }
    }
    // The root node ends with the last `};` of the file.
    let Some(root_end) = body.rfind("};") else { bail!("no root node in the device tree") };
    body.insert_str(root_end, &nodes);
    out.push_str(&body);
    Ok(out)
}

/// Dumps QEMU's device tree with the command `dump` gives for a file (the boot's settings,
/// without `-dtb`), makes `changes` and compiles the result to [`path`].
pub fn build(dump: impl FnOnce(&Path) -> Command, changes: &DtbChanges) -> Result<PathBuf> {
    let out = path(changes);
    let dir = out.parent().expect("the dtb path has a directory");
    fs::create_dir_all(dir)?;
    let dumped = dir.join(format!("{}.qemu.dtb", changes.name));
    let mut dump = dump(&dumped);
    util::output(&mut dump).context("dumping QEMU's device tree")?;
    let dts = util::output(Command::new("dtc").args(["-q", "-I", "dtb", "-O", "dts"]).arg(&dumped))
        .context("decompiling QEMU's device tree (dtc, from the device-tree-compiler package)")?;
    let edited = edit(&dts, changes)?;
    let source = dir.join(format!("{}.dts", changes.name));
    fs::write(&source, edited)?;
    compile(&source, &out)?;
    Ok(out)
}

fn compile(source: &Path, out: &Path) -> Result<()> {
    util::output(
        Command::new("dtc").args(["-q", "-I", "dts", "-O", "dtb", "-o"]).arg(out).arg(source),
    )
    .with_context(|| format!("compiling {}", source.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DTS: &str = "/dts-v1/;\n\n/ {\n\t#address-cells = <0x02>;\n\tchosen {\n\t\tbootargs = \"x\";\n\t};\n\n\tmemory@80000000 {\n\t\tdevice_type = \"memory\";\n\t\treg = <0x00 0x80000000 0x00 0x8000000>;\n\t};\n};\n";

    #[test]
    fn changes_land_in_the_source() {
        let changes = DtbChanges {
            name: "t".into(),
            reserved: vec![(0x8040_0000, 0x1_0000), (0x1_2345_6000, 0x1000)],
            memreserve: vec![(0x8700_0000, 0x2000)],
            memory: vec![(0x10_0000_0000, 0x1000_0000)],
        };
        let out = edit(DTS, &changes).unwrap();
        assert!(out.starts_with("/dts-v1/;\n/memreserve/ 0x87000000 0x2000;\n"), "{out}");
        assert!(
            out.contains(
                "\ttest@80400000 {\n\t\t\treg = <0x0 0x80400000 0x0 0x10000>;\n\t\t\tno-map;"
            ),
            "{out}"
        );
        assert!(out.contains("reg = <0x1 0x23456000 0x0 0x1000>;"), "{out}");
        assert!(out.contains("\tmemory@1000000000 {\n\t\tdevice_type = \"memory\";\n\t\treg = <0x10 0x0 0x0 0x10000000>;"), "{out}");
        assert!(out.contains("\treserved-memory {\n\t\t#address-cells = <0x02>;"), "{out}");
        // Everything added sits inside the root node, which still closes the file.
        assert!(out.trim_end().ends_with("};\n};") || out.trim_end().ends_with("};"), "{out}");
        let root_close = out.rfind("};").unwrap();
        assert!(out.find("reserved-memory").unwrap() < root_close);
    }

    #[test]
    fn an_existing_reserved_memory_node_gets_the_children() {
        let dts = DTS.replace(
            "\tchosen {",
            "\treserved-memory {\n\t\t#address-cells = <0x02>;\n\t\t#size-cells = <0x02>;\n\t\tranges;\n\n\t\tmmode@80000000 {\n\t\t\treg = <0x00 0x80000000 0x00 0x40000>;\n\t\t};\n\t};\n\n\tchosen {",
        );
        let changes = DtbChanges {
            name: "t".into(),
            reserved: vec![(0x8040_0000, 0x1000)],
            ..Default::default()
        };
        let out = edit(&dts, &changes).unwrap();
        assert_eq!(out.matches("reserved-memory {").count(), 1, "{out}");
        let node = out.find("reserved-memory {").unwrap();
        let mmode = out.find("mmode@80000000").unwrap();
        let added = out.find("test@80400000").unwrap();
        let chosen = out.find("chosen {").unwrap();
        assert!(node < mmode && mmode < added && added < chosen, "{out}");
    }

    #[test]
    fn a_source_without_header_is_refused() {
        assert!(edit("/ { };", &DtbChanges::default()).is_err());
    }
}
