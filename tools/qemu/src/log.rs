//! Decoding the kernel's serial output: defmt frames, with plain text between them.
//!
//! The serial line carries rzCOBS-encoded defmt frames, each ending in a zero byte. Anything
//! else on the line (the firmware's banner, text written through the SBI console) arrives as a
//! chunk that does not decode; chunks that are mostly printable are shown as text lines. Every
//! `pc=0x...` in a message is followed by the symbol it falls in, read from the kernel ELF.

use std::fmt;
use std::path::Path;

use anyhow::{Context, Result};
use defmt_decoder::{DecodeError, Table};
use object::{Object, ObjectSection, ObjectSymbol, SymbolKind};

/// One line of the decoded log.
#[derive(Clone, Debug)]
pub struct LogLine {
    /// `TRACE`..`ERROR` for defmt frames, `TEXT` for plain text.
    pub level: String,
    /// The timestamp as the kernel formats it (seconds with microseconds), if any.
    pub timestamp: Option<String>,
    /// The message, with symbols added.
    pub message: String,
}

impl fmt::Display for LogLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.timestamp {
            Some(t) => write!(f, "{t:>12} {:<5} {}", self.level, self.message),
            None => write!(f, "{:>12} {:<5} {}", "", self.level, self.message),
        }
    }
}

/// Maps addresses in the kernel image to function names.
pub struct Symbols {
    /// (start, size, demangled name), sorted by start.
    funcs: Vec<(u64, u64, String)>,
}

impl Symbols {
    fn parse(elf: &[u8]) -> Result<Self> {
        let file = object::File::parse(elf).context("parsing an ELF for its symbols")?;
        let is_code = |s: &object::Symbol<'_, '_>| {
            s.section_index()
                .and_then(|i| file.section_by_index(i).ok())
                .is_some_and(|sec| sec.kind() == object::SectionKind::Text)
        };
        let mut funcs: Vec<_> = file
            .symbols()
            .filter(is_code)
            // Functions, and the untyped labels of hand-written assembly (entry points).
            .filter(|s| {
                matches!(s.kind(), SymbolKind::Text | SymbolKind::Label | SymbolKind::Unknown)
            })
            .filter_map(|s| {
                let name = s.name().ok()?;
                (!name.is_empty() && !name.starts_with(".L") && !name.starts_with('$')).then(|| {
                    (s.address(), s.size(), format!("{:#}", rustc_demangle::demangle(name)))
                })
            })
            .collect();
        // Sized symbols first among equals, so that a function wins over a label at its start.
        funcs.sort_by_key(|f| (f.0, f.1 == 0, f.2.starts_with("__")));
        funcs.dedup_by_key(|f| f.0);
        Ok(Symbols { funcs })
    }

    /// `name+0xoff` for `addr`, if it lies in a known function.
    pub fn lookup(&self, addr: u64) -> Option<String> {
        let i = self.funcs.partition_point(|f| f.0 <= addr).checked_sub(1)?;
        let (start, size, name) = &self.funcs[i];
        let off = addr - start;
        (*size == 0 || off < *size).then(|| format!("{name}+{off:#x}"))
    }

    /// Adds ` <symbol>` after each `pc=0x...` (an instruction address) and `ret=0x...` (a return
    /// address, looked up one byte earlier so that a call at the very end of a function names
    /// that function) in `message`.
    pub fn annotate(&self, message: &str) -> String {
        let mut out = String::with_capacity(message.len() + 32);
        let mut rest = message;
        loop {
            let next = [("pc=0x", 0u64), ("ret=0x", 1)]
                .into_iter()
                .filter_map(|(tag, back)| rest.find(tag).map(|i| (i + tag.len(), back)))
                .min();
            let Some((hex_start, back)) = next else { break };
            let hex_len = rest[hex_start..]
                .find(|c: char| !c.is_ascii_hexdigit())
                .unwrap_or(rest.len() - hex_start);
            let end = hex_start + hex_len;
            out.push_str(&rest[..end]);
            if let Ok(addr) = u64::from_str_radix(&rest[hex_start..end], 16)
                && let Some(sym) = self.lookup(addr.saturating_sub(back))
            {
                out.push_str(&format!(" <{sym}>"));
            }
            rest = &rest[end..];
        }
        out.push_str(rest);
        out
    }
}

/// The kernel's defmt table and symbols, loaded from its ELF.
pub struct Kernel {
    table: Table,
    symbols: Symbols,
}

impl Kernel {
    /// Reads `elf`.
    pub fn load(elf: &Path) -> Result<Self> {
        let bytes = std::fs::read(elf).with_context(|| format!("reading {}", elf.display()))?;
        let table = Table::parse(&bytes)?
            .with_context(|| format!("{} has no .defmt section", elf.display()))?;
        Ok(Kernel { table, symbols: Symbols::parse(&bytes)? })
    }

    /// Adds the symbols of each domain instance: `(base address, app ELF)`; apps are linked at
    /// 0, so their symbols move by the base.
    pub fn add_instances(&mut self, instances: &[(u64, std::path::PathBuf)]) -> Result<()> {
        for (base, elf) in instances {
            let bytes = std::fs::read(elf).with_context(|| format!("reading {}", elf.display()))?;
            let app = Symbols::parse(&bytes)?;
            self.symbols.funcs.extend(app.funcs.into_iter().map(|(a, s, n)| (a + base, s, n)));
        }
        self.symbols.funcs.sort_by_key(|f| (f.0, f.1 == 0, f.2.starts_with("__")));
        self.symbols.funcs.dedup_by_key(|f| f.0);
        Ok(())
    }

