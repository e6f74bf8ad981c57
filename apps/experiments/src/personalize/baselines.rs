//! HGP Table 2's comparison methods on Marfoq et al.'s procedure (HGP Sec. 5.3, App. A.3):
//! FedProx, FedAvg+, Clustered-FL, pFedMe, the proximal personalization and FedEM /
//! D-FedEM, each a solver of `hgp_inner_solvers::procedure` on the clients, splits and
//! evaluation the other methods of the personalize experiment have.

use anyhow::{Result, bail};
use hgp_averaging::{ClientBuffer, Placement};
use hgp_data::images::ImageClient;
use hgp_inner_solvers::{
    ClusteredFl, FedEm, FedProx, InnerSolver, OnProgress, PFedMe, ProxPersonal,
};
use hgp_models::{InnerCost, PerClient};
use hgp_nn::{DerivativeMode, HyperMode, NetClient, NetConfig};

use super::methods::Method;
use super::protocol::{
    Cell, Clustering, OnImages, Protocol, Set, TUNE_GRID, accuracies_with, bottom10, set_of,
    weighted_mean,
};

use crate::ranks::agree as agree_on;
use crate::setup::{NetworkKind, derive, domain, total_outer_loss_on};

/// FedProx's μ (HGP App. A.3: the best of 10¹ … 10⁻² by grid search).
pub const FEDPROX_MU: f64 = 1e-2;
/// pFedMe's λ and the proximal personalization's μ (HGP App. A.3: 10⁰).
pub const PERSONAL_MU: f64 = 1.0;
/// pFedMe's personalization steps K (Dinh et al.'s code's default).
pub const PFEDME_STEPS: usize = 5;

/// One method on one network under `protocol`: the comparison methods of HGP Table 2 on
/// Marfoq et al.'s procedure ([`Baselines::cell`]), the others by [`Protocol::cell`];
/// `progress` after every inner SGP step (or round of the procedure).
///
/// # Errors
///
/// Those of the method's cell.
pub fn cell(
    protocol: &Protocol,
    method: Method,
    network: NetworkKind,
    split: &[ImageClient],
    progress: &dyn Fn(),
) -> Result<Cell> {
    if protocol.table.tune_rates && protocol.on_procedure(method, network) {
        return tuned_cell(protocol, method, network, split, progress);
    }
    if method.is_baseline() {
        Baselines(protocol).cell(method, network, split, progress)
    } else {
        protocol.cell(method, network, split, progress)
    }
}

/// The cell of `method` on `network` at the rate of [`TUNE_GRID`] with the highest
/// validation accuracy (HGP App. A.3's grid search; the test accuracy is that of the rate
/// chosen). A rate at which the run fails (diverges) is left out; if every rate fails, the
/// last failure is the cell's.
fn tuned_cell(
    protocol: &Protocol,
    method: Method,
    network: NetworkKind,
    split: &[ImageClient],
    progress: &dyn Fn(),
) -> Result<Cell> {
    let mut best: Option<(f64, Cell)> = None;
    let mut failure = None;
    for lr in TUNE_GRID {
        let mut at = protocol.clone();
        at.table.procedure_lr = crate::personalize::CellRate::Every(lr);
        at.table.tune_rates = false;
        match cell(&at, method, network, split, progress) {
            Ok(mut c) => {
                let validation = c.curve.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                c.tuned_lr = Some(lr);
                if best.as_ref().is_none_or(|(v, _)| validation > *v) {
                    best = Some((validation, c));
                }
            }
            Err(e) => failure = Some(e.context(format!("at the rate {lr} of the grid"))),
        }
    }
    match (best, failure) {
        (Some((_, c)), _) => Ok(c),
        (None, Some(e)) => Err(e),
        (None, None) => bail!("--tune-rates: the grid is empty"),
    }
}

/// The comparison methods of a protocol: Marfoq et al.'s procedure and the cells it
/// trains.
pub struct Baselines<'a>(pub &'a Protocol);

impl std::ops::Deref for Baselines<'_> {
    type Target = Protocol;

    fn deref(&self) -> &Protocol {
        self.0
    }
}

