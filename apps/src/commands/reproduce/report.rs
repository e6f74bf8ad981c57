//! `REPORT.md` and `report.json`: every claim with the paper's number, ours over seeds, the
//! verdict and why.

use std::path::Path;

use anyhow::Result;
use serde::Serialize;
use serde_json::{Value, json};

use super::plan::Paper;
use super::verdict::{RULES, Verdict};
use crate::report::{Table, write_whole};

/// One seed's outcome of a claim's test.
#[derive(Clone, Debug, Serialize)]
pub struct SeedOutcome {
    /// The seed.
    pub seed: u64,
    /// Whether it passed the claim's test.
    pub passed: bool,
    /// Its headline number (null when it is not a number: a diverged run, an undefined
    /// score).
    pub value: Option<f64>,
}

/// One claim's result.
#[derive(Clone, Debug, Serialize)]
pub struct ClaimResult {
    /// The paper's short name.
    pub paper: &'static str,
    /// The claim's id.
    pub id: &'static str,
    /// Its table or figure.
    #[serde(rename = "where")]
    pub place: &'static str,
    /// The claim in the paper's words.
    pub claim: &'static str,
    /// The paper's number(s).
    pub paper_value: &'static str,
    /// The test one seed passes or fails.
    pub test: &'static str,
    /// Ours: mean ± sd over seeds (or why there is nothing).
    pub measured: String,
    /// Each seed's outcome.
    pub seeds: Vec<SeedOutcome>,
    /// The verdict.
    pub verdict: Verdict,
    /// One line of why.
    pub why: String,
    /// The figures the claim cites, relative to the report's folder.
    pub figures: Vec<String>,
    /// What we found out about the claim where it does not hold at `--preset cpu` (null
    /// where there is nothing to add).
    pub note: Option<&'static str>,
}

/// One experiment's record in the report: what ran and what it took.
#[derive(Clone, Debug, Serialize)]
pub struct JobRecord {
    /// The experiment's id (its folder under `runs/`).
    pub id: &'static str,
    /// Its command line (`--seed`, `--out` and `--json` added per seed).
    pub command: String,
    /// Seconds each seed took (null for a seed that failed or did not run).
    pub seconds: Vec<Option<f64>>,
    /// Why it did not run at this preset, or why a seed failed.
    pub note: Option<String>,
}

/// The whole report.
pub struct Report<'a> {
    /// How it was invoked.
    pub invocation: String,
    /// `--preset`.
    pub preset: &'static str,
    /// The seeds.
    pub seeds: Vec<u64>,
    /// The papers reported.
    pub papers: Vec<Paper>,
    /// Seconds this run took (the experiments run now; kept ones took theirs earlier).
    pub wall_seconds: f64,
    /// Seconds every experiment seed in the report took, this run's and those kept from
    /// an earlier one.
    pub experiment_seconds: f64,
    /// Every claim's result, papers in order.
    pub claims: &'a [ClaimResult],
    /// Every experiment.
    pub jobs: &'a [JobRecord],
}

impl Report<'_> {
    /// The report as JSON: `{"claims": [{"paper", "id", "claim", "paper_value", "measured",
    /// "seeds", "verdict", "why", …}], …}`.
    pub fn json(&self) -> Result<Value> {
        Ok(json!({
            "preset": self.preset,
            "seeds": self.seeds,
            "papers": self.papers.iter().map(|p| p.name()).collect::<Vec<_>>(),
            "wall_seconds": self.wall_seconds,
            "experiment_seconds": self.experiment_seconds,
            "rules": RULES,
            "claims": serde_json::to_value(self.claims)?,
            "experiments": serde_json::to_value(self.jobs)?,
        }))
    }

    /// The verdict table (one row a claim), for the terminal and the report's top.
    pub fn table(&self) -> Table {
        let mut t = Table::new(["paper", "claim", "where", "verdict", "seeds passed"]);
        for c in self.claims {
            let passed = c.seeds.iter().filter(|s| s.passed).count();
            t.row([
                c.paper.to_string(),
                c.id.to_string(),
                c.place.to_string(),
                c.verdict.label().to_string(),
                if c.seeds.is_empty() {
                    "–".to_string()
                } else {
                    format!("{passed} / {}", c.seeds.len())
                },
            ]);
        }
        t
    }

    /// `REPORT.md`.
    pub fn markdown(&self) -> String {
        let mut md = String::new();
        md.push_str("# Reproduction report\n\n");
        let clock = |s: f64| crate::progress::clock(std::time::Duration::from_secs_f64(s));
        md.push_str(&format!(
            "`{}`: preset `{}`, seeds {}; the experiments took {} ({} this run).\n\n",
            self.invocation,
            self.preset,
            self.seeds
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            clock(self.experiment_seconds),
            clock(self.wall_seconds)
        ));
        md.push_str(RULES);
        md.push_str("\n\n");
        let mut tally = Table::new(["verdict", "claims"]);
        for v in Verdict::ALL {
            let k = self.claims.iter().filter(|c| c.verdict == v).count();
            tally.row([v.label().to_string(), k.to_string()]);
        }
        md.push_str(&tally.markdown());
        md.push('\n');
        md.push_str(&self.table().markdown());
        for paper in &self.papers {
            md.push_str(&format!("\n## {}\n", paper.title()));
            for c in self.claims.iter().filter(|c| c.paper == paper.name()) {
                md.push_str(&claim_section(c));
            }
        }
        md.push_str("\n## Experiments\n\n");
        let mut t = Table::new(["experiment", "command", "minutes a seed", "note"]);
        for j in self.jobs {
            let done: Vec<f64> = j.seconds.iter().flatten().copied().collect();
            let minutes = if done.is_empty() {
                "–".to_string()
            } else {
                format!("{:.1}", done.iter().sum::<f64>() / done.len() as f64 / 60.0)
            };
            t.row([
                j.id.to_string(),
                format!("`hgp {}`", j.command),
                minutes,
                j.note.clone().unwrap_or_default(),
            ]);
        }
        md.push_str(&t.markdown());
        md.push_str(
            "\nEach experiment's files (its tables, CSV, figures and `hgp.log`) are in \
             `runs/<experiment>/seed-<seed>/`, with the JSON it printed in `result.json`.\n",
        );
        md
    }

    /// Writes `REPORT.md` and `report.json` in `out`, each whole.
    pub fn write(&self, out: &Path) -> Result<()> {
        write_whole(&out.join("REPORT.md"), self.markdown().as_bytes())?;
        let json = serde_json::to_string_pretty(&self.json()?)?;
        write_whole(&out.join("report.json"), format!("{json}\n").as_bytes())
    }
}

fn claim_section(c: &ClaimResult) -> String {
    let passed = c.seeds.iter().filter(|s| s.passed).count();
    let seeds = if c.seeds.is_empty() {
        String::new()
    } else {
        format!(" ({passed} of {} seeds)", c.seeds.len())
    };
    let mut s = format!(
        "\n### {} — {}\n\n> {}\n\n- **Paper:** {}\n- **Ours** (mean ± sd over seeds): {}\n- **Test** (each seed): {}\n- **Verdict: {}**{seeds} — {}\n",
        c.id,
        c.place,
        c.claim,
        c.paper_value,
        c.measured,
        c.test,
        c.verdict.label(),
        c.why
    );
    if let Some(note) = c.note {
        s.push_str(&format!("- **What we found:** {note}\n"));
    }
    for f in &c.figures {
        s.push_str(&format!("\n![{}]({f})\n", c.id));
    }
    s
}
