//! The manifest reference, `docs/manifest-reference.md`, generated from the manifest parser's
//! own definitions: the `Raw*` types of `libs/manifest/src/front.rs`, which serde reads a
//! manifest's TOML into (`deny_unknown_fields`, so they are every key there is), their fields'
//! types and doc comments, and the doc comments of the value types (`Size`, `Duration`, ...).
//!
//! Each table of a manifest gets a section, named by its key path (`domain.cpu`); each key a
//! row: its type as written in TOML, its default and its meaning. A field is optional when
//! its type is an `Option` or it has `#[serde(default)]`; its doc comment's `Default: ...`
//! sentence is the default column (`Required ...` for a key the pager's spec parser requires
//! though the table does not). The enums are their variants as serde spells them.
//!
//! The unit tests fail when the reference is stale (`UPDATE_DOCS=1 cargo test -p source_tree
//! manifest_reference` rewrites it), when a key has no doc comment, and when the keys of the
//! `pager` table differ from those `pager_spec::PagerSpec::parse` reads (the front end passes
//! the table to that parser). Nothing but the tests calls the module.

#![cfg(test)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs;

use anyhow::{Context, Result, bail};
use syn::visit::Visit;
use syn::{Attribute, Fields, GenericArgument, Item, PathArguments, Type};

/// The parser's source, relative to the repository's root.
const FRONT: &str = "libs/manifest/src/front.rs";
/// The pager spec's parser, relative to the repository's root.
const SPEC: &str = "libs/pager_spec/src/spec.rs";
/// The generated chapter, relative to the repository's root.
const REFERENCE: &str = "docs/manifest-reference.md";
/// The type serde reads a whole manifest into.
const ROOT: &str = "RawManifest";

/// A key of a table.
struct Key {
    name: String,
    ty: Type,
    optional: bool,
    doc: String,
}

/// What the parser's source defines.
struct Definitions {
    /// The tables: a `Raw*` struct's name and its keys.
    tables: BTreeMap<String, Vec<Key>>,
    /// The enums: a `Raw*` enum's name and its variants as written in TOML.
    enums: BTreeMap<String, Vec<String>>,
    /// The value types' doc comments, by the type's name.
    values: BTreeMap<String, String>,
}

/// The doc comment of an item or field, its lines joined by spaces.
fn doc(attrs: &[Attribute]) -> String {
    let lines: Vec<String> = attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .filter_map(|a| match &a.meta {
            syn::Meta::NameValue(nv) => match &nv.value {
                syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) => Some(s.value()),
                _ => None,
            },
            _ => None,
        })
        .map(|l| l.trim().to_owned())
        .collect();
    lines.join(" ").trim().to_owned()
}

/// The `key = "value"` pairs and bare words of an item's `#[serde(...)]` attributes.
fn serde_args(attrs: &[Attribute]) -> Vec<(String, Option<String>)> {
    let mut args = Vec::new();
    for a in attrs.iter().filter(|a| a.path().is_ident("serde")) {
        let _ = a.parse_nested_meta(|m| {
            let name = m.path.get_ident().map(|i| i.to_string()).unwrap_or_default();
            let value = match m.value() {
                Ok(v) => v.parse::<syn::LitStr>().ok().map(|s| s.value()),
                Err(_) => None,
            };
            args.push((name, value));
            Ok(())
        });
    }
    args
}

/// A variant's name as serde spells it under `rename_all` (`lowercase`, `kebab-case`).
fn renamed(variant: &str, rule: Option<&str>) -> String {
    match rule {
        Some("lowercase") => variant.to_lowercase(),
        Some("kebab-case") => {
            let mut out = String::new();
            for (i, c) in variant.chars().enumerate() {
                if c.is_uppercase() && i > 0 {
                    out.push('-');
                }
                out.extend(c.to_lowercase());
            }
            out
        }
        _ => variant.to_owned(),
    }
}

