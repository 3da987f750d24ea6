//! The TOML front end (feature `toml`): parse, validate and locate errors by line and key.

use alloc::borrow::ToOwned;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;
use core::ops::Range;
use std::path::Path;

use serde::Deserialize;
use serde::de::{self, Visitor};
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::check::Field;
use crate::duration::unit_of;
use crate::{
    Bytes, ChannelSpec, CpuSpec, DEFAULT_ADDRESS_SPACE, DEFAULT_SLOT_SIZE, DEFAULT_SLOTS,
    DOMAIN_FIXED_FRAMES, DomainSpec, DurationError, GUARD_BYTES, MAX_CHANNELS_PER_DOMAIN, Manifest,
    PAGE_SIZE, Problem, ProblemKind, parse_duration, parse_size,
};

/// A manifest the front end rejected: where, and why.
///
/// Displays as `FILE:LINE: KEY: REASON`, leaving out the line or the key when it is not known
/// (an unreadable file has neither; a TOML syntax error has no key).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestError {
    /// The file name as given to [`parse`] (or the path given to [`parse_file`]).
    pub file: String,
    /// The 1-based line of the offending key or value.
    pub line: Option<usize>,
    /// The key path, e.g. `domain[1].memory.guaranteed`.
    pub key: Option<String>,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if let Some(key) = &self.key {
            write!(f, ": {key}")?;
        }
        write!(f, ": {}", self.reason)
    }
}

impl std::error::Error for ManifestError {}

impl ManifestError {
    /// An error about `key` of the manifest `text` (read from `file`), on the line where the
    /// key is written, for checks a caller makes beyond [`parse`]'s own (the host tool checks
    /// `system.memory` against the host's memory). `key` is a key path as in other errors:
    /// dotted keys, with `[i]` for the i-th table of an array (`domain[1].memory.guaranteed`).
    /// The line is left out if `text` does not hold the key.
    pub fn at_key(file: &str, text: &str, key: &str, reason: String) -> ManifestError {
        let at = DeTable::parse(text)
            .ok()
            .and_then(|doc| key_span(&DeValue::Table(doc.get_ref().clone()), key))
            .map(|span| span.start);
        ManifestError::at_offset(file, text, at, Some(key.to_owned()), reason)
    }

    /// An error at byte offset `at` of `text` (read from `file`; the line is left out without
    /// an offset), about `key` if known. Other TOML files of the project report their errors
    /// this way too (the host tool's benchmark baseline).
    pub fn at_offset(
        file: &str,
        text: &str,
        at: Option<usize>,
        key: Option<String>,
        reason: String,
    ) -> ManifestError {
        ManifestError { file: file.to_owned(), line: at.map(|at| line_of(text, at)), key, reason }
    }
}

/// Where the key at `path` (as [`ManifestError::at_key`] takes it) is written in `root`.
fn key_span(root: &DeValue<'_>, path: &str) -> Option<Range<usize>> {
    let mut value = root;
    let mut span = None;
    for part in path.split('.') {
        let (name, index) = match part.split_once('[') {
            Some((name, rest)) => (name, Some(rest.strip_suffix(']')?.parse::<usize>().ok()?)),
            None => (part, None),
        };
        let DeValue::Table(table) = value else { return None };
        let (k, v) = table.get_key_value(name)?;
        span = Some(k.span());
        value = v.get_ref();
        if let Some(i) = index {
            let DeValue::Array(array) = value else { return None };
            let item = array.get(i)?;
            span = Some(item.span());
            value = item.get_ref();
        }
    }
    span
}

/// Reads and parses the manifest at `path`; see [`parse`].
pub fn parse_file(path: &Path, known_apps: &[&str]) -> Result<Manifest, ManifestError> {
    let file = path.display().to_string();
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) => {
            return Err(ManifestError { file, line: None, key: None, reason: format!("{e}") });
        }
    };
    match core::str::from_utf8(&bytes) {
        Ok(text) => parse(&file, text, known_apps),
        Err(e) => {
            let good = &bytes[..e.valid_up_to()];
            let line = good.iter().filter(|&&b| b == b'\n').count() + 1;
            let column = good.len() - good.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            Err(ManifestError {
                file,
                line: Some(line),
                key: None,
                reason: format!(
                    "not valid UTF-8: byte {:#04x} at column {}",
                    bytes[e.valid_up_to()],
                    column + 1
                ),
            })
        }
    }
}

