//! The `LAB(NAME)` markers of a student file, and the hand-out cut from them.
//!
//! ```text
//! // LAB(clock) BEGIN
//! ... the reference solution ...
//! // LAB(clock) HANDOUT
//! // todo!("lab clock: ...")
//! // LAB(clock) END
//! ```
//!
//! A marker is a line holding only a comment (`//` or `#`, after any indentation) that starts
//! with `LAB(NAME)` and a keyword. The hand-out drops the lines between `BEGIN` and `HANDOUT`
//! (or `END`, without `HANDOUT`) and un-comments those between `HANDOUT` and `END`: one
//! leading `// ` (or `# `, the marker's own comment) after the indentation is removed; the
//! marker lines disappear. Regions do not nest; other labs' markers are left as they are.

use std::fmt;

/// A marker's keyword.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Keyword {
    Begin,
    Handout,
    End,
}

impl Keyword {
    fn word(self) -> &'static str {
        match self {
            Keyword::Begin => "BEGIN",
            Keyword::Handout => "HANDOUT",
            Keyword::End => "END",
        }
    }
}

/// A problem with a file's markers: its 1-based line and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MarkerError {
    /// The line of the offending marker (the last line when a region is left open).
    pub line: usize,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for MarkerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.reason)
    }
}

/// The comment and keyword of `line` if it is a marker of lab `lab`; an error if it starts
/// like one but has no keyword.
fn marker<'a>(
    lab: &str,
    line: &'a str,
    number: usize,
) -> Result<Option<(&'a str, Keyword)>, MarkerError> {
    let body = line.trim();
    let Some((comment, rest)) = ["//", "#"].iter().find_map(|c| Some((*c, body.strip_prefix(c)?)))
    else {
        return Ok(None);
    };
    let tag = format!("LAB({lab})");
    let Some(rest) = rest.trim_start().strip_prefix(&tag) else { return Ok(None) };
    let rest = rest.trim_start();
    let word = &rest[..rest.find(|c: char| !c.is_ascii_alphanumeric()).unwrap_or(rest.len())];
    let keyword =
        [Keyword::Begin, Keyword::Handout, Keyword::End].into_iter().find(|k| k.word() == word);
    match keyword {
        Some(k) => Ok(Some((comment, k))),
        None => Err(MarkerError {
            line: number,
            reason: format!("`{tag}` must be followed by BEGIN, HANDOUT or END, not `{word}`"),
        }),
    }
}

/// Where a region of the file is, as the scan goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Outside,
    /// In the solution part, since the `BEGIN` on this line, with this comment.
    Solution(usize, &'static str),
    /// In the hand-out part.
    Handout(usize, &'static str),
}

/// Scans `text` for lab `lab`'s regions, calling `out` with each line the hand-out keeps (as
/// it keeps it); returns how many regions there are.
fn scan(lab: &str, text: &str, mut out: impl FnMut(&str)) -> Result<usize, MarkerError> {
    let mut state = State::Outside;
    let mut regions = 0;
    let mut last = 0;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let n = i + 1;
        last = n;
        let tag = format!("LAB({lab})");
        let found = marker(lab, line, n)?;
        let err = |reason: String| Err(MarkerError { line: n, reason });
        match (state, found) {
            (State::Outside, Some((c, Keyword::Begin))) => {
                state = State::Solution(n, if c == "#" { "#" } else { "//" });
            }
            (State::Outside, Some((_, k))) => {
                return err(format!(
                    "`{tag} {}` outside a region: no `{tag} BEGIN` before it",
                    k.word()
                ));
            }
            (State::Outside, None) => out(line),
            (State::Solution(start, _) | State::Handout(start, _), Some((_, Keyword::Begin))) => {
                return err(format!(
                    "`{tag} BEGIN` inside the region begun on line {start}: regions do not nest"
                ));
            }
            (State::Solution(start, c), Some((_, Keyword::Handout))) => {
                state = State::Handout(start, c)
            }
            (State::Handout(start, _), Some((_, Keyword::Handout))) => {
                return err(format!(
                    "a second `{tag} HANDOUT` in the region begun on line {start}"
                ));
            }
            (State::Solution(..) | State::Handout(..), Some((_, Keyword::End))) => {
                regions += 1;
                state = State::Outside;
            }
            (State::Solution(..), None) => {}
            (State::Handout(_, c), None) => out(&uncomment(line, c).ok_or(MarkerError {
                line: n,
                reason: format!(
                    "a hand-out line must be commented out with `{c} ` (the repository builds the \
                     solution; the hand-out removes one `{c} `)"
                ),
            })?),
        }
    }
    match state {
        State::Outside => Ok(regions),
        State::Solution(start, _) | State::Handout(start, _) => Err(MarkerError {
            line: last.max(start),
            reason: format!("the region begun on line {start} has no `LAB({lab}) END`"),
        }),
    }
}