/// Reads the definitions of the parser's source `text`.
fn definitions(text: &str) -> Result<Definitions> {
    let file = syn::parse_file(text).context("cannot parse the manifest's front end")?;
    let mut defs =
        Definitions { tables: BTreeMap::new(), enums: BTreeMap::new(), values: BTreeMap::new() };
    for item in &file.items {
        match item {
            Item::Struct(s) => {
                let name = s.ident.to_string();
                match &s.fields {
                    Fields::Named(fields) if name.starts_with("Raw") => {
                        let keys = fields
                            .named
                            .iter()
                            .map(|f| {
                                let defaulted =
                                    serde_args(&f.attrs).iter().any(|(k, _)| k == "default");
                                let ty = f.ty.clone();
                                Key {
                                    name: f
                                        .ident
                                        .as_ref()
                                        .map(|i| i.to_string())
                                        .unwrap_or_default(),
                                    optional: defaulted || wrapper(&ty, "Option").is_some(),
                                    ty,
                                    doc: doc(&f.attrs),
                                }
                            })
                            .collect();
                        defs.tables.insert(name, keys);
                    }
                    Fields::Unnamed(_) => {
                        defs.values.insert(name, doc(&s.attrs));
                    }
                    _ => {}
                }
            }
            Item::Enum(e) if e.ident.to_string().starts_with("Raw") => {
                let args = serde_args(&e.attrs);
                let rule =
                    args.iter().find(|(k, _)| k == "rename_all").and_then(|(_, v)| v.clone());
                let variants = e
                    .variants
                    .iter()
                    .map(|v| {
                        let own = serde_args(&v.attrs)
                            .into_iter()
                            .find(|(k, _)| k == "rename")
                            .and_then(|(_, v)| v);
                        own.unwrap_or_else(|| renamed(&v.ident.to_string(), rule.as_deref()))
                    })
                    .collect();
                defs.enums.insert(e.ident.to_string(), variants);
            }
            _ => {}
        }
    }
    if !defs.tables.contains_key(ROOT) {
        bail!("{FRONT} defines no {ROOT}");
    }
    Ok(defs)
}

/// The type inside `ty` if it is `wrapper<T>` (a path whose last segment is `wrapper`).
fn wrapper<'a>(ty: &'a Type, wrapper: &str) -> Option<&'a Type> {
    let Type::Path(p) = ty else { return None };
    let last = p.path.segments.last()?;
    if last.ident != wrapper {
        return None;
    }
    let PathArguments::AngleBracketed(args) = &last.arguments else { return None };
    args.args.iter().find_map(|a| match a {
        GenericArgument::Type(t) => Some(t),
        _ => None,
    })
}

/// `ty` without `Spanned` and `Option`.
fn bare(mut ty: &Type) -> &Type {
    while let Some(inner) = wrapper(ty, "Spanned").or_else(|| wrapper(ty, "Option")) {
        ty = inner;
    }
    ty
}

/// The name of a plain path type (`u64`, `RawCpu`).
fn type_name(ty: &Type) -> String {
    match ty {
        Type::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()).unwrap_or_default(),
        _ => String::new(),
    }
}

/// How the value of a key is written, as the reference says it; tables it names are added to
/// `nested` with their key path.
fn shown_type(
    defs: &Definitions,
    ty: &Type,
    path: &str,
    nested: &mut Vec<(String, String, bool)>,
) -> String {
    let ty = bare(ty);
    if let Some(item) = wrapper(ty, "Vec") {
        let item = bare(item);
        let name = type_name(item);
        if defs.tables.contains_key(&name) {
            nested.push((path.to_owned(), name, true));
            return format!("array of tables, [`[[{path}]]`](#{})", anchor(path));
        }
        return format!("array of {}s", shown_type(defs, item, path, nested));
    }
    let name = type_name(ty);
    if defs.tables.contains_key(&name) {
        nested.push((path.to_owned(), name, false));
        let shown = if path.contains('.') { path.to_owned() } else { format!("[{path}]") };
        return format!("table, [`{shown}`](#{})", anchor(path));
    }
    if let Some(variants) = defs.enums.get(&name) {
        let list: Vec<String> = variants.iter().map(|v| format!("`\"{v}\"`")).collect();
        return format!("string: {}", list.join(" or "));
    }
    match name.as_str() {
        "String" => "string".to_owned(),
        "bool" => "boolean".to_owned(),
        "u8" | "u16" | "u32" | "u64" | "usize" => "integer".to_owned(),
        other if defs.values.contains_key(other) => {
            format!("[{}](#{})", value_name(other), anchor(&value_name(other)))
        }
        other => other.to_owned(),
    }
}

/// A value type's name in the reference: `MacAddress` is "MAC address".
fn value_name(ty: &str) -> String {
    match ty {
        "MacAddress" => "MAC address".to_owned(),
        "PciIds" => "PCI IDs".to_owned(),
        "PciClass" => "PCI class".to_owned(),
        "SlotSize" => "slot size".to_owned(),
        other => other.to_lowercase(),
    }
}