impl Baselines<'_> {
    /// One comparison method on one network (HGP Table 2's rows FedProx to FedEM).
    pub fn cell(
        &self,
        method: Method,
        network: NetworkKind,
        split: &[ImageClient],
        progress: &dyn Fn(),
    ) -> Result<Cell> {
        method.applies(network).map_err(anyhow::Error::msg)?;
        if matches!(method, Method::FedEm | Method::DFedEm) {
            return self.fedem_cell(method, network, split, progress);
        }
        let s = &self.setting;
        let clients = self.clients(method, network, split, s)?;
        let n = clients.len();
        let init: Vec<f32> = s
            .arch
            .init(derive(self.seed, domain::INIT))
            .into_iter()
            .map(|v| v as f32)
            .collect();
        let x0 = ClientBuffer::from_fn(n, init.len(), |_, k| init[k]);
        let lambda = PerClient::filled(&vec![s.classes; n], 0.0f32);
        let procedure = self.procedure(method, network, n)?;
        let lr = self.lr(method, network);
        let per = self.per_round(method, network, split);
        let observe = || OnProgress(|_, _, _| (0..per).for_each(|_| progress()));
        if method == Method::ClusteredFl {
            let (eps1, eps2) = self.table.cfl_tolerances;
            let mut solver = ClusteredFl::new(procedure.clone(), eps1, eps2)?;
            let x = solver
                .solve_observed(&clients, &lambda, &x0, &mut observe())?
                .x;
            let clustering = Clustering {
                clusters: solver.clusters().len(),
                largest_update: solver.largest_update(),
            };
            let mut cell = self.evaluate(method, network, split, &clients, &lambda, &x)?;
            cell.clustering = Some(clustering);
            return Ok(cell);
        }
        let mut solver: Box<dyn InnerSolver<f32, NetClient<f32>>> = match method {
            Method::FedProx => Box::new(FedProx::new(procedure.clone(), FEDPROX_MU)?),
            Method::FedAvgPlus => Box::new(procedure.clone()),
            Method::PFedMe => Box::new(PFedMe::new(
                procedure.clone(),
                PERSONAL_MU,
                PFEDME_STEPS,
                lr,
                1.0,
            )?),
            Method::ProxPersonal => Box::new(ProxPersonal::new(procedure.clone(), PERSONAL_MU)?),
            other => bail!("{other} is not one of the comparison methods"),
        };
        let mut x = solver
            .solve_observed(&clients, &lambda, &x0, &mut observe())?
            .x;
        if method == Method::FedAvgPlus {
            procedure.tune(&clients, &lambda, &mut x)?;
        }
        self.evaluate(method, network, split, &clients, &lambda, &x)
    }

    /// The cell of `method` on `network` whose clients ended at `x`: their validation and
    /// test accuracies and the outer loss there.
    fn evaluate(
        &self,
        method: Method,
        network: NetworkKind,
        split: &[ImageClient],
        clients: &[NetClient<f32>],
        lambda: &PerClient<f32>,
        x: &ClientBuffer<f32>,
    ) -> Result<Cell> {
        let placement = &self.placement;
        let predict = |i: usize, images: &[f32]| -> Result<Vec<u8>> {
            Ok(clients[i].predict(x.row(i), lambda.row(i), images)?)
        };
        let val = accuracies_with(placement, split, Set::Validation, &predict)?;
        let test = accuracies_with(placement, split, Set::Test, &predict)?;
        Ok(Cell {
            method,
            network,
            average: weighted_mean(&test),
            bottom10: bottom10(&test),
            curve: vec![weighted_mean(&val)],
            outer_loss: vec![total_outer_loss_on(placement, clients, x, lambda)],
            chosen: 0,
            training: None,
            tuned_lr: None,
            clustering: None,
        })
    }

    /// FedEM (FC, the server) or D-FedEM (FixU's matrix) with `components` base networks;
    /// each client predicts with its mixture. The "outer loss" reported is Σ_i of the
    /// mixture's mean training cross-entropy, the f_i of the other methods.
    fn fedem_cell(
        &self,
        method: Method,
        network: NetworkKind,
        split: &[ImageClient],
        progress: &dyn Fn(),
    ) -> Result<Cell> {
        let s = &self.setting;
        let k = self.table.components;
        let config = NetConfig {
            arch: s.arch,
            mode: HyperMode::InstanceWeights,
            l2: 1e-3,
            l2_lambda: 0.0,
            derivatives: DerivativeMode::Auto,
            device: s.device,
        };
        let clients = self.clients_of(config, split)?;
        let n = clients.len();
        let init: Vec<f32> = (0..k)
            .flat_map(|j| s.arch.init(derive(self.seed, domain::INIT + j as u64)))
            .map(|v| v as f32)
            .collect();
        let x0 = ClientBuffer::from_fn(n, init.len(), |_, j| init[j]);
        let procedure = self.procedure(method, network, n)?;
        let per = self.per_round(method, network, split);
        let mixture = FedEm::new(procedure, k)?.run_observed(
            &clients,
            &x0,
            &mut OnProgress(|_, _, _| (0..per).for_each(|_| progress())),
        )?;
        let d = x0.d() / k;
        // The mixture's class probabilities Σ_j π_ij p_θ_j(c | a) of client i.
        let mixed = |i: usize, images: &[f32]| -> Result<Vec<f64>> {
            let c = &clients[i];
            let ones = vec![1.0f32; c.num_train()];
            let row = mixture.components.row(i);
            let mut total: Vec<f64> = Vec::new();
            for (j, &pi) in mixture.weights.row(i).iter().enumerate() {
                let logp = c.log_probabilities(&row[j * d..(j + 1) * d], &ones, images)?;
                if total.is_empty() {
                    total = vec![0.0; logp.len()];
                }
                for (t, l) in total.iter_mut().zip(logp) {
                    *t += pi * l.exp();
                }
            }
            Ok(total)
        };
        let classes = s.arch.outputs().max(2);
        let predict = |i: usize, images: &[f32]| -> Result<Vec<u8>> {
            Ok(mixed(i, images)?
                .chunks(classes)
                .map(|p| (0..classes).fold(0, |b, c| if p[c] > p[b] { c } else { b }) as u8)
                .collect())
        };
        let placement = &self.placement;
        let val = accuracies_with(placement, split, Set::Validation, &predict)?;
        let test = accuracies_with(placement, split, Set::Test, &predict)?;
        let loss = mixture_loss(placement, split, &mixed, classes)?;
        Ok(Cell {
            method,
            network,
            average: weighted_mean(&test),
            bottom10: bottom10(&test),
            curve: vec![weighted_mean(&val)],
            outer_loss: vec![loss],
            chosen: 0,
            training: None,
            tuned_lr: None,
            clustering: None,
        })
    }
}

