//! HGP Table 2's comparison methods on Marfoq et al.'s procedure (HGP Sec. 5.3, App. A.3):
//! FedProx, FedAvg+, Clustered-FL, pFedMe, the proximal personalization and FedEM /
//! D-FedEM, each a solver of `hgp_inner_solvers::procedure` on the clients, splits and
//! evaluation the other methods of the personalize experiment have.

use anyhow::{Result, bail};
use hgp_averaging::{ClientBuffer, Placement};
use hgp_data::images::ImageClient;
use hgp_graphs::{FmmcOptions, fastest_mixing};
use hgp_inner_solvers::{
    Aggregation, ClusteredFl, FedEm, FedProx, InnerSolver, OnProgress, PFedMe, Procedure,
    ProxPersonal,
};
use hgp_models::{InnerCost, PerClient};
use hgp_nn::{DerivativeMode, HyperMode, NetClient, NetConfig};

use super::methods::Method;
use super::protocol::{
    Cell, OnImages, Protocol, Set, accuracies_with, bottom10, set_of, weighted_mean,
};
use serde::{Deserialize, Serialize};
use strum::{EnumMessage, IntoStaticStr, VariantArray};

use crate::ranks::agree as agree_on;
use crate::setup::{NetworkConfig, NetworkKind, derive, domain, total_outer_loss_on};

/// FedProx's μ (HGP App. A.3: the best of 10¹ … 10⁻² by grid search).
pub const FEDPROX_MU: f64 = 1e-2;
/// pFedMe's λ and the proximal personalization's μ (HGP App. A.3: 10⁰).
pub const PERSONAL_MU: f64 = 1.0;
/// pFedMe's personalization steps K (Dinh et al.'s code's default).
pub const PFEDME_STEPS: usize = 5;

/// The inner solve of SGP, Local and the methods that tune λ on FC and FixU.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    VariantArray,
    IntoStaticStr,
    EnumMessage,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum InnerProcedure {
    /// Marfoq et al.'s procedure, as HGP Sec. 5.3 on FC and FixU: --rounds rounds of one
    /// local epoch per client (batches of --batch, SGD with momentum 0.9), the server's
    /// average weighted by training sizes (FC) or FixU's fastest-mixing matrix, the rate
    /// (HGP Table 7) × 0.1 at half and three quarters of the rounds.
    #[default]
    Marfoq,
    /// --sgp-steps steps of SGP (decentralized SGD on FixU), as on RandU and RandD.
    Sgp,
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
    /// Marfoq et al.'s procedure for `method` on `network` over `n` clients: the server
    /// (FC), FixU's fastest-mixing matrix, or none for Local; HGP Table 7's rate; the last
    /// short batch dropped for networks with batch normalization (as the reference code).
    pub fn procedure(&self, method: Method, network: NetworkKind, n: usize) -> Result<Procedure> {
        let s = &self.setting;
        let aggregation = if method == Method::Local {
            Aggregation::Alone
        } else {
            match network {
                NetworkKind::Fc => Aggregation::Server,
                NetworkKind::Fixu => {
                    let stream = derive(self.seed, domain::INNER);
                    let net = NetworkConfig::of(network).build(n, self.seed, stream)?;
                    let Some(graph) = &net.fixed else {
                        bail!("FixU has no fixed graph");
                    };
                    let w = fastest_mixing(graph.graph_ref(), FmmcOptions::default())?.matrix;
                    Aggregation::Mixing(w)
                }
                other => bail!(
                    "Marfoq et al.'s procedure runs on fc and fixu, not on {}",
                    other.name()
                ),
            }
        };
        Ok(Procedure::new(
            self.rounds,
            s.batch,
            self.lr(method, network),
            aggregation,
            derive(self.seed, domain::INNER),
        )?
        .with_drop_last(s.arch.batch_statistics())
        .with_placement(self.placement.clone()))
    }

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
        let mut solver: Box<dyn InnerSolver<f32, NetClient<f32>>> = match method {
            Method::FedProx => Box::new(FedProx::new(procedure.clone(), FEDPROX_MU)?),
            Method::FedAvgPlus => Box::new(procedure.clone()),
            Method::ClusteredFl => {
                let (eps1, eps2) = ClusteredFl::TOLERANCES;
                Box::new(ClusteredFl::new(procedure.clone(), eps1, eps2)?)
            }
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
            .solve_observed(
                &clients,
                &lambda,
                &x0,
                &mut OnProgress(|_, _, _| (0..per).for_each(|_| progress())),
            )?
            .x;
        if method == Method::FedAvgPlus {
            procedure.tune(&clients, &lambda, &mut x)?;
        }
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
            outer_loss: vec![total_outer_loss_on(placement, &clients, &x, &lambda)],
            chosen: 0,
            training: None,
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
        let k = self.components;
        let config = NetConfig {
            arch: s.arch,
            mode: HyperMode::InstanceWeights,
            l2: 1e-3,
            l2_lambda: 0.0,
            derivatives: DerivativeMode::Auto,
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
    use super::super::protocol::tests::digits;
    use super::*;
    use hgp_inner_solvers::InnerSolver;
    use hgp_nn::Architecture;

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
}