/// Parses and validates the TOML manifest `text` (named `file_name` in errors): the schema of
/// the [crate documentation](crate), then [`Manifest::check`] (with a channel's `from` or `to`
/// that names no domain reported as such), then that every domain's app is one of
/// `known_apps`. Returns the first error found.
pub fn parse(file_name: &str, text: &str, known_apps: &[&str]) -> Result<Manifest, ManifestError> {
    let at = |span: Option<Range<usize>>, key: Option<String>, reason: String| ManifestError {
        file: file_name.to_owned(),
        line: span.map(|s| line_of(text, s.start)),
        key,
        reason,
    };
    let doc = DeTable::parse(text).map_err(|e| {
        let mut reason = format!("TOML syntax error: {}", e.message());
        // Name the key a duplicate-key error points at.
        if e.message() == "duplicate key"
            && let Some(name) = e.span().and_then(|sp| text.get(sp)).map(str::trim)
            && !name.is_empty()
        {
            reason = format!("TOML syntax error: duplicate key `{name}`");
        }
        at(e.span(), None, reason)
    })?;
    let root = DeValue::Table(doc.get_ref().clone());
    let raw = RawManifest::deserialize(toml::de::Deserializer::from(doc)).map_err(|e| {
        let mut key = e.span().map(|s| key_path(&root, s.start)).unwrap_or_default();
        if let Some(field) =
            e.message().strip_prefix("missing field `").and_then(|m| m.strip_suffix('`'))
        {
            // `system` is the only required top-level key: when the document lacks it, it is
            // the key, whatever table the error's span points into.
            let top_missing = field == "system"
                && matches!(&root, DeValue::Table(t) if !t.contains_key("system"));
            if top_missing {
                key.clear();
            }
            push_key(&mut key, field);
        }
        at(e.span(), (!key.is_empty()).then_some(key), e.message().to_owned())
    })?;

    let (manifest, spans) = raw.lower(&root);
    if let Err(problem) = manifest.check() {
        let (span, key) = spans.locate(&problem, &manifest);
        let reason = spans.reason(&problem, &manifest, text);
        return Err(at(Some(span), Some(key), reason));
    }
    for (i, d) in manifest.domains.iter().enumerate() {
        if !known_apps.contains(&d.app.as_str()) {
            let reason = format!("unknown app {:?} (known apps: {})", d.app, known_apps.join(", "));
            return Err(at(
                Some(spans.domains[i].app.clone()),
                Some(format!("domain[{i}].app")),
                reason,
            ));
        }
    }
    Ok(manifest)
}

/// The 1-based line of byte offset `pos` in `text`.
fn line_of(text: &str, pos: usize) -> usize {
    let pos = pos.min(text.len());
    text.as_bytes()[..pos].iter().filter(|&&b| b == b'\n').count() + 1
}

/// Appends `key` to a dotted key path, quoting it unless it is a bare TOML key.
fn push_key(path: &mut String, key: &str) {
    if !path.is_empty() {
        path.push('.');
    }
    let bare =
        !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if bare {
        path.push_str(key);
    } else {
        path.push_str(&format!("{key:?}"));
    }
}

/// The path of the deepest key or value whose span contains `pos` (empty if none does).
///
/// Tables' spans cover only their headers, so every child is searched, not only those of
/// tables whose span contains `pos`.
fn key_path(root: &DeValue<'_>, pos: usize) -> String {
    fn contains(span: &Range<usize>, pos: usize) -> bool {
        span.contains(&pos) || (span.is_empty() && span.start == pos)
    }
    fn find(value: &DeValue<'_>, pos: usize, path: &mut String) -> bool {
        let len = path.len();
        match value {
            DeValue::Table(table) => {
                for (k, v) in table.iter() {
                    push_key(path, k.get_ref());
                    if find(v.get_ref(), pos, path)
                        || contains(&k.span(), pos)
                        || contains(&v.span(), pos)
                    {
                        return true;
                    }
                    path.truncate(len);
                }
            }
            DeValue::Array(array) => {
                for (i, v) in array.iter().enumerate() {
                    path.push_str(&format!("[{i}]"));
                    if find(v.get_ref(), pos, path) || contains(&v.span(), pos) {
                        return true;
                    }
                    path.truncate(len);
                }
            }
            _ => {}
        }
        false
    }
    let mut path = String::new();
    find(root, pos, &mut path);
    path
}