/// Σ_i of client i's mean training cross-entropy under `mixed` (each rank its own clients).
fn mixture_loss(
    placement: &Placement,
    split: &[ImageClient],
    mixed: &OnImages<'_, Vec<f64>>,
    classes: usize,
) -> Result<f64> {
    let n = split.len();
    let mut loss = vec![0.0; n];
    let own = placement.owned(n).try_for_each(|i| -> Result<()> {
        let set = set_of(&split[i], Set::Train);
        let p = mixed(i, &set.images)?;
        let total: f64 = p
            .chunks(classes)
            .zip(&set.labels)
            .map(|(row, &y)| -row[usize::from(y)].ln())
            .sum();
        loss[i] = total / set.len().max(1) as f64;
        Ok(())
    });
    agree_on(placement, own)?;
    placement.gather_values(&mut loss, 1);
    Ok(loss.iter().sum())
}

#[cfg(test)]
mod tests {
    use super::super::methods::{InnerProcedure, PersonalizeEstimator, Rates};
    use super::super::protocol::Setting;
    use super::super::protocol::tests::digits;
    use super::*;
    use hgp_hypergrad::{Eta, PowerIteration};
    use hgp_inner_solvers::{Aggregation, InnerSolver, Procedure};
    use hgp_nn::Architecture;
    use strum::VariantArray;

