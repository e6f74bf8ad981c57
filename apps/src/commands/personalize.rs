//! `hgp personalize`: decentralized personalization (HGP Sec. 5.3, Table 2, Fig. 4; PDBO
//! Table 1), as [`hgp_experiments::personalize`] runs it; written as personalize.csv (a row
//! per method and network, as each finishes), personalize.md and the terminal table,
//! curves.svg (Fig. 4), or JSON; with several seeds, each seed's in DIR/seed-K and their
//! mean ± sd in DIR.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use hgp_experiments::ExperimentConfig;
use hgp_experiments::personalize::{
    COLOUR_SIZES, Cell, CellJson, Checked, Clustering, Config, ETA, FEDEM_COMPONENTS,
    InnerProcedure, Method, ModelKind, OneSeed, Outcome, PUSH_STEPS, PersonalizeEstimator, Preset,
    SIZES, SeedRow, SeedRun, Sizes, TEXT_SIZES, Training, over_seeds, prepare_seed,
    run_prepared_seed,
};
use hgp_experiments::setup::{
    Choice, EtaArg, NetworkKind, TEXT_QUICK_WINDOWS, parse_eta, text_seq,
};
use serde::{Deserialize, Serialize};

use crate::adapter::print_json;
use crate::adapter::{Adapter, Cli};
use crate::cli::{ImageFlags, RunFlags, TextFlags, choice, eta_help, flags, power_help};
use crate::engine::Engine;
use crate::lifecycle::{Experiment, Output};
use crate::plot::{Figure, Panel, Series};
use crate::progress::Speaker;
use crate::report::{
    CsvCells, CsvRow, Reporter, Table, parse_list, prepare_out, record_settings_ignoring,
    sci_exact, sci_list, write_csv,
};

/// The defaults listed at the end of `hgp personalize --help`.
pub fn after_help() -> String {
    let line = |s: &Sizes| {
        format!(
            "  {}: --clients {} --images {} --model {} --sgp-steps {} --rounds {} --batch {} --outer-steps {} --neumann-terms {} --seeds {}",
            s.label,
            s.clients,
            s.images.map_or("all".to_string(), |n| n.to_string()),
            s.model_name,
            s.steps,
            s.rounds,
            s.batch,
            s.outer_steps,
            s.neumann_terms,
            s.seeds
        )
    };
    format!(
        "Defaults:\n{}\n{}\n{}\n{}\n{}\n  --preset cpu with colour images: as --quick, 3 seeds\n{} --seq {}\n{} --seq {} (each character's first {} training and {} validation and test windows)\n  --preset cpu with text: as --quick, 3 seeds\n  all: --push-steps {PUSH_STEPS} --eta {ETA}\n  rates: HGP Table 6 with grey images; paper 004 Table 2 with colour images, text and --estimator pdbo (inner rate 0.5 for the digits, 0.1 for cifar10, 0.2 for cifar100, 10.0 for shakespeare, × 0.1 at the last 100 and 50 of its 600 or 1,200 steps; Adam's rate 1.0; L2 on λ 0.01)\n  --estimator pdbo: --methods sgp,local,pdbo-mtl-local,hgp-mtl (paper 004 Table 1) --networks randd\n  --inner: marfoq with grey images and --estimator hgp (HGP Table 2), sgp otherwise (paper 004 runs SGP on every network); --components {FEDEM_COMPONENTS}\n  Marfoq et al.'s procedure: HGP Table 7's rates (log10): sgp -1.5 on fc, -1.0 on fixu; local, fedavg+, clustered-fl, hgp-pl -1.5; fedprox -0.5; pfedme, prox-personal, fedem, d-fedem, hgp-mtl -1.0; momentum 0.9 (fedprox, prox-personal: none); fedprox mu 0.01, pfedme lambda 1 and K 5, prox-personal mu 1, clustered-fl eps1 0.4, eps2 1.6",
        line(&SIZES[0]),
        line(&SIZES[1]),
        line(&SIZES[2]),
        line(&COLOUR_SIZES[0]),
        line(&COLOUR_SIZES[1]),
        line(&TEXT_SIZES[0]).replace(" --images all", ""),
        text_seq(false),
        line(&TEXT_SIZES[1]).replace(" --images all", ""),
        text_seq(true),
        TEXT_QUICK_WINDOWS.0,
        TEXT_QUICK_WINDOWS.1
    )
}