    /// A decoder for one boot's serial stream.
    pub fn decoder(&self) -> Decoder<'_> {
        Decoder { kernel: self, stream: self.table.new_stream_decoder(), pending: Vec::new() }
    }
}

/// Turns serial bytes into log lines, incrementally.
pub struct Decoder<'k> {
    kernel: &'k Kernel,
    stream: Box<dyn defmt_decoder::StreamDecoder + Send + Sync + 'k>,
    pending: Vec<u8>,
}

impl Decoder<'_> {
    /// Feeds `bytes`; returns the lines completed by them.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<LogLine> {
        let mut lines = Vec::new();
        for &b in bytes {
            self.pending.push(b);
            if b == 0 {
                let chunk = std::mem::take(&mut self.pending);
                self.chunk(&chunk, &mut lines);
            }
        }
        lines
    }

    /// Flushes what is left at the end of the stream (text without a terminating zero).
    pub fn finish(&mut self) -> Vec<LogLine> {
        let mut lines = Vec::new();
        let rest = std::mem::take(&mut self.pending);
        text_lines(&rest, &mut lines);
        lines
    }

    fn chunk(&mut self, chunk: &[u8], lines: &mut Vec<LogLine>) {
        self.stream.received(chunk);
        match self.stream.decode() {
            Ok(frame) => {
                let message = self.kernel.symbols.annotate(&frame.display_message().to_string());
                lines.push(LogLine {
                    level: frame
                        .level()
                        .map_or("PRINT".into(), |l| format!("{l:?}").to_uppercase()),
                    timestamp: frame.display_timestamp().map(|t| t.to_string()),
                    message,
                });
            }
            Err(DecodeError::UnexpectedEof) => {}
            Err(DecodeError::Malformed) => text_lines(&chunk[..chunk.len() - 1], lines),
        }
    }
}

/// Splits printable text into lines; binary garbage is summarised.
fn text_lines(bytes: &[u8], lines: &mut Vec<LogLine>) {
    if bytes.is_empty() {
        return;
    }
    let printable =
        bytes.iter().filter(|b| b.is_ascii_graphic() || b.is_ascii_whitespace()).count();
    if printable * 10 < bytes.len() * 9 {
        lines.push(LogLine {
            level: "RAW".into(),
            timestamp: None,
            message: format!("({} undecodable bytes)", bytes.len()),
        });
        return;
    }
    for line in String::from_utf8_lossy(bytes).split(['\n', '\r']) {
        if !line.trim().is_empty() {
            lines.push(LogLine {
                level: "TEXT".into(),
                timestamp: None,
                message: line.to_string(),
            });
        }
    }
}

// ANCHOR: field
/// The value of `key=` in `line` (up to the next space).
pub fn field(line: &str, key: &str) -> Option<u64> {
    let pattern = format!("{key}=");
    let at = line.split(' ').find_map(|w| w.strip_prefix(pattern.as_str()))?;
    at.parse().ok()
}
// ANCHOR_END: field

#[cfg(test)]
mod tests {
    use super::*;

    fn symbols() -> Symbols {
        Symbols {
            funcs: vec![
                (0x1000, 0x40, "kernel::a".into()),
                (0x1040, 0x20, "kernel::b".into()),
                (0x2000, 0, "_start".into()),
            ],
        }
    }

    #[test]
    fn pcs_are_annotated_with_their_function() {
        let s = symbols();
        assert_eq!(
            s.annotate("trap at pc=0x1004, done"),
            "trap at pc=0x1004 <kernel::a+0x4>, done"
        );
        assert_eq!(s.annotate("pc=0x1040"), "pc=0x1040 <kernel::b+0x0>");
        // Beyond a sized function and before the next symbol: nothing to say.
        assert_eq!(s.annotate("pc=0x1070"), "pc=0x1070");
        // An unsized label covers what follows it.
        assert_eq!(s.annotate("pc=0x2010"), "pc=0x2010 <_start+0x10>");
        assert_eq!(s.annotate("no addresses here"), "no addresses here");
    }

    #[test]
    fn return_addresses_name_the_calling_function() {
        let s = symbols();
        // A call at the very end of `a` returns to the first byte of `b`.
        assert_eq!(s.annotate("#1 ret=0x1040"), "#1 ret=0x1040 <kernel::a+0x3f>");
        assert_eq!(
            s.annotate("ret=0x1010 pc=0x1041"),
            "ret=0x1010 <kernel::a+0xf> pc=0x1041 <kernel::b+0x1>"
        );
    }

    #[test]
    fn text_between_frames_becomes_lines_and_binary_is_summarised() {
        let mut lines = Vec::new();
        text_lines(b"OpenSBI v1.1\r\n\r\nPlatform: virt\n", &mut lines);
        let text: Vec<_> = lines.iter().map(|l| (l.level.as_str(), l.message.as_str())).collect();
        assert_eq!(text, [("TEXT", "OpenSBI v1.1"), ("TEXT", "Platform: virt")]);
        lines.clear();
        text_lines(&[0x91, 0x02, 0xff, 0x80, 0x13, 0x07], &mut lines);
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].level, "RAW");
        assert_eq!(lines[0].message, "(6 undecodable bytes)");
    }
}