/// A size in bytes as written in TOML: `"256K"`, `"128M"`, `"1G"`, `"4096"` or `4096`.
struct Size(u64);

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SizeVisitor;
        impl Visitor<'_> for SizeVisitor {
            type Value = Size;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a size such as \"256K\", \"128M\", \"1G\" or a number of bytes")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Size, E> {
                parse_size(s).map(Size).map_err(|e| E::custom(format!("invalid size {s:?}: {e}")))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Size, E> {
                Ok(Size(n))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Size, E> {
                u64::try_from(n)
                    .map(Size)
                    .map_err(|_| E::custom(format!("invalid size {n}: negative size")))
            }
            fn visit_f64<E: de::Error>(self, n: f64) -> Result<Size, E> {
                Err(E::custom(format!(
                    "invalid size {n}: fractional size (write sizes as strings with a unit, \
                     e.g. \"1536K\" for 1.5M)"
                )))
            }
        }
        deserializer.deserialize_any(SizeVisitor)
    }
}

/// A duration in nanoseconds as written in TOML: a string such as `"10ms"` or `"500us"`.
struct Duration(u64);

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct DurationVisitor;
        impl Visitor<'_> for DurationVisitor {
            type Value = Duration;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration such as \"10ms\", \"500us\" or \"1s\"")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Duration, E> {
                parse_duration(s).map(Duration).map_err(|e| {
                    E::custom(match e {
                        DurationError::BadUnit => format!(
                            "invalid duration {s:?}: unknown unit {:?} (use ns, us, ms or s)",
                            unit_of(s)
                        ),
                        _ => format!("invalid duration {s:?}: {e}"),
                    })
                })
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Duration, E> {
                Err(E::custom(format!(
                    "invalid duration {n}: {} (write it as a string, e.g. \"{n}ms\")",
                    DurationError::MissingUnit
                )))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Duration, E> {
                match u64::try_from(n) {
                    Ok(n) => self.visit_u64(n),
                    Err(_) => {
                        Err(E::custom(format!("invalid duration {n}: {}", DurationError::Negative)))
                    }
                }
            }
            fn visit_f64<E: de::Error>(self, n: f64) -> Result<Duration, E> {
                let reason = if n < 0.0 {
                    DurationError::Negative.to_string()
                } else {
                    format!("{}, and no fraction", DurationError::MissingUnit)
                };
                Err(E::custom(format!(
                    "invalid duration {n}: {reason} (write it as a string, e.g. \"1500us\" for \
                     1.5ms)"
                )))
            }
        }
        deserializer.deserialize_any(DurationVisitor)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    system: Spanned<RawSystem>,
    #[serde(default)]
    domain: Vec<Spanned<RawDomain>>,
    #[serde(default)]
    channel: Vec<Spanned<RawChannel>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table [system]")]
struct RawSystem {
    memory: Spanned<Size>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table [[domain]]")]
struct RawDomain {
    name: Spanned<String>,
    app: Spanned<String>,
    args: Option<Spanned<Vec<Spanned<String>>>>,
    cpu: Option<Spanned<RawCpu>>,
    memory: Spanned<RawMemory>,
    expect_failure: Option<bool>,
}

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table such as { period = \"10ms\", slice = \"2ms\", extra = true, \
                 latency = \"1ms\" }"
)]
struct RawCpu {
    period: Spanned<Duration>,
    slice: Spanned<Duration>,
    extra: Option<bool>,
    latency: Option<Spanned<Duration>>,
}

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table such as { guaranteed = \"256K\", optimistic = \"0\", \
                 address_space = \"1G\" }"
)]
struct RawMemory {
    guaranteed: Spanned<Size>,
    optimistic: Option<Spanned<Size>>,
    address_space: Option<Spanned<Size>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table [[channel]]")]
struct RawChannel {
    name: Spanned<String>,
    from: Spanned<String>,
    to: Spanned<String>,
    slots: Option<Spanned<u32>>,
    slot_size: Option<Spanned<SlotSize>>,
}

/// A slot size: a [`Size`] that fits in 32 bits (larger ones break the slot-size rule anyway).
struct SlotSize(u32);

impl<'de> Deserialize<'de> for SlotSize {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let Size(n) = Size::deserialize(deserializer)?;
        u32::try_from(n).map(SlotSize).map_err(|_| {
            de::Error::custom(ProblemKind::SlotSizeInvalid { slot_size: n }.to_string())
        })
    }
}