flags! {
    /// The options of `hgp personalize` that are its own.
    pub struct PersonalizeFlags => Config {
        /// Methods to compare (comma separated) [default: all that apply on the networks (HGP
        /// Table 2's rows; the comparison methods fedprox … fedem need a server, fc, d-fedem
        /// fixu's matrix: n/a elsewhere); with --estimator pdbo the four of paper 004's Table 1:
        /// sgp, local, pdbo-mtl-local, hgp-mtl (reported as pdbo-mtl)].
        #[arg(long, value_parser = choice::<Method>(), value_delimiter = ',')]
        methods: Option<Vec<Method>> => some,
        /// Networks (comma separated) [default: the four of HGP Table 2, fc, fixu, randu, randd;
        /// with --estimator pdbo paper 004's randd]; exp (one peer per step) takes Table 6's rates
        /// of the time-varying networks.
        #[arg(long, value_parser = choice::<NetworkKind>(), value_delimiter = ',')]
        networks: Option<Vec<NetworkKind>> => some,
        #[command(flatten)]
        data: ImageFlags => group,
        #[command(flatten)]
        text: TextFlags => group,
        /// Network architecture [default: listed at the end].
        #[arg(long, value_parser = choice::<ModelKind>())]
        model: Option<ModelKind> => some,
        /// Where the networks run [default: cpu].
        #[arg(long, value_parser = choice::<hgp_experiments::setup::Device>())]
        device: Option<hgp_experiments::setup::Device> => set,
        /// A small run of the whole table (small CNN, 3 clients, 600 images, 20 SGP steps or 3
        /// rounds on batches of 16), under a minute on 2 cores; with colour images the CIFAR CNN, 4 clients on at most 4,000
        /// images (each client's parts scaled down from the paper's, said in the log), 100 steps
        /// of batch 16, 3 outer steps (about 5 minutes); with text 24 speaking characters of 100
        /// training windows of 20 symbols, an LSTM of 2 × 32 units, 100 steps of batch 16, 3
        /// outer steps (about 14 minutes). The default is the paper's setting, sized for a GPU
        /// (`--features cuda`): on a CPU it takes days (weeks with MobileNet-v2, years with the
        /// LSTM).
        #[arg(long, conflicts_with = "preset")]
        quick: bool => on,
        /// A named setting. `cpu`: the whole table at a size two CPU cores finish in under 45
        /// minutes, 3 seeds: 10 clients on the embedded 10,000 digits, the MLP, 200 SGP steps on
        /// batches of 32, 3 outer steps (enough that SGP and Local train: their training accuracy and inner
        /// gradient norm are reported). Each seed's table goes to DIR/seed-K/, their mean ± sd
        /// to DIR/personalize.md and personalize-seeds.csv.
        #[arg(long, value_parser = choice::<Preset>(), value_name = "NAME")]
        preset: Option<Preset> => some,
        /// Runs of the whole table, with seeds --seed, --seed + 1, …; with more than one, each
        /// seed's outputs go to DIR/seed-K/ and the mean ± sd over seeds to DIR [default: listed
        /// at the end].
        #[arg(long, value_name = "N")]
        seeds: Option<usize> => some,
        /// Inner SGP steps; the learning rate is multiplied by 0.1 at 5/6 and 11/12 of them
        /// (steps 500 and 550 of 600, as in HGP), with colour images at 11/12 and 23/24 (the
        /// last 100 and 50 of paper 004's 1,200) [default: listed at the end].
        #[arg(long, value_name = "T")]
        sgp_steps: Option<usize> => some,
        /// Rounds of Marfoq et al.'s procedure (one local epoch per client each round): the
        /// comparison methods everywhere, and SGP, Local and the λ-tuning methods on fc and fixu
        /// with --inner marfoq; the rate × 0.1 after half and three quarters of them [default:
        /// listed at the end].
        #[arg(long, value_name = "R")]
        rounds: Option<usize> => some,
        /// The inner solve of SGP, Local, HGP-PL and HGP-MTL on fc and fixu: Marfoq et al.'s
        /// procedure (HGP Sec. 5.3: "All baselines and HGP inner-optimizations on FC and FixU ran
        /// a training procedure following Marfoq et al.") or SGP as on randu and randd [default:
        /// marfoq with grey images and --estimator hgp, sgp otherwise].
        #[arg(long, value_parser = choice::<InnerProcedure>(), value_name = "HOW")]
        inner: Option<InnerProcedure> => some,
        /// One learning rate for every method on Marfoq et al.'s procedure, in place of HGP
        /// Table 7's (tuned for EMNIST's CNN by grid search; at another size a rate may need
        /// choosing again) [default: Table 7's, listed at the end].
        #[arg(long, value_name = "LR")]
        procedure_lr: Option<f64> => some,
        /// Grid-search the rate of every method on Marfoq et al.'s procedure over HGP App.
        /// A.3's grid (10^-0.5, 10^-1, …, 10^-3) by validation accuracy, in place of Table 7's
        /// rates: the same tuning budget for every method (six runs a cell); the rate chosen
        /// is in the CSV and the JSON (tuned_lr).
        #[arg(long)]
        tune_rates: bool => on,
        #[arg(long, value_name = "LR", help = format!(
            "One Adam learning rate on λ for every λ-tuning method and network, in place of \
             the table's [default: {}]", hgp_experiments::personalize::hyper_lr_default_text()
        ))]
        hyper_lr: Option<f64> => some,
        /// FedEM's and D-FedEM's components K (base networks mixed per client) [default: 3].
        #[arg(long, value_name = "K")]
        components: Option<usize> => set,
        /// Clustered-FL's ε₁ (Sattler et al. Alg. 1): a cluster splits only while the norm of
        /// its clients' mean update is below it [default: 0.4, Sattler et al.'s]. Each run's
        /// clusters and largest client update are in the CSV and the JSON (clusters,
        /// largest_update).
        #[arg(long, value_name = "E")]
        cfl_eps1: Option<f64> => some,
        /// Clustered-FL's ε₂: … and some client's update ‖Δθ_i‖ is above it (at a scale
        /// where no update reaches it the method is FedAvg on the procedure) [default: 1.6].
        #[arg(long, value_name = "E")]
        cfl_eps2: Option<f64> => some,
        /// Mini-batch size of the inner solve and of HGP [default: listed at the end].
        #[arg(long, value_name = "B")]
        batch: Option<usize> => some,
        /// Outer (Adam) steps on λ [default: listed at the end].
        #[arg(long, value_name = "K")]
        outer_steps: Option<usize> => some,
        /// Hyper-gradient estimator of the methods that tune λ: the NeurIPS paper's HGP, or
        /// paper 004's (its Alg. 2; the inner solve is then SGP step-then-mix on every network,
        /// and hgp-pl / hgp-mtl are reported as pdbo-pl / pdbo-mtl, paper 004's Table 1)
        /// [default: hgp].
        #[arg(long, value_parser = choice::<PersonalizeEstimator>())]
        estimator: Option<PersonalizeEstimator> => set,
        /// Neumann terms M of HGP [default: listed at the end].
        #[arg(long, value_name = "M")]
        neumann_terms: Option<usize> => some,
        /// Push-Sum (or gossip) steps S per average [default: 10].
        #[arg(long, value_name = "S")]
        push_steps: Option<usize> => set,
        #[arg(long, value_parser = parse_eta, value_name = "η", help = eta_help(ETA))]
        eta: Option<EtaArg> => some,
        #[arg(long, value_name = "K", help = power_help())]
        power_iterations: Option<usize> => some,
    }
}

