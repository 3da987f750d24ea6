//! Tools that read or write Tessera's source tree rather than boot it: the scaffold of a new
//! stretch driver ([`new_driver`], `cargo xtask new-driver`), the book built from `docs/` and
//! its checks ([`book`], `cargo xtask book`, the suite's `host::book`), and the tree's lints,
//! which run as this crate's unit tests: every code block a doc includes matches its source
//! (`doc_includes`, `UPDATE_DOCS=1 cargo test -p source_tree doc_includes` rewrites the
//! blocks), the manifest reference is current with the manifest parser's definitions
//! (`manifest_reference`, rewritten likewise), and only architecture files name an
//! architecture (`arch_names`).
//!
//! Invariants: the lints read the tree and change nothing unless asked (`UPDATE_DOCS`); a lint
//! fails listing every offending `file:line`, not only the first; paths are relative to the
//! workspace root (`tool_base::util::root`), so the tests pass from any directory.

mod arch_names;
pub mod book;
mod doc_includes;
mod manifest_reference;
pub mod new_driver;
