//! `hgp hypergrad`: x(λ) by an inner solver, then each client's hyper-gradient d_{λ_i} F
//! ([`hgp_experiments::hypergrad`]), printed as text or JSON.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Result;
use hgp_experiments::hypergrad::{Config, DEFAULTS, Outcome};
use hgp_experiments::setup::L2_LAMBDA;
use hgp_graphs::Short;

use crate::adapter::{Adapter, Cli, Frame, Standard, print_json};
use crate::cli::{DataFlags, PipelineFlags, RunFlags};
use crate::report::{Table, sci};

/// The defaults listed at the end of `hgp hypergrad --help`.
pub fn after_help() -> String {
    format!(
        "Defaults (the logistic problem of the HGP paper, eq. 11, Fig. 1 settings):\n{}",
        DEFAULTS.help("hypergrad")
    )
}

/// Coordinates of d_λF shown per client in the text table (--json has all).
const SHOWN_COORDINATES: usize = 8;

/// Options of `hgp hypergrad`.
#[derive(clap::Args, Debug)]
#[command(mut_arg("seed", |a| a.help("Seed of every random choice (data, network, batches) [default: 0]")))]
#[command(mut_arg("json", |a| a.help("Print one JSON object {\"x\", \"outer_loss\", \"hypergrad\", \"comm\", \"inner\", \"estimator\", \"eta\", \"curvature\"} instead of text (\"inner\": {\"solver\", \"steps\", \"consensus_error\", \"stationarity\", \"initial_stationarity\", \"newton_step\", \"converged\", \"comm\"}; with --averager central --fraction C < 1 also \"central\": {\"fraction\", \"mean\", \"spread\"}: the mean over participation draws and this draw's relative distance from it; \"note\" where the estimate is identically 0 for a reason worth saying) (with --engine mpi also \"mpi\": {\"ranks\", \"messages\", \"bytes\", \"local_links\", \"collectives\", \"collective_bytes\"}, summed over ranks)")))]
pub struct Hypergrad {
    #[command(flatten)]
    data: DataFlags,
    #[arg(long, value_name = "FILE", help = format!(
        "λ, one row per client with one L2 weight (≥ 0) per coordinate of x (comma separated) \
         [default: {L2_LAMBDA} everywhere]"
    ))]
    lambda: Option<PathBuf>,
    #[command(flatten)]
    pipeline: PipelineFlags,
    #[command(flatten)]
    run: RunFlags,
}

impl Cli for Hypergrad {
    type Config = Config;

    fn config(&self) -> Result<Config> {
        self.run.config(|c: &mut Config| {
            self.data.apply(&mut c.data);
            self.pipeline.apply(&mut c.pipeline);
            if let Some(lambda) = &self.lambda {
                c.lambda = Some(lambda.clone());
            }
        })
    }
}

impl Standard for Hypergrad {
    /// Its text has the engine in its aligned block.
    const ENGINE_LINE: bool = false;

    fn frame(&self) -> Frame<'_> {
        Frame::printing(&self.run)
    }

    fn report(
        adapter: &Adapter<'_, Self>,
        outcome: &Outcome,
        mpi: Option<serde_json::Value>,
        _: Instant,
    ) -> Result<()> {
        if adapter.flags.run.json {
            return print_json(outcome, mpi);
        }
        print_text(outcome, mpi.as_ref());
        Ok(())
    }
}

/// The estimate in words: the inner solve, x̄, F, the estimator and a table of d_λF.
fn print_text(o: &Outcome, mpi: Option<&serde_json::Value>) {
    let inner = &o.inner;
    println!("data:       {}", o.details.description);
    println!("inner:      {}", inner.solver);
    println!(
        "            consensus error {}, stationarity ‖Σ∂g_i(x̄)‖ {} ({} at the start), {} steps",
        sci(inner.consensus_error),
        sci(inner.stationarity),
        sci(inner.initial_stationarity),
        inner.steps
    );
    if let Some(step) = inner.newton_step {
        println!(
            "            distance to the solution ‖H⁻¹∇G(x̄)‖ {} ({:.2} % of ‖x̄‖)",
            sci(step),
            100.0 * step / o.details.scale.max(f64::MIN_POSITIVE)
        );
    }
    println!(
        "x̄:          [{}]",
        o.x.iter()
            .map(|v| format!("{v:.6}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!("outer loss: F = Σ_i f_i(x_i) = {:.6}", o.outer_loss);
    println!("estimator:  {}", o.estimator);
    if let Some(a) = &o.aggitd
        && let Some(spread) = a.q_spread
    {
        println!(
            "            Q = {}; this single-Q estimate differs from its mean over Q ∈ {{0, …, N}} by {:.1} % (relative): AggITD is unbiased only over Q",
            a.q,
            100.0 * spread
        );
    }
    if let Some(c) = &o.central
        && let Some(spread) = c.spread
    {
        println!(
            "            each average is over a random fraction C = {} of the clients: this estimate differs by {:.1} % (relative) from its mean over the draws (HGP with the exact average); it is unbiased, not precise",
            Short(c.fraction),
            100.0 * spread
        );
    }
    if let (Some(eta), Some(l)) = (o.eta, o.curvature) {
        println!(
            "            η = 1/L̂ = {eta:.6} (L̂ = {l:.6}, the mean Hessian's largest curvature)"
        );
    }
    println!("            {}", o.comm.text);
    if let Some(t) = mpi {
        println!(
            "engine:     MPI, {} ranks: {} messages ({} bytes) between ranks, {} links within a rank, {} collectives",
            t["ranks"], t["messages"], t["bytes"], t["local_links"], t["collectives"]
        );
        println!("            {}", crate::engine::per_rank_line(t));
    }
    println!(
        "            lower level and estimate together: {} rounds",
        inner.comm.rounds + o.comm.rounds
    );
    println!();
    let d = o.hypergrad.iter().map(Vec::len).max().unwrap_or(0);
    let shown = d.min(SHOWN_COORDINATES);
    let mut table = Table::new(
        std::iter::once("client".to_string()).chain((0..shown).map(|j| format!("d_λF[{j}]"))),
    );
    for (i, row) in o.hypergrad.iter().enumerate() {
        table.row(
            std::iter::once(i.to_string())
                .chain(row.iter().take(shown).map(|v| format!("{v:.4e}"))),
        );
    }
    println!("{}", table.terminal());
    if let Some(note) = &o.note {
        println!("note: {note}");
    }
    if shown < d {
        println!("(the first {shown} of {d} coordinates; --json prints all)");
    }
}