/// Options of `hgp personalize`.
#[derive(clap::Args, Debug)]
#[command(mut_arg("seed", |a| a.help("Seed of every random choice [default: 0]")))]
#[command(mut_arg("json", |a| a.help("Print one JSON object {\"rows\": [{\"method\", \"network\", \"average\", \"bottom10\"}, ...]}")))]
pub struct Personalize {
    #[command(flatten)]
    flags: PersonalizeFlags,
    /// Output directory for personalize.csv, personalize.md, curves.svg and hgp.log.
    /// One run at a time holds it; a fresh run first removes the files an earlier run wrote
    /// there (and only those: hgp-manifest.json lists them; a file hgp did not write is never replaced), --resume keeps and continues them; a folder another command
    /// wrote is refused.
    #[arg(long, default_value = "out/personalize", value_name = "DIR")]
    out: PathBuf,
    /// Keep the rows already in personalize.csv (from an interrupted run with the same
    /// settings) and run only the missing method/network pairs.
    #[arg(long)]
    resume: bool,
    #[command(flatten)]
    run: RunFlags,
}

impl Cli for Personalize {
    type Config = Config;

    fn config(&self) -> Result<Config> {
        self.run.config(|c| self.flags.apply(c))
    }

    fn admit(&self, checked: &Checked) -> Result<()> {
        if self.resume && checked.seeds > 1 {
            bail!(
                "--resume works on one seed's run: resume each DIR/seed-K with --seed K --seeds 1 --out DIR/seed-K"
            );
        }
        Ok(())
    }
}