/// The id mdBook gives a heading of this text: lowercase, spaces to `-`, only letters,
/// digits, `-` and `_` kept.
fn anchor(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// A field's doc split into its meaning and its default column.
fn meaning_and_default(key: &Key) -> (String, String) {
    let doc = key.doc.replace('|', "\\|");
    for (marker, keep) in [("Default: ", false), ("Required", true)] {
        if let Some(at) = doc.find(marker) {
            let tail = doc[at..].trim_end_matches('.');
            let default = if keep { tail.to_lowercase() } else { tail[marker.len()..].to_owned() };
            return (doc[..at].trim().to_owned(), default);
        }
    }
    let default = if key.optional { "none" } else { "required" };
    (doc.trim().to_owned(), default.to_owned())
}

/// The reference's text, or every key without a doc comment.
fn generate(defs: &Definitions) -> Result<String> {
    let mut out = String::from(
        "# Manifest reference\n\n\
         <!-- Generated from libs/manifest/src/front.rs (the parser's Raw* types and their doc \
         comments) by the source_tree crate's tests: do not edit. `UPDATE_DOCS=1 cargo test -p \
         source_tree manifest_reference` rewrites it. -->\n\n\
         Every key a QoS manifest may have, as the manifest parser defines it \
         (`libs/manifest/src/front.rs`): any other key is an error at its line. A table's keys \
         are either written inline (`memory = { guaranteed = \"1M\" }`) or with dotted keys \
         (`memory.guaranteed = \"1M\"`). [QoS manifests](manifests.md) explains them with \
         examples, and its validation rules say what is checked across keys (contracts \
         admitted together, memory that must fit, channel ends).\n",
    );
    let mut undocumented = Vec::new();
    let mut queue: Vec<(String, String, bool)> = Vec::new();
    let mut sections = Vec::new();
    // The top level: each of its keys is a table of its own.
    let mut root_rows = Vec::new();
    for key in &defs.tables[ROOT] {
        let shown = shown_type(defs, &key.ty, &key.name, &mut queue);
        if key.doc.is_empty() {
            undocumented.push(format!("{ROOT}.{}", key.name));
        }
        let (meaning, default) = meaning_and_default(key);
        root_rows.push(format!("| `{}` | {shown} | {default} | {meaning} |", key.name));
    }
    sections.push(("The top level".to_owned(), root_rows));
    let mut done = BTreeSet::new();
    while !queue.is_empty() {
        let (path, table, array) = queue.remove(0);
        if !done.insert(path.clone()) {
            continue;
        }
        let mut rows = Vec::new();
        let mut nested = Vec::new();
        for key in &defs.tables[&table] {
            let key_path = format!("{path}.{}", key.name);
            let shown = shown_type(defs, &key.ty, &key_path, &mut nested);
            if key.doc.is_empty() {
                undocumented.push(format!("{table}.{}", key.name));
            }
            let (meaning, default) = meaning_and_default(key);
            rows.push(format!("| `{}` | {shown} | {default} | {meaning} |", key.name));
        }
        // mdBook's ids leave the brackets out: `[[system.disk]]` is `#systemdisk`.
        let title = if array {
            format!("[[{path}]]")
        } else if path.contains('.') {
            path
        } else {
            format!("[{path}]")
        };
        sections.push((title, rows));
        queue.extend(nested);
    }
    if !undocumented.is_empty() {
        bail!(
            "{FRONT}: the reference takes each key's meaning from its doc comment, and these \
             have none: {}",
            undocumented.join(", ")
        );
    }
    for (title, rows) in sections {
        out.push_str(&format!("\n## {title}\n\n| key | value | default | meaning |\n"));
        out.push_str("|---|---|---|---|\n");
        for row in rows {
            out.push_str(&row);
            out.push('\n');
        }
    }
    out.push_str("\n## Values\n");
    for (ty, text) in &defs.values {
        out.push_str(&format!("\n### {}\n\n{}\n", value_name(ty), without_doc_links(text)));
    }
    Ok(out)
}

/// `text` with rustdoc's links to items (``[`Size`]``) as plain code (`` `Size` ``).
fn without_doc_links(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("[`") {
        let after = &rest[at + 1..];
        match after.find("`]") {
            Some(end) if !after[end + 2..].starts_with('(') => {
                out.push_str(&rest[..at]);
                out.push_str(&after[..end + 1]);
                rest = &after[end + 2..];
            }
            _ => {
                out.push_str(&rest[..at + 2]);
                rest = &rest[at + 2..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The keys `PagerSpec::parse` reads: the string patterns of its `match key`.
fn spec_keys(text: &str) -> Result<BTreeSet<String>> {
    struct Keys(BTreeSet<String>);
    impl<'ast> Visit<'ast> for Keys {
        fn visit_expr_match(&mut self, m: &'ast syn::ExprMatch) {
            let on_key = matches!(&*m.expr, syn::Expr::Path(p) if p.path.is_ident("key"));
            if on_key {
                for arm in &m.arms {
                    let cases = match &arm.pat {
                        syn::Pat::Or(or) => or.cases.iter().collect(),
                        pat => vec![pat],
                    };
                    for case in cases {
                        if let syn::Pat::Lit(syn::PatLit { lit: syn::Lit::Str(s), .. }) = case {
                            self.0.insert(s.value());
                        }
                    }
                }
            }
            syn::visit::visit_expr_match(self, m);
        }
    }
    let file = syn::parse_file(text).context("cannot parse the pager spec")?;
    let mut keys = Keys(BTreeSet::new());
    keys.visit_file(&file);
    Ok(keys.0)
}

mod tests {
    use super::*;

    #[test]
    fn the_reference_is_current() {
        let root = tool_base::util::root();
        let front = fs::read_to_string(root.join(FRONT)).unwrap();
        let text = generate(&definitions(&front).unwrap()).unwrap();
        let path = root.join(REFERENCE);
        if std::env::var_os("UPDATE_DOCS").is_some() {
            fs::write(&path, &text).unwrap();
        }
        let current = fs::read_to_string(&path).unwrap_or_default();
        assert!(
            current == text,
            "{REFERENCE} is stale: `UPDATE_DOCS=1 cargo test -p source_tree manifest_reference` \
             rewrites it from {FRONT}"
        );
    }

    #[test]
    fn the_pager_table_takes_the_keys_the_spec_parser_reads() {
        let root = tool_base::util::root();
        let defs = definitions(&fs::read_to_string(root.join(FRONT)).unwrap()).unwrap();
        let table: BTreeSet<String> =
            defs.tables["RawPager"].iter().map(|k| k.name.clone()).collect();
        let spec = spec_keys(&fs::read_to_string(root.join(SPEC)).unwrap()).unwrap();
        assert!(spec.len() > 10, "found only {spec:?} in {SPEC}");
        assert_eq!(table, spec, "the manifest's pager table (left) and {SPEC}'s keys (right)");
    }

    #[test]
    fn a_sample_parser() {
        let sample = r#"
            #[derive(Deserialize)]
            struct RawManifest {
                /// The machine.
                system: Spanned<RawSystem>,
                /// Some tables. Default: none.
                #[serde(default)]
                part: Vec<Spanned<RawPart>>,
            }
            struct RawSystem {
                /// Its memory.
                memory: Spanned<Size>,
                /// The bus. Default: `"virtio"`.
                bus: Option<Spanned<RawBus>>,
            }
            struct RawPart {
                /// A name.
                name: String,
                count: Option<u32>,
            }
            #[serde(rename_all = "kebab-case")]
            enum RawBus { Virtio, FastAhci, #[serde(rename = "x-1")] X1 }
            /// A size such as `"1M"`.
            struct Size(u64);
            /// A [`Size`] under 4G, not [`a`](b).
            struct SlotSize(u32);
        "#;
        let defs = definitions(sample).unwrap();
        let e = generate(&defs).unwrap_err().to_string();
        assert!(e.ends_with("these have none: RawPart.count"), "{e}");
        let documented = sample.replace("count:", "/// How many.\n count:");
        let text = generate(&definitions(&documented).unwrap()).unwrap();
        for row in [
            "| `system` | table, [`[system]`](#system) | required | The machine. |",
            "| `part` | array of tables, [`[[part]]`](#part) | none | Some tables. |",
            "| `memory` | [size](#size) | required | Its memory. |",
            "| `bus` | string: `\"virtio\"` or `\"fast-ahci\"` or `\"x-1\"` | `\"virtio\"` | The bus. |",
            "| `count` | integer | none | How many. |",
            "\n## [system]\n",
            "\n## [[part]]\n",
        ] {
            assert!(text.contains(row), "{row} not in:\n{text}");
        }
        assert!(text.contains("\n### size\n\nA size such as `\"1M\"`.\n"), "{text}");
        assert!(text.contains("\n### slot size\n\nA `Size` under 4G, not [`a`](b).\n"), "{text}");
        let spec = "fn parse(key: &str) { match key { \"a\" => 1, \"b\" | _ => 2, \"d\" | \"e\" => 3 }; match x { \"c\" => 3 } }";
        assert_eq!(
            spec_keys(spec).unwrap(),
            BTreeSet::from(["a", "b", "d", "e"].map(str::to_owned))
        );
    }
}
