//! Markdown tables that set the architectures side by side: a bench's report has one column
//! (or one group of columns) per architecture it ran on, so the same figure on riscv64 and
//! x86_64 is read across one row.

use tool_base::Arch;

/// A labelled figure of what one architecture measured (`T`), shown as text.
pub type Figure<T> = (&'static str, fn(&T) -> String);

/// A markdown table: leading columns (left-aligned), then for each architecture the same
/// group of figure columns (right-aligned, headed `arch column`, or `arch` alone when the group
/// has one column), then trailing columns (left-aligned).
pub struct ByArch {
    md: String,
    groups: usize,
    per_arch: usize,
    lead: usize,
    trail: usize,
}

impl ByArch {
    /// A table with `lead` columns, then `per_arch` for each of `arches`, then `trail`.
    pub fn new(lead: &[&str], arches: &[Arch], per_arch: &[&str], trail: &[&str]) -> Self {
        let mut head: Vec<String> = lead.iter().map(|c| c.to_string()).collect();
        let mut rule: Vec<&str> = vec!["---"; lead.len()];
        for a in arches {
            for c in per_arch {
                head.push(if per_arch.len() == 1 {
                    a.name().into()
                } else {
                    format!("{} {c}", a.name())
                });
                rule.push("---:");
            }
        }
        head.extend(trail.iter().map(|c| c.to_string()));
        rule.extend(std::iter::repeat_n("---", trail.len()));
        let md = format!("| {} |\n|{}|\n", head.join(" | "), rule.join("|"));
        ByArch {
            md,
            groups: arches.len(),
            per_arch: per_arch.len(),
            lead: lead.len(),
            trail: trail.len(),
        }
    }

    /// Adds a row: its leading cells, each architecture's group of cells (in the order the
    /// architectures were given; a missing group is shown as dashes), its trailing cells.
    pub fn row(&mut self, lead: &[String], groups: &[Vec<String>], trail: &[String]) {
        assert_eq!((lead.len(), trail.len()), (self.lead, self.trail), "a row of another table");
        let mut cells: Vec<String> = lead.to_vec();
        for g in 0..self.groups {
            match groups.get(g) {
                Some(group) => {
                    assert_eq!(group.len(), self.per_arch, "a group of another table");
                    cells.extend(group.iter().cloned());
                }
                None => cells.extend(std::iter::repeat_n("-".to_string(), self.per_arch)),
            }
        }
        cells.extend(trail.iter().cloned());
        self.md.push_str(&format!("| {} |\n", cells.join(" | ")));
    }

    /// Adds a row per figure of a one-column-per-architecture table with one leading column:
    /// the figure's label, then its value in what each architecture measured.
    pub fn figure_rows<T>(&mut self, measured: &[T], figures: &[Figure<T>]) {
        for (label, show) in figures {
            let groups: Vec<Vec<String>> = measured.iter().map(|m| vec![show(m)]).collect();
            self.row(&[label.to_string()], &groups, &[]);
        }
    }

    /// The table's text.
    pub fn finish(self) -> String {
        self.md
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn architectures_are_columns() {
        let mut t = ByArch::new(
            &["operation"],
            &[Arch::Riscv64, Arch::X86_64],
            &["instructions"],
            &["Linux"],
        );
        t.row(&["null call".into()], &[vec!["207".into()], vec!["190".into()]], &["338".into()]);
        t.row(&["switch".into()], &[vec!["663".into()]], &["1,766".into()]);
        assert_eq!(
            t.finish(),
            "| operation | riscv64 | x86_64 | Linux |\n|---|---:|---:|---|\n\
             | null call | 207 | 190 | 338 |\n| switch | 663 | - | 1,766 |\n"
        );
        let t = ByArch::new(&["round trip"], &[Arch::X86_64], &["icount", "wall"], &[]);
        assert_eq!(t.finish(), "| round trip | x86_64 icount | x86_64 wall |\n|---|---:|---:|\n");
    }
}