/// What a run computed: one seed's table and the data's description, or the tables of
/// several seeds (each already written to its own `seed-K` folder).
pub enum Tables {
    /// One seed.
    One(SeedRun),
    /// Several seeds, in order.
    Seeds(Vec<Vec<Cell>>),
}

/// The settings a resumed run may change: which methods and networks it computes.
const SELECTION: &[&str] = &["options.methods", "options.networks"];

/// Each seed's table is a run of its own in its own folder (`--out` itself for one seed,
/// `DIR/seed-K` for several), with its settings, log and rows written as they finish.
impl Experiment for Adapter<'_, Personalize> {
    const COMMAND: &'static str = "personalize";

    fn files(&self) -> Vec<&'static str> {
        vec![
            "personalize.csv",
            "personalize.md",
            "personalize-seeds.csv",
            "curves.svg",
            "seed-*",
        ]
    }

    fn resume(&self) -> bool {
        self.flags.resume
    }

    type Setup = ();
    type Outcome = Tables;

    /// The folder is held and cleared as a whole; the settings and the log are each
    /// seed's (see [`Adapter::run_one`]); with several seeds the folder's settings are the
    /// whole run's.
    fn output(&self) -> Output<'_> {
        self.flags.run.output(Some(&self.flags.out))
    }

    fn settings(&self) -> Result<Option<(serde_json::Value, bool)>> {
        if self.checked.seeds > 1 {
            return crate::lifecycle::config_settings(&self.config, false);
        }
        Ok(None)
    }

    fn log_in_folder(&self) -> bool {
        false
    }

    fn setup(&self, engine: &Engine) -> Result<()> {
        if engine.is_root() {
            prepare_out(&self.flags.out)?;
        }
        Ok(())
    }

    fn run(&self, (): (), engine: &Engine, _: &Reporter) -> Result<Tables> {
        let seeds = self.checked.seeds;
        if seeds == 1 {
            let run = self.run_one(self.checked.seed, &self.flags.out, engine)?;
            return Ok(Tables::One(run));
        }
        let mut runs = Vec::new();
        for k in 0..seeds as u64 {
            let seed = self.checked.seed + k;
            let out = self.flags.out.join(format!("seed-{seed}"));
            if engine.is_root() {
                prepare_out(&out)?;
                if !self.flags.run.json {
                    eprintln!("seed {seed} ({} of {seeds}): {}", k + 1, out.display());
                }
            }
            let run = self.run_one(seed, &out, engine)?;
            if engine.is_root() {
                self.write_report(&run.cells, &run.description, &out, false, None)?;
            }
            runs.push(run.cells);
        }
        Ok(Tables::Seeds(runs))
    }

    fn report(&self, outcome: &Tables, mpi: Option<serde_json::Value>) -> Result<()> {
        match outcome {
            Tables::One(run) => {
                self.write_report(&run.cells, &run.description, &self.flags.out, true, mpi)
            }
            Tables::Seeds(runs) => self.report_seeds(runs, mpi),
        }
    }
}

