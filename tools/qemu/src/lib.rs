//! Booting Tessera in QEMU from the host and reading what it says: the QEMU command line of a
//! boot and its outcome ([`qemu`]), the kernel's defmt log decoded and symbolized ([`log`]), the
//! typed records it prints (CPU periods and spin reports, [`cpu`]; disk periods, [`disk_trace`];
//! their CSV, JSON and SVG forms, [`records`], [`cpu_trace`], [`plot`]), the ERROR and WARN lines
//! a test expects ([`expected`]), device-tree changes ([`dtb`]), gdb scripts ([`gdb`]), the
//! interactive `cargo xtask run` with its verdict ([`run`]) and its timeline in the Chrome trace
//! event format ([`timeline`]).
//!
//! Invariants: a boot's log is read from the decoded defmt frames, never from QEMU's raw
//! output; every boot has a timeout; an ERROR or WARN line that nobody expected fails the run
//! that checks it ([`expected`]). This crate builds on `system_image` (what to boot) and
//! `tool_base`, and knows nothing of the suites or benches that use it.

pub mod cpu;
pub mod cpu_trace;
pub mod disk_trace;
pub mod dtb;
pub mod expected;
pub mod gdb;
pub mod log;
pub mod plot;
pub mod qemu;
pub mod records;
pub mod run;
pub mod timeline;
