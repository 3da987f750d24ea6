//! A grade: each test's points, the text a student reads (a line per test, then each
//! failure's hint and its first lines, then `Score: N/100`), and the JSON the course's tools
//! read: Gradescope's autograder `results.json` and the result a GitHub Classroom runner
//! reports (`autograding-grading-reporter`'s `tests[]`).

use serde::Serialize;

use crate::runner::{Outcome, Verdict};
use crate::spec::{Lab, TOTAL_POINTS};

/// How many lines of a failure's output the text shows.
pub const FAILURE_LINES: usize = 15;

/// One graded test's result.
#[derive(Clone, Debug)]
pub struct Graded {
    /// The test's name (its words).
    pub name: String,
    /// The `cargo xtask test` name it ran.
    pub run: String,
    /// Its points if passed, else 0.
    pub score: u32,
    /// Its points.
    pub max_score: u32,
    /// Its hint.
    pub hint: String,
    /// How it ended.
    pub outcome: Outcome,
}

impl Graded {
    /// Whether it passed.
    pub fn passed(&self) -> bool {
        self.outcome.verdict == Verdict::Passed
    }

    /// The failure's text (empty if it passed).
    pub fn failure(&self) -> String {
        match &self.outcome.verdict {
            Verdict::Passed => String::new(),
            Verdict::Failed(why) => why.clone(),
            Verdict::BuildFailed(errors) => format!("the build failed:\n{errors}"),
        }
    }
}

/// A lab's grade.
#[derive(Clone, Debug)]
pub struct Grade {
    /// The lab's name.
    pub lab: String,
    /// Each test's result, in the lab's order.
    pub tests: Vec<Graded>,
}

impl Grade {
    /// Pairs `lab`'s tests with their `outcomes` (in order) on `arch`.
    pub fn new(lab: &Lab, outcomes: Vec<Outcome>, arch: &str) -> Grade {
        let tests = lab
            .tests
            .iter()
            .zip(outcomes)
            .map(|(t, outcome)| Graded {
                name: t.name.clone(),
                run: t.run.full_name(arch),
                score: if outcome.verdict == Verdict::Passed { t.points } else { 0 },
                max_score: t.points,
                hint: t.hint.clone(),
                outcome,
            })
            .collect();
        Grade { lab: lab.name.clone(), tests }
    }

    /// The points earned, out of [`TOTAL_POINTS`].
    pub fn score(&self) -> u32 {
        self.tests.iter().map(|t| t.score).sum()
    }

    /// The text the grader prints.
    pub fn text(&self) -> String {
        let mut s = String::new();
        for t in &self.tests {
            let verdict = if t.passed() { "PASS" } else { "FAIL" };
            s.push_str(&format!("{verdict} {:>3}/{:<3} {}\n", t.score, t.max_score, t.name));
        }
        for t in self.tests.iter().filter(|t| !t.passed()) {
            s.push_str(&format!("\n--- {} ({})\nhint: {}\n", t.name, t.run, t.hint));
            let failure = t.failure();
            let lines: Vec<&str> = failure.lines().collect();
            for l in lines.iter().take(FAILURE_LINES) {
                s.push_str(&format!("    {l}\n"));
            }
            if lines.len() > FAILURE_LINES {
                s.push_str(&format!("    ... ({} more lines)\n", lines.len() - FAILURE_LINES));
            }
        }
        s.push_str(&format!("\nScore: {}/{TOTAL_POINTS}\n", self.score()));
        s
    }