impl Adapter<'_, Personalize> {
    /// Runs the table for one seed in `out`: its settings (the config of that seed alone),
    /// its log and its rows as they finish (rank 0 writes), then the rows in table order.
    fn run_one(&self, seed: u64, out: &Path, engine: &Engine) -> Result<SeedRun> {
        let root = engine.is_root();
        let resume = self.flags.resume;
        // The data first: a seed whose data fail leaves its folder as it was.
        let speaker = Speaker::new(root, self.flags.run.json);
        let data = prepare_seed(&self.checked, seed, engine.placement(), &speaker)?;
        let reporter = engine.agree((|| -> Result<Reporter> {
            if !root {
                return Reporter::silent();
            }
            let tagged = ExperimentConfig::from(self.config.for_seed(seed));
            record_settings_ignoring(out, &serde_json::to_value(tagged)?, resume, SELECTION)?;
            Reporter::new(
                &self.flags.run.report,
                Some(out),
                self.flags.run.json,
                resume,
            )
        })())?;
        let csv = out.join("personalize.csv");
        let rows = CsvCells::<Cell, CellRow>::new(csv.clone(), HEADER, resume);
        let run = run_prepared_seed(&self.checked, data, engine.placement(), &reporter, &rows)?;
        if root {
            write_csv(&csv, HEADER, run.cells.iter().map(CellRow::from_cell))?;
        }
        Ok(run)
    }
}

/// The value of `E` named `name` (a method or a network in a file).
fn by_name<E: Choice>(name: &str) -> Result<E> {
    E::variants()
        .iter()
        .copied()
        .find(|e| e.choice_name() == name)
        .ok_or_else(|| anyhow::anyhow!("{name:?} is not a name this table knows"))
}

/// The CSV's header.
pub const HEADER: &[&str] = &[
    "method",
    "network",
    "average",
    "bottom10",
    "chosen_step",
    "outer_loss_first",
    "outer_loss_last",
    "validation",
    "outer_loss",
    "train_accuracy",
    "grad_norm",
    "grad_norm_start",
    "tuned_lr",
    "clusters",
    "largest_update",
];

/// The header of personalize-seeds.csv.
const SEED_HEADER: &[&str] = &[
    "method",
    "network",
    "seeds",
    "average",
    "average_std",
    "bottom10",
    "train_accuracy",
    "grad_norm",
    "grad_norm_start",
];

/// One row of personalize.csv (the names are the CSV header).
#[derive(Debug, Serialize, Deserialize)]
struct CellRow {
    method: String,
    network: String,
    #[serde(serialize_with = "sci_exact")]
    average: f64,
    #[serde(serialize_with = "sci_exact")]
    bottom10: f64,
    chosen_step: usize,
    #[serde(serialize_with = "sci_exact")]
    outer_loss_first: f64,
    #[serde(serialize_with = "sci_exact")]
    outer_loss_last: f64,
    #[serde(serialize_with = "sci_list", deserialize_with = "parse_list")]
    validation: Vec<f64>,
    #[serde(serialize_with = "sci_list", deserialize_with = "parse_list")]
    outer_loss: Vec<f64>,
    /// Empty for the methods that tune λ.
    train_accuracy: Option<f64>,
    grad_norm: Option<f64>,
    grad_norm_start: Option<f64>,
    /// The rate the grid search chose (`--tune-rates`); empty otherwise.
    tuned_lr: Option<f64>,
    /// Clustered-FL's clusters at the end; empty for the other methods.
    #[serde(default)]
    clusters: Option<usize>,
    /// Clustered-FL's largest client update of any round; empty for the other methods.
    #[serde(default)]
    largest_update: Option<f64>,
}