/// Where each field of a parsed manifest was written, to point errors at it.
struct Spans {
    /// The `domain` key, or the start of the file if there is none.
    domain_key: Range<usize>,
    system_memory: Range<usize>,
    domains: Vec<DomainSpans>,
    /// The `channel` key, or the start of the file if there is none.
    channel_key: Range<usize>,
    channels: Vec<ChannelSpans>,
}

struct ChannelSpans {
    table: Range<usize>,
    name: Range<usize>,
    from: Range<usize>,
    /// The domain name `from` was written as (it may name no domain).
    from_name: String,
    to: Range<usize>,
    /// The domain name `to` was written as (it may name no domain).
    to_name: String,
    /// The `slots` value, or the table if there is none.
    slots: Range<usize>,
    /// The `slot_size` value, or the table if there is none.
    slot_size: Range<usize>,
}

struct DomainSpans {
    table: Range<usize>,
    name: Range<usize>,
    app: Range<usize>,
    /// The `args` value, or the table if there is none.
    args: Range<usize>,
    arg: Vec<Range<usize>>,
    guaranteed: Range<usize>,
    /// The `optimistic` value, or the `memory` table if there is none.
    optimistic: Range<usize>,
    /// The `address_space` value, or the `memory` table if there is none.
    address_space: Range<usize>,
    /// The `cpu` table, or the domain's table if there is none.
    cpu: Range<usize>,
    /// The `period` value, or the `cpu` span if there is none.
    cpu_period: Range<usize>,
    /// The `slice` value, or the `cpu` span if there is none.
    cpu_slice: Range<usize>,
    /// The `latency` value, or the `cpu` span if there is none.
    cpu_latency: Range<usize>,
}