    /// FedEM with one component on the networks of `personalize` (each instance's loss
    /// weighted by its responsibility, here 1) is FedAvg on the same clients with weights
    /// 1, to the last bit; and its mixture predicts as that one network.
    #[test]
    fn fedem_with_one_component_is_fedavg_on_networks() {
        let split = digits(240, 3, 3);
        let arch = Architecture::Mlp { classes: 10 };
        let net = NetConfig {
            arch,
            mode: HyperMode::InstanceWeights,
            l2: 1e-3,
            l2_lambda: 0.0,
            derivatives: DerivativeMode::Auto,
            device: hgp_nn::NetDevice::Cpu,
        };
        let clients: Vec<NetClient<f32>> = split
            .iter()
            .map(|c| {
                let t = (&c.train.images[..], &c.train.labels[..]);
                NetClient::new(net, t, t).unwrap()
            })
            .collect();
        let init: Vec<f32> = arch.init(7).into_iter().map(|v| v as f32).collect();
        let x0 = ClientBuffer::from_fn(3, init.len(), |_, k| init[k]);
        let procedure = || Procedure::new(3, 16, 0.05, Aggregation::Server, 2).unwrap();
        let sizes: Vec<usize> = clients.iter().map(|c| c.num_train()).collect();
        let ones = PerClient::filled(&sizes, 1.0f32);
        let fedavg = procedure().solve(&clients, &ones, &x0).unwrap().x;
        let em = FedEm::new(procedure(), 1)
            .unwrap()
            .run_observed(&clients, &x0, &mut OnProgress(|_, _, _| {}))
            .unwrap();
        assert_eq!(em.components, fedavg);
        assert!(em.weights.as_slice().iter().all(|&p| p == 1.0));
        assert_ne!(fedavg, x0);
    }

    /// Every method on a static and a time-varying network, under both estimators, with the
    /// clients spread over thread ranks (one per client, and blocks of clients), each rank
    /// holding only its own clients' images: the cells of one process, bit for bit.
    #[test]
    fn cells_over_ranks_are_the_cells_of_one_process() {
        use hgp_averaging::ThreadRanks;
        let split = digits(400, 4, 2);
        let protocol = |estimator, inner, placement| Protocol {
            setting: Setting {
                arch: Architecture::Linear { classes: 10 },
                steps: 6,
                batch: 8,
                classes: 10,
                eta: Eta::Auto(PowerIteration::default()),
                device: hgp_nn::NetDevice::Cpu,
            },
            table: super::super::protocol::TableSettings {
                outer_steps: 2,
                neumann_terms: 3,
                rates: Rates::Hgp,
                push_steps: 3,
                estimator,
                inner,
                rounds: 2,
                components: 3,
                cfl_tolerances: ClusteredFl::TOLERANCES,
                procedure_lr: crate::personalize::CellRate::FromTable,
                hyper_lr: crate::personalize::CellRate::FromTable,
                tune_rates: false,
            },
            seed: 4,
            placement,
            extensions: crate::setup::Extensions::default(),
        };
        // Every method where it applies: HGP Table 2's comparison methods on FC and FixU,
        // with the others on Marfoq et al.'s procedure there.
        let (hgp, pdbo) = (PersonalizeEstimator::Hgp, PersonalizeEstimator::Pdbo);
        let (marfoq, sgp) = (InnerProcedure::Marfoq, InnerProcedure::Sgp);
        let cases = vec![
            (hgp, marfoq, NetworkKind::Fc),
            (hgp, marfoq, NetworkKind::Fixu),
            (hgp, sgp, NetworkKind::Fixu),
            (hgp, sgp, NetworkKind::Randd),
            (pdbo, sgp, NetworkKind::Randu),
        ];
        let run = |placement: Placement| -> Vec<Cell> {
            let mut mine = split.clone();
            super::super::data::keep_own_images(&mut mine, &placement);
            let mut cells = Vec::new();
            for &(estimator, inner, network) in &cases {
                let p = protocol(estimator, inner, placement.clone());
                for &method in Method::VARIANTS {
                    if method.applies(network).is_ok() {
                        cells.push(cell(&p, method, network, &mine, &|| {}).unwrap());
                    }
                }
            }
            cells
        };
        let local = run(Placement::local());
        assert_eq!(local.len(), 5 * 5 + 6 + 2);
        for ranks in [4, 3] {
            for (rank, cells) in ThreadRanks::spawn(ranks, run).into_iter().enumerate() {
                assert_eq!(cells, local, "rank {rank} of {ranks}");
            }
        }
    }
}