impl CsvRow<Cell> for CellRow {
    fn from_cell(c: &Cell) -> Self {
        Self {
            method: c.method.name().to_string(),
            network: c.network.name().to_string(),
            average: c.average,
            bottom10: c.bottom10,
            chosen_step: c.chosen,
            outer_loss_first: c.outer_loss.first().copied().unwrap_or(f64::NAN),
            outer_loss_last: c.outer_loss.last().copied().unwrap_or(f64::NAN),
            validation: c.curve.clone(),
            outer_loss: c.outer_loss.clone(),
            train_accuracy: c.training.map(|t| t.accuracy),
            grad_norm: c.training.map(|t| t.grad_norm),
            grad_norm_start: c.training.map(|t| t.grad_norm_start),
            tuned_lr: c.tuned_lr,
            clusters: c.clustering.map(|k| k.clusters),
            largest_update: c.clustering.map(|k| k.largest_update),
        }
    }

    fn into_cell(self) -> Result<Cell> {
        let r = self;
        Ok(Cell {
            method: by_name(&r.method)?,
            network: by_name(&r.network)?,
            average: r.average,
            bottom10: r.bottom10,
            chosen: r.chosen_step,
            curve: r.validation,
            outer_loss: r.outer_loss,
            training: match (r.train_accuracy, r.grad_norm, r.grad_norm_start) {
                (Some(accuracy), Some(grad_norm), Some(grad_norm_start)) => Some(Training {
                    accuracy,
                    grad_norm,
                    grad_norm_start,
                }),
                _ => None,
            },
            tuned_lr: r.tuned_lr,
            clustering: match (r.clusters, r.largest_update) {
                (Some(clusters), Some(largest_update)) => Some(Clustering {
                    clusters,
                    largest_update,
                }),
                _ => None,
            },
        })
    }
}

/// A method that does not apply on a network (HGP Table 2's "n/a").
const NOT_APPLICABLE: &str = "n/a";

/// What the table of the rates chosen by `--tune-rates` shows.
const TUNED_CAPTION: &str = "rates on Marfoq et al.'s procedure chosen by validation accuracy over HGP App. A.3's grid (--tune-rates), log10 (\"-\": run by SGP, at Table 6's rate)";

/// What the table of the inner solves shows.
const TRAINING_CAPTION: &str =
    "inner solves of SGP and Local: training accuracy %, inner gradient norm at the end (at x0)";