impl RawManifest {
    /// The model and the spans of its fields.
    fn lower(self, root: &DeValue<'_>) -> (Manifest, Spans) {
        let key_span = |key: &str| match root {
            DeValue::Table(t) => t.get_key_value(key).map(|(k, _)| k.span()),
            _ => None,
        };
        let mut spans = Spans {
            domain_key: key_span("domain").unwrap_or(0..0),
            system_memory: self.system.get_ref().memory.span(),
            domains: Vec::with_capacity(self.domain.len()),
            channel_key: key_span("channel").unwrap_or(0..0),
            channels: Vec::with_capacity(self.channel.len()),
        };
        let memory = self.system.into_inner().memory.into_inner().0;
        let mut domains = Vec::with_capacity(self.domain.len());
        for d in self.domain {
            let table = d.span();
            let d = d.into_inner();
            let (args_span, args) = match d.args {
                Some(a) => (a.span(), a.into_inner()),
                None => (table.clone(), Vec::new()),
            };
            let mem_span = d.memory.span();
            let mem = d.memory.into_inner();
            let (optimistic_span, optimistic) = match mem.optimistic {
                Some(o) => (o.span(), o.into_inner().0),
                None => (mem_span.clone(), 0),
            };
            let (address_space_span, address_space) = match mem.address_space {
                Some(a) => (a.span(), a.into_inner().0),
                None => (mem_span, DEFAULT_ADDRESS_SPACE),
            };
            let (cpu_span, cpu) = match d.cpu {
                Some(c) => (c.span(), Some(c.into_inner())),
                None => (table.clone(), None),
            };
            let cpu_period = cpu.as_ref().map_or(cpu_span.clone(), |c| c.period.span());
            let cpu_slice = cpu.as_ref().map_or(cpu_span.clone(), |c| c.slice.span());
            let cpu_latency = cpu
                .as_ref()
                .and_then(|c| c.latency.as_ref().map(Spanned::span))
                .unwrap_or(cpu_span.clone());
            let cpu = cpu.map_or(CpuSpec::BEST_EFFORT, |c| {
                let period_ns = c.period.into_inner().0;
                CpuSpec {
                    period_ns,
                    slice_ns: c.slice.into_inner().0,
                    extra: c.extra.unwrap_or(false),
                    latency_ns: c.latency.map_or(period_ns, |l| l.into_inner().0),
                }
            });
            spans.domains.push(DomainSpans {
                table,
                name: d.name.span(),
                app: d.app.span(),
                args: args_span,
                arg: args.iter().map(Spanned::span).collect(),
                guaranteed: mem.guaranteed.span(),
                optimistic: optimistic_span,
                address_space: address_space_span,
                cpu: cpu_span,
                cpu_period,
                cpu_slice,
                cpu_latency,
            });
            domains.push(DomainSpec {
                name: d.name.into_inner(),
                app: d.app.into_inner(),
                args: args.into_iter().map(Spanned::into_inner).collect(),
                guaranteed: mem.guaranteed.into_inner().0,
                optimistic,
                address_space,
                cpu,
                expect_failure: d.expect_failure.unwrap_or(false),
            });
        }
        // A name that is no domain's becomes an index out of range, which `check` reports
        // after the domains' own problems; `Spans::reason` words it as an unknown name.
        let index_of =
            |name: &str| domains.iter().position(|d| d.name == name).unwrap_or(usize::MAX);
        let mut channels = Vec::with_capacity(self.channel.len());
        for c in self.channel {
            let table = c.span();
            let c = c.into_inner();
            let (slots_span, slots) = match c.slots {
                Some(s) => (s.span(), s.into_inner()),
                None => (table.clone(), DEFAULT_SLOTS),
            };
            let (slot_size_span, slot_size) = match c.slot_size {
                Some(s) => (s.span(), s.into_inner().0),
                None => (table.clone(), DEFAULT_SLOT_SIZE),
            };
            let (from, to) = (index_of(c.from.get_ref()), index_of(c.to.get_ref()));
            spans.channels.push(ChannelSpans {
                table,
                name: c.name.span(),
                from: c.from.span(),
                from_name: c.from.into_inner(),
                to: c.to.span(),
                to_name: c.to.into_inner(),
                slots: slots_span,
                slot_size: slot_size_span,
            });
            channels.push(ChannelSpec { name: c.name.into_inner(), from, to, slots, slot_size });
        }
        (Manifest { memory, domains, channels }, spans)
    }
}

impl Spans {
    /// The span and key path of the field a problem is about.
    fn locate(&self, problem: &Problem, manifest: &Manifest) -> (Range<usize>, String) {
        let field = problem.kind.field();
        let channel_field = |s: &ChannelSpans| match field {
            Field::ChannelName => Some((s.name.clone(), ".name")),
            Field::ChannelFrom => Some((s.from.clone(), ".from")),
            Field::ChannelTo => Some((s.to.clone(), ".to")),
            Field::ChannelEnd => {
                let domain = problem.domain.as_ref().map(|d| d.index);
                let channel = problem.channel.as_ref().and_then(|c| manifest.channels.get(c.index));
                if channel.is_some_and(|c| Some(c.from) == domain) {
                    Some((s.from.clone(), ".from"))
                } else {
                    Some((s.to.clone(), ".to"))
                }
            }
            Field::ChannelSlots => Some((s.slots.clone(), ".slots")),
            Field::ChannelSlotSize => Some((s.slot_size.clone(), ".slot_size")),
            Field::Channels => Some((s.table.clone(), "")),
            _ => None,
        };
        if let Some(c) = &problem.channel
            && let Some(s) = self.channels.get(c.index)
            && let Some((span, suffix)) = channel_field(s)
        {
            return (span, format!("channel[{}]{suffix}", c.index));
        }
        let Some(d) =
            problem.domain.as_ref().and_then(|d| Some((d.index, self.domains.get(d.index)?)))
        else {
            return match field {
                Field::SystemMemory => (self.system_memory.clone(), "system.memory".into()),
                Field::Domains => (self.domain_key.clone(), "domain".into()),
                _ => (self.channel_key.clone(), "channel".into()),
            };
        };
        let (i, s) = d;
        let (span, suffix) = match field {
            Field::SystemMemory => return (self.system_memory.clone(), "system.memory".into()),
            Field::Name => (s.name.clone(), ".name".into()),
            Field::App => (s.app.clone(), ".app".into()),
            Field::Args => (s.args.clone(), ".args".into()),
            Field::Arg(j) => (s.arg.get(j).unwrap_or(&s.args).clone(), format!(".args[{j}]")),
            Field::Guaranteed => (s.guaranteed.clone(), ".memory.guaranteed".into()),
            Field::Optimistic => (s.optimistic.clone(), ".memory.optimistic".into()),
            Field::AddressSpace => (s.address_space.clone(), ".memory.address_space".into()),
            Field::Cpu => (s.cpu.clone(), ".cpu".into()),
            Field::CpuPeriod => (s.cpu_period.clone(), ".cpu.period".into()),
            Field::CpuSlice => (s.cpu_slice.clone(), ".cpu.slice".into()),
            Field::CpuLatency => (s.cpu_latency.clone(), ".cpu.latency".into()),
            _ => (s.table.clone(), String::new()),
        };
        (span, format!("domain[{i}]{suffix}"))
    }

