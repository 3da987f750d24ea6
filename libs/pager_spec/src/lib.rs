//! A paged stretch's configuration as plain data, apart from the pager that runs it: which of
//! the thesis's local hierarchies ([`Hierarchy`], with its sizes and the compressed pool's
//! [`Codec`]), which backing store below them ([`Store`]: the local disk or remote memory, and
//! its mirror; with the hierarchy, one of the thesis's ten [`Combination`]s), which
//! replacement policy ([`PolicyKind`]), and the one line of text that carries
//! them from a manifest to the paging domain ([`PagerSpec`], with its parser). The manifest's
//! front end checks a `pager = { ... }` table with this parser, the same one the domain uses,
//! without building the pager; the pager (`pager/`) builds a hierarchy and a policy from these
//! values.
//!
//! The crate is `no_std` (with `alloc`) and has no `unsafe` code.

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

mod hierarchy;
pub mod spec;
pub mod store;

pub use hierarchy::{Codec, Hierarchy, PolicyKind};
pub use spec::{PagerSpec, SpecError};
pub use store::{Backing, Combination, Endpoint, Mirror, Qos, RemoteSpec, Store};