impl Adapter<'_, Personalize> {
    /// The table of the inner solves of SGP and Local (None if neither ran).
    fn training_table(
        &self,
        training: impl Fn(Method, NetworkKind) -> Option<Training>,
    ) -> Option<Table> {
        let methods: Vec<Method> = self
            .checked
            .methods
            .iter()
            .copied()
            .filter(|m| matches!(m, Method::Sgp | Method::Local))
            .collect();
        if methods.is_empty() {
            return None;
        }
        let mut table = Table::new(
            std::iter::once("method").chain(self.checked.networks.iter().map(|k| k.name())),
        );
        for m in methods {
            table.row(std::iter::once(m.name().to_string()).chain(
                self.checked.networks.iter().map(|&k| match training(m, k) {
                    Some(t) => format!(
                        "{:.1}, {:.3} ({:.3})",
                        100.0 * t.accuracy,
                        t.grad_norm,
                        t.grad_norm_start
                    ),
                    None => "-".to_string(),
                }),
            ));
        }
        Some(table)
    }

    /// The mean ± sd over seeds of each cell: personalize.md and personalize-seeds.csv in
    /// --out, printed as a table or JSON.
    fn report_seeds(&self, runs: &[Vec<Cell>], mpi: Option<serde_json::Value>) -> Result<()> {
        let over = over_seeds(&self.checked, runs);
        let seeds = over.seeds;
        let row = |m: Method, k: NetworkKind| {
            over.rows
                .iter()
                .find(|r| r.method == m.label(self.checked.table.estimator) && r.network == k)
        };
        let mut table = Table::new(
            std::iter::once("method").chain(self.checked.networks.iter().map(|k| k.name())),
        );
        for &m in &self.checked.methods {
            let mut line = vec![m.label(self.checked.table.estimator).to_string()];
            for &k in &self.checked.networks {
                line.push(match row(m, k) {
                    _ if m.applies(k).is_err() => NOT_APPLICABLE.to_string(),
                    Some(SeedRow {
                        average: Some(a),
                        average_std: Some(s),
                        bottom10: Some(b),
                        ..
                    }) => format!("{:.1} ± {:.1} / {:.1}", 100.0 * a, 100.0 * s, 100.0 * b),
                    _ => "-".to_string(),
                });
            }
            table.row(line);
        }
        let training = self.training_table(|m, k| {
            let r = row(m, k)?;
            Some(Training {
                accuracy: r.train_accuracy?,
                grad_norm: r.grad_norm?,
                grad_norm_start: r.grad_norm_start?,
            })
        });
        let caption = format!(
            "test accuracy, % (mean ± sd over {seeds} seeds of the average over clients / mean 10th-percentile client)"
        );
        let mut md = format!("{caption}\n\n{}", table.markdown());
        if let Some(t) = &training {
            md.push_str(&format!(
                "\n{TRAINING_CAPTION} (mean over seeds)\n\n{}",
                t.markdown()
            ));
        }
        let out = &self.flags.out;
        let md_path = out.join("personalize.md");
        crate::report::write_whole(&md_path, md.as_bytes())?;
        let csv = out.join("personalize-seeds.csv");
        write_csv(&csv, SEED_HEADER, over.rows.iter())?;
        if self.flags.run.json {
            return print_json(&Outcome::Seeds(over), mpi);
        }
        println!("{caption}\n\n{}", table.terminal());
        if let Some(t) = &training {
            println!("\n{TRAINING_CAPTION} (mean over seeds)\n{}", t.terminal());
        }
        println!(
            "\nwrote {}, {} and each seed's outputs in {}/seed-K",
            md_path.display(),
            csv.display(),
            out.display()
        );
        Ok(())
    }

    /// Writes the table, the markdown, the figure, and prints the table or the JSON.
    fn write_report(
        &self,
        cells: &[Cell],
        description: &str,
        out: &Path,
        print: bool,
        mpi: Option<serde_json::Value>,
    ) -> Result<()> {
        let find =
            |m: Method, k: NetworkKind| cells.iter().find(|c| c.method == m && c.network == k);
        let csv = out.join("personalize.csv");
        let mut table = Table::new(
            std::iter::once("method").chain(self.checked.networks.iter().map(|k| k.name())),
        );
        for &m in &self.checked.methods {
            table.row(
                std::iter::once(m.label(self.checked.table.estimator).to_string()).chain(
                    self.checked.networks.iter().map(|&k| match find(m, k) {
                        _ if m.applies(k).is_err() => NOT_APPLICABLE.to_string(),
                        Some(c) => format!("{:.1} / {:.1}", 100.0 * c.average, 100.0 * c.bottom10),
                        None => "-".to_string(),
                    }),
                ),
            );
        }
        let training = self.training_table(|m, k| find(m, k).and_then(|c| c.training));
        let tuned = self.checked.table.tune_rates.then(|| {
            let mut t = Table::new(
                std::iter::once("method").chain(self.checked.networks.iter().map(|k| k.name())),
            );
            for &m in &self.checked.methods {
                t.row(
                    std::iter::once(m.label(self.checked.table.estimator).to_string()).chain(
                        self.checked.networks.iter().map(|&k| {
                            match find(m, k).and_then(|c| c.tuned_lr) {
                                _ if m.applies(k).is_err() => NOT_APPLICABLE.to_string(),
                                Some(lr) => format!("{:.1}", lr.log10()),
                                None => "-".to_string(),
                            }
                        }),
                    ),
                );
            }
            t
        });
        // Whether Clustered-FL's split fired, and how near its largest update came to ε₂.
        let (eps1, eps2) = self.checked.table.cfl_tolerances;
        let clustering: Vec<String> = cells
            .iter()
            .filter_map(|c| {
                let k = c.clustering?;
                let what = if k.clusters == 1 {
                    "the split never fired (1 cluster at the end)".to_string()
                } else {
                    format!("{} clusters at the end", k.clusters)
                };
                Some(format!(
                    "Clustered-FL on {}: {what}; ε₁ = {eps1}, ε₂ = {eps2}, largest client update ‖Δθ_i‖ {:.3}",
                    c.network.name(),
                    k.largest_update
                ))
            })
            .collect();
        let md_path = out.join("personalize.md");
        let mut md = table.markdown();
        for line in &clustering {
            md.push_str(&format!("\n{line}\n"));
        }
        if let Some(t) = &training {
            md.push_str(&format!("\n{TRAINING_CAPTION}\n\n{}", t.markdown()));
        }
        if let Some(t) = &tuned {
            md.push_str(&format!("\n{TUNED_CAPTION}\n\n{}", t.markdown()));
        }
        crate::report::write_whole(&md_path, md.as_bytes())?;

        let mut figure = Figure::new()
            .with_title("Validation accuracy per outer step (Fig. 4)")
            .shared_y();
        for &k in &self.checked.networks {
            let mut panel =
                Panel::new(k.name().to_uppercase(), "outer step", "validation accuracy");
            for &m in &self.checked.methods {
                if let Some(c) = find(m, k) {
                    let points = if c.curve.len() == 1 {
                        (1..=self.checked.table.outer_steps)
                            .map(|t| (t as f64, c.curve[0]))
                            .collect()
                    } else {
                        c.curve
                            .iter()
                            .enumerate()
                            .map(|(t, &a)| ((t + 1) as f64, a))
                            .collect()
                    };
                    panel = panel
                        .with_series(Series::line(m.label(self.checked.table.estimator), points));
                }
            }
            figure = figure.with_panel(panel);
        }
        let svg = out.join("curves.svg");
        figure.write(&svg)?;

        if !print {
            return Ok(());
        }
        if self.flags.run.json {
            let one = OneSeed {
                rows: cells.iter().map(CellJson::from).collect(),
            };
            return print_json(&Outcome::One(one), mpi);
        }
        println!("{description}");
        println!(
            "test accuracy, % (average over clients weighted by test size / 10th percentile client)"
        );
        println!();
        println!("{}", table.terminal());
        for line in &clustering {
            println!("{line}");
        }
        if let Some(t) = &training {
            println!("\n{TRAINING_CAPTION}\n{}", t.terminal());
        }
        if let Some(t) = &tuned {
            println!("\n{TUNED_CAPTION}\n{}", t.terminal());
        }
        println!();
        println!(
            "wrote {}, {} and {}",
            csv.display(),
            md_path.display(),
            svg.display()
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::read_rows;

    #[test]
    fn rows_round_trip() {
        let c = Cell {
            method: Method::HgpMtl,
            network: NetworkKind::Randd,
            average: 0.6612345678901234,
            bottom10: 0.5,
            curve: vec![0.5, 0.625, 0.6],
            outer_loss: vec![2.5, 2.25, 2.0, 1.9],
            chosen: 2,
            training: Some(Training {
                accuracy: 0.96875,
                grad_norm: 0.0123456789,
                grad_norm_start: 2.5,
            }),
            tuned_lr: Some(0.031_622_776_601_683_79),
            clustering: Some(Clustering {
                clusters: 2,
                largest_update: 0.123_456_789_012_345_67,
            }),
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rows.csv");
        write_csv(&path, HEADER, [CellRow::from_cell(&c)]).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.contains(",5e-1;6.25e-1;6e-1,2.5e0;2.25e0;2e0;1.9e0"),
            "{text}"
        );
        let back: Vec<CellRow> = read_rows(&path, HEADER).unwrap();
        let back: Vec<Cell> = back.into_iter().map(|r| r.into_cell().unwrap()).collect();
        assert_eq!(back, [c]);
        // A name the table does not know is refused, naming it.
        std::fs::write(&path, text.replace("hgp-mtl", "hgp-xyz")).unwrap();
        let back: Vec<CellRow> = read_rows(&path, HEADER).unwrap();
        let err = back.into_iter().next().unwrap().into_cell().unwrap_err();
        assert!(err.to_string().contains("hgp-xyz"), "{err}");
    }
}