    /// The reason to give for a problem: its `Display`, or for some problems a wording with the
    /// names and lines of the manifest as written.
    fn reason(&self, problem: &Problem, manifest: &Manifest, text: &str) -> String {
        let channel = problem.channel.as_ref().and_then(|c| self.channels.get(c.index));
        let domain_names =
            || manifest.domains.iter().map(|d| d.name.as_str()).collect::<Vec<_>>().join(", ");
        match (&problem.kind, channel) {
            (ProblemKind::DuplicateName { first }, _) => format!(
                "duplicate domain name {:?} (first at line {})",
                manifest.domains[*first].name,
                line_of(text, self.domains[*first].name.start)
            ),
            (ProblemKind::DuplicateChannelName { first }, _) => format!(
                "duplicate channel name {:?} (first at line {})",
                manifest.channels[*first].name,
                line_of(text, self.channels[*first].name.start)
            ),
            (ProblemKind::FromOutOfRange { .. }, Some(c)) => {
                format!("unknown domain {:?} (domains: {})", c.from_name, domain_names())
            }
            (ProblemKind::ToOutOfRange { .. }, Some(c)) => {
                format!("unknown domain {:?} (domains: {})", c.to_name, domain_names())
            }
            (ProblemKind::SameEnds, Some(c)) => format!(
                "from and to are both {:?}: a channel connects two different domains",
                c.from_name
            ),
            (ProblemKind::TooManyChannelEnds { count }, _) => {
                let name = problem.domain.as_ref().map_or("?", |d| d.name.as_str());
                format!(
                    "domain {name:?} is an end of {count} channels (at most \
                     {MAX_CHANNELS_PER_DOMAIN})"
                )
            }
            (ProblemKind::SenderGuaranteeTooSmall { guaranteed, needed }, _) => {
                let c = problem.channel.as_ref().and_then(|c| manifest.channels.get(c.index));
                let (name, bytes) = c.map_or(("?", 0), |c| (c.name.as_str(), c.bytes()));
                format!(
                    "guaranteed memory {} cannot hold channel {name:?} ({}) that this domain \
                     sends on: it needs {} in all ({} of stack and control block plus the \
                     memory of every channel it sends on)",
                    Bytes(*guaranteed),
                    Bytes(bytes),
                    Bytes(*needed),
                    Bytes(DOMAIN_FIXED_FRAMES * PAGE_SIZE)
                )
            }
            (ProblemKind::SenderAddressSpaceTooSmall { address_space, needed }, _) => {
                let c = problem.channel.as_ref().and_then(|c| manifest.channels.get(c.index));
                let (name, bytes) = c.map_or(("?", 0), |c| (c.name.as_str(), c.bytes()));
                format!(
                    "address space {} cannot hold channel {name:?} ({}) that this domain sends \
                     on: it needs {} in all ({} of stack and control block, the memory of \
                     every channel it sends on, and a guard page of {} below each)",
                    Bytes(*address_space),
                    Bytes(bytes),
                    Bytes(*needed),
                    Bytes(DOMAIN_FIXED_FRAMES * PAGE_SIZE),
                    Bytes(GUARD_BYTES)
                )
            }
            (kind, _) => kind.to_string(),
        }
    }
}