/// `line` with one comment `c` removed after its indentation (`// x` -> `x`, a bare `//` ->
/// an empty line); `None` if the line is not such a comment (a blank line stays blank).
fn uncomment(line: &str, c: &str) -> Option<String> {
    let ending = &line[line.trim_end_matches(['\n', '\r']).len()..];
    let content = &line[..line.len() - ending.len()];
    if content.trim().is_empty() {
        return Some(line.to_string());
    }
    let indent = &content[..content.len() - content.trim_start().len()];
    let rest = content.trim_start().strip_prefix(c)?;
    if rest.trim().is_empty() {
        return Some(ending.to_string());
    }
    let rest = rest.strip_prefix(' ')?;
    Some(format!("{indent}{rest}{ending}"))
}

/// How many regions of lab `lab` `text` holds; an error naming the line if its markers are
/// not balanced (`BEGIN`, an optional `HANDOUT`, `END`; no nesting) or a hand-out line is not
/// commented out.
pub fn regions(lab: &str, text: &str) -> Result<usize, MarkerError> {
    scan(lab, text, |_| {})
}

/// The hand-out of `text` for lab `lab`: each region's solution cut out and its hand-out part
/// un-commented, the markers gone; every other line as it is.
pub fn handout(lab: &str, text: &str) -> Result<String, MarkerError> {
    let mut out = String::with_capacity(text.len());
    scan(lab, text, |l| out.push_str(l))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_solution_goes_and_the_handout_is_uncommented_with_its_indentation() {
        let text = "\
fn victim() -> usize {
    let a = 1;
    // LAB(clock) BEGIN
    let hand = a + 1;
    hand
    // LAB(clock) HANDOUT
    // // A comment the student reads.
    // let _ = a;
    //
    //     todo!(\"lab clock\")
    // LAB(clock) END
}
";
        let want = "\
fn victim() -> usize {
    let a = 1;
    // A comment the student reads.
    let _ = a;

        todo!(\"lab clock\")
}
";
        assert_eq!(handout("clock", text).unwrap(), want);
        assert_eq!(regions("clock", text), Ok(1));
    }

    #[test]
    fn hash_comments_several_regions_and_a_region_without_handout() {
        let text = "\
[a]
# LAB(disk) BEGIN
policy = \"best\"
# LAB(disk) HANDOUT
# policy = \"fifo\"
# LAB(disk) END
  # LAB(disk) BEGIN
  helper = 1
  # LAB(disk) END
end = true\r
";
        assert_eq!(handout("disk", text).unwrap(), "[a]\npolicy = \"fifo\"\nend = true\r\n");
        assert_eq!(regions("disk", text), Ok(2));
    }

    #[test]
    fn other_labs_markers_are_left_alone() {
        let text = "// LAB(edf) BEGIN\nx\n// LAB(edf) HANDOUT\n// y\n// LAB(edf) END\n";
        assert_eq!(handout("clock", text).unwrap(), text);
        assert_eq!(regions("clock", text), Ok(0));
        // A lab whose name starts like another's.
        assert_eq!(regions("ed", text), Ok(0));
    }

    #[test]
    fn crlf_lines_keep_their_endings() {
        let text =
            "a\r\n// LAB(x) BEGIN\r\nb\r\n// LAB(x) HANDOUT\r\n// c\r\n//\r\n// LAB(x) END\r\nd";
        assert_eq!(handout("x", text).unwrap(), "a\r\nc\r\n\r\nd");
    }

    #[test]
    fn unbalanced_markers_are_errors_naming_the_line() {
        let e = |t: &str| regions("x", t).unwrap_err();
        assert_eq!(
            e("a\n// LAB(x) BEGIN\n// LAB(x) BEGIN\n"),
            MarkerError {
                line: 3,
                reason: "`LAB(x) BEGIN` inside the region begun on line 2: regions do not nest"
                    .into()
            }
        );
        assert_eq!(e("// LAB(x) END\n").line, 1);
        assert!(e("// LAB(x) END\n").reason.contains("outside a region"));
        assert_eq!(e("// LAB(x) HANDOUT\n").line, 1);
        let open = e("// LAB(x) BEGIN\na\nb\n");
        assert_eq!(open.line, 3);
        assert!(open.reason.contains("line 1 has no `LAB(x) END`"), "{open}");
        let twice = e("// LAB(x) BEGIN\n// LAB(x) HANDOUT\n// LAB(x) HANDOUT\n// LAB(x) END\n");
        assert_eq!(twice.line, 3);
        let word = e("// LAB(x) BEGINS\n");
        assert!(word.reason.contains("not `BEGINS`"), "{word}");
        let code = e("// LAB(x) BEGIN\n// LAB(x) HANDOUT\ntodo!()\n// LAB(x) END\n");
        assert_eq!(code.line, 3);
        assert!(code.reason.contains("commented out with `// `"), "{code}");
        let hash = e("# LAB(x) BEGIN\n# LAB(x) HANDOUT\n// y\n# LAB(x) END\n");
        assert!(hash.reason.contains("with `# `"), "{hash}");
    }

    #[test]
    fn a_marker_may_carry_words_after_its_keyword() {
        let text = "// LAB(x) BEGIN: the check\na\n// LAB(x) END of the check\n";
        assert_eq!(handout("x", text).unwrap(), "");
    }
}
