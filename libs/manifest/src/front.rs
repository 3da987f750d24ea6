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
use crate::{DomainSpec, Manifest, ProblemKind, parse_size};

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

/// Reads and parses the manifest at `path`; see [`parse`].
pub fn parse_file(path: &Path, known_apps: &[&str]) -> Result<Manifest, ManifestError> {
    let file = path.display().to_string();
    match std::fs::read_to_string(path) {
        Ok(text) => parse(&file, &text, known_apps),
        Err(e) => Err(ManifestError { file, line: None, key: None, reason: format!("{e}") }),
    }
}

/// Parses and validates the TOML manifest `text` (named `file_name` in errors): the schema of
/// the [crate documentation](crate), then [`Manifest::check`], then that every domain's app is
/// one of `known_apps`. Returns the first error found.
pub fn parse(file_name: &str, text: &str, known_apps: &[&str]) -> Result<Manifest, ManifestError> {
    let at = |span: Option<Range<usize>>, key: Option<String>, reason: String| ManifestError {
        file: file_name.to_owned(),
        line: span.map(|s| line_of(text, s.start)),
        key,
        reason,
    };
    let doc = DeTable::parse(text)
        .map_err(|e| at(e.span(), None, format!("TOML syntax error: {}", e.message())))?;
    let root = DeValue::Table(doc.get_ref().clone());
    let raw = RawManifest::deserialize(toml::de::Deserializer::from(doc)).map_err(|e| {
        let mut key = e.span().map(|s| key_path(&root, s.start)).unwrap_or_default();
        if let Some(field) =
            e.message().strip_prefix("missing field `").and_then(|m| m.strip_suffix('`'))
        {
            push_key(&mut key, field);
        }
        at(e.span(), (!key.is_empty()).then_some(key), e.message().to_owned())
    })?;

    let (manifest, spans) = raw.lower(&root);
    if let Err(problem) = manifest.check() {
        let (span, key) = spans.locate(problem.domain.as_ref().map(|d| d.index), &problem.kind);
        let reason = match problem.kind {
            ProblemKind::DuplicateName { first } => format!(
                "duplicate domain name {:?} (first at line {})",
                manifest.domains[first].name,
                line_of(text, spans.domains[first].name.start)
            ),
            kind => kind.to_string(),
        };
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    system: Spanned<RawSystem>,
    #[serde(default)]
    domain: Vec<Spanned<RawDomain>>,
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
    memory: Spanned<RawMemory>,
}

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table such as { guaranteed = \"256K\", optimistic = \"0\" }"
)]
struct RawMemory {
    guaranteed: Spanned<Size>,
    optimistic: Option<Spanned<Size>>,
}

/// Where each field of a parsed manifest was written, to point errors at it.
struct Spans {
    /// The `domain` key, or the start of the file if there is none.
    domain_key: Range<usize>,
    system_memory: Range<usize>,
    domains: Vec<DomainSpans>,
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
}

impl RawManifest {
    /// The model and the spans of its fields.
    fn lower(self, root: &DeValue<'_>) -> (Manifest, Spans) {
        let domains_span = match root {
            DeValue::Table(t) => t.get_key_value("domain").map(|(k, _)| k.span()),
            _ => None,
        };
        let mut spans = Spans {
            domain_key: domains_span.unwrap_or(0..0),
            system_memory: self.system.get_ref().memory.span(),
            domains: Vec::with_capacity(self.domain.len()),
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
                None => (mem_span, 0),
            };
            spans.domains.push(DomainSpans {
                table,
                name: d.name.span(),
                app: d.app.span(),
                args: args_span,
                arg: args.iter().map(Spanned::span).collect(),
                guaranteed: mem.guaranteed.span(),
                optimistic: optimistic_span,
            });
            domains.push(DomainSpec {
                name: d.name.into_inner(),
                app: d.app.into_inner(),
                args: args.into_iter().map(Spanned::into_inner).collect(),
                guaranteed: mem.guaranteed.into_inner().0,
                optimistic,
            });
        }
        (Manifest { memory, domains }, spans)
    }
}

impl Spans {
    /// The span and key path of the field a problem is about.
    fn locate(&self, domain: Option<usize>, kind: &ProblemKind) -> (Range<usize>, String) {
        let field = kind.field();
        let Some(d) = domain.and_then(|i| Some((i, self.domains.get(i)?))) else {
            return match field {
                Field::SystemMemory => (self.system_memory.clone(), "system.memory".into()),
                _ => (self.domain_key.clone(), "domain".into()),
            };
        };
        let (i, s) = d;
        let (span, suffix) = match field {
            Field::Domains => (s.table.clone(), String::new()),
            Field::SystemMemory => return (self.system_memory.clone(), "system.memory".into()),
            Field::Name => (s.name.clone(), ".name".into()),
            Field::App => (s.app.clone(), ".app".into()),
            Field::Args => (s.args.clone(), ".args".into()),
            Field::Arg(j) => (s.arg.get(j).unwrap_or(&s.args).clone(), format!(".args[{j}]")),
            Field::Guaranteed => (s.guaranteed.clone(), ".memory.guaranteed".into()),
            Field::Optimistic => (s.optimistic.clone(), ".memory.optimistic".into()),
        };
        (span, format!("domain[{i}]{suffix}"))
    }
}