    /// Gradescope's autograder `results.json`.
    pub fn gradescope(&self) -> serde_json::Value {
        #[derive(Serialize)]
        struct Test<'a> {
            name: &'a str,
            score: u32,
            max_score: u32,
            status: &'a str,
            output: String,
        }
        let tests: Vec<Test> = self
            .tests
            .iter()
            .map(|t| Test {
                name: &t.name,
                score: t.score,
                max_score: t.max_score,
                status: if t.passed() { "passed" } else { "failed" },
                output: if t.passed() {
                    String::new()
                } else {
                    format!("Hint: {}\n\n{}", t.hint, t.failure())
                },
            })
            .collect();
        serde_json::json!({
            "score": self.score(),
            "max_score": TOTAL_POINTS,
            "output": format!("Lab {}: {}/{TOTAL_POINTS}", self.lab, self.score()),
            "tests": tests,
        })
    }

    /// A GitHub Classroom runner's result (what `autograding-grading-reporter` reads, base64
    /// encoded, from a step's `result` output).
    pub fn classroom(&self) -> serde_json::Value {
        let tests: Vec<serde_json::Value> = self
            .tests
            .iter()
            .map(|t| {
                serde_json::json!({
                    "name": t.name,
                    "status": if t.passed() { "pass" } else { "fail" },
                    "score": t.score,
                    "max_score": t.max_score,
                    "message": if t.passed() { String::new() } else {
                        format!("Hint: {}\n{}", t.hint, t.failure())
                    },
                    "test_code": t.run,
                    "filename": "",
                    "line_no": 0,
                    "execution_time": format!("{:.1}s", t.outcome.seconds),
                })
            })
            .collect();
        let all = self.tests.iter().all(Graded::passed);
        serde_json::json!({
            "version": 1,
            "status": if all { "pass" } else { "fail" },
            "max_score": TOTAL_POINTS,
            "tests": tests,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{Run, Test};

    fn lab() -> Lab {
        let test = |name: &str, points| Test {
            name: name.into(),
            run: Run::Host { package: "p".into(), test: name.replace(' ', "_") },
            points,
            timeout_s: 10,
            hint: format!("hint for {name}"),
        };
        Lab {
            name: "demo".into(),
            title: "Demo".into(),
            summary: "A demo.".into(),
            chapter: "labs/demo.md".into(),
            hours: "1".into(),
            student_files: vec![],
            graded_files: vec![],
            tests: vec![test("one", 30), test("two", 50), test("three", 20)],
        }
    }

    fn outcome(verdict: Verdict) -> Outcome {
        Outcome { verdict, seconds: 2.5 }
    }

    fn grade() -> Grade {
        let long: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        Grade::new(
            &lab(),
            vec![
                outcome(Verdict::Passed),
                outcome(Verdict::Failed(long)),
                outcome(Verdict::BuildFailed("error[E0308]: mismatched types".into())),
            ],
            "riscv64",
        )
    }

    #[test]
    fn the_score_counts_the_points_of_passed_tests() {
        assert_eq!(grade().score(), 30);
        let all = Grade::new(&lab(), vec![outcome(Verdict::Passed); 3], "riscv64");
        assert_eq!(all.score(), 100);
    }

    #[test]
    fn the_text_has_a_line_per_test_hints_the_first_lines_and_the_score() {
        let text = grade().text();
        assert!(
            text.starts_with("PASS  30/30  one\nFAIL   0/50  two\nFAIL   0/20  three\n"),
            "{text}"
        );
        assert!(
            text.contains("--- two (host::p::two)\nhint: hint for two\n    line 1\n"),
            "{text}"
        );
        assert!(text.contains("    line 15\n    ... (5 more lines)\n"), "{text}");
        assert!(!text.contains("line 16"), "{text}");
        assert!(
            text.contains("hint: hint for three\n    the build failed:\n    error[E0308]"),
            "{text}"
        );
        assert!(text.ends_with("\nScore: 30/100\n"), "{text}");
    }

    #[test]
    fn gradescope_and_classroom_json() {
        let g = grade().gradescope();
        assert_eq!(g["score"], 30);
        assert_eq!(g["max_score"], 100);
        let tests = g["tests"].as_array().unwrap();
        assert_eq!(tests.len(), 3);
        assert_eq!(tests[0]["name"], "one");
        assert_eq!(tests[0]["status"], "passed");
        assert_eq!(tests[1]["status"], "failed");
        assert_eq!(tests[1]["score"], 0);
        assert_eq!(tests[1]["max_score"], 50);
        assert!(tests[1]["output"].as_str().unwrap().starts_with("Hint: hint for two\n\nline 1"));
        let c = grade().classroom();
        assert_eq!(c["version"], 1);
        assert_eq!(c["status"], "fail");
        assert_eq!(c["max_score"], 100);
        let tests = c["tests"].as_array().unwrap();
        assert_eq!(tests[0]["status"], "pass");
        assert_eq!(tests[0]["score"], 30);
        assert_eq!(tests[2]["status"], "fail");
        assert_eq!(tests[2]["test_code"], "host::p::three");
        assert!(tests[2]["message"].as_str().unwrap().contains("error[E0308]"));
        let sum: u64 = tests.iter().map(|t| t["score"].as_u64().unwrap()).sum();
        assert_eq!(sum, 30);
    }
}
