//! The core's reports: defmt records in the kernel (feature `defmt`), nothing on the host,
//! where the arguments are still evaluated (so that a report's inputs stay used) and dropped.

/// A value a report may show: `defmt::Format` in the kernel, anything on the host.
#[cfg(feature = "defmt")]
pub trait Report: defmt::Format {}
#[cfg(feature = "defmt")]
impl<T: defmt::Format + ?Sized> Report for T {}
/// A value a report may show: `defmt::Format` in the kernel, anything on the host.
#[cfg(not(feature = "defmt"))]
pub trait Report {}
#[cfg(not(feature = "defmt"))]
impl<T: ?Sized> Report for T {}

/// An `info` record.
#[cfg(feature = "defmt")]
macro_rules! info { ($($t:tt)*) => { defmt::info!($($t)*) } }
/// A `warn` record.
#[cfg(feature = "defmt")]
macro_rules! warn { ($($t:tt)*) => { defmt::warn!($($t)*) } }
/// An `error` record.
#[cfg(feature = "defmt")]
macro_rules! error { ($($t:tt)*) => { defmt::error!($($t)*) } }

/// An `info` record.
#[cfg(not(feature = "defmt"))]
macro_rules! info { ($fmt:literal $(, $arg:expr)* $(,)?) => {{ $( let _ = &$arg; )* }} }
/// A `warn` record.
#[cfg(not(feature = "defmt"))]
macro_rules! warn { ($fmt:literal $(, $arg:expr)* $(,)?) => {{ $( let _ = &$arg; )* }} }
/// An `error` record.
#[cfg(not(feature = "defmt"))]
macro_rules! error { ($fmt:literal $(, $arg:expr)* $(,)?) => {{ $( let _ = &$arg; )* }} }
