//! HGP's averages must mix the clients' vectors (HGP Assumption 1): a network that never
//! connects, or a client that is never reached, is refused with
//! [`HypergradError::NotMixed`] instead of returning a number, and every estimate carries
//! the spread between the clients' averaged vectors.

mod common;
use common::random_clients;
use std::sync::Arc;

use hgp_averaging::{
    Averager, ClientBuffer, CommCost, Crash, ExactAverage, Faults, Gossip, Placement, PushSum,
    PushSumProtocol, Scalar, ThreadRanks, Unmixed,
};
use hgp_graphs::{DiGraph, MixingMatrix, Network, RandomDirected, RandomEdges, Scheduled, rng};
use hgp_hypergrad::{Describe, Eta, Exact, Hgp, HgpOptions, HyperGradient, HypergradError, Local};
use hgp_inner_solvers::{ExactNewton, InnerSolver};
use hgp_models::{L2Logistic, PerClient};
use rand::RngExt;

/// An averager that does not report its links: HGP cannot prove that it did not mix, so it
/// returns what it computed (what every averager gave before links were recorded).
struct Unrecorded<A>(A);

impl<T: Scalar, A: Averager<T>> Averager<T> for Unrecorded<A> {
    fn n(&self) -> usize {
        self.0.n()
    }
    fn average(
        &mut self,
        buffer: &mut ClientBuffer<T>,
    ) -> Result<CommCost, hgp_averaging::AveragingError> {
        self.0.average(buffer)
    }
    fn placement(&self) -> Placement {
        self.0.placement()
    }
}

impl<A: Describe> Describe for Unrecorded<A> {
    fn describe(&self) -> String {
        format!("{}, links not recorded", self.0.describe())
    }
}

/// A random logistic problem (eq. 11): n clients of 20 training and 15 validation instances
/// of d = 5 features, per-coordinate λ ∈ [0.1, 1], at its consensual optimum x*.
struct Problem {
    clients: Vec<L2Logistic<f64>>,
    lambda: PerClient<f64>,
    x: ClientBuffer<f64>,
}

fn problem(n: usize) -> Problem {
    let d = 5;
    let mut r = rng::stream(0, 42, 0);
    let clients: Vec<L2Logistic<f64>> = random_clients(&mut r, n, (20, 15), d)
        .iter()
        .map(|data| L2Logistic::new(data, false).unwrap())
        .collect();
    let lambda = PerClient::from_rows(
        (0..n)
            .map(|_| (0..d).map(|_| r.random_range(0.1..1.0)).collect())
            .collect(),
    );
    let x = ExactNewton::new()
        .solve(&clients, &lambda, &ClientBuffer::zeros(n, d))
        .unwrap()
        .x;
    Problem { clients, lambda, x }
}

fn options() -> HgpOptions {
    HgpOptions {
        neumann_terms: 1000,
        eta: Eta::Fixed(1.0),
        ..HgpOptions::default()
    }
}

fn schedule(n: usize, steps: &[&[(usize, usize)]]) -> Arc<dyn Network> {
    Arc::new(
        Scheduled::new(
            steps
                .iter()
                .map(|edges| DiGraph::from_edges(n, edges.iter().copied()).unwrap())
                .collect(),
        )
        .unwrap(),
    )
}

fn relative_error(v: &PerClient<f64>, exact: &PerClient<f64>) -> f64 {
    v.distance(exact) / exact.norm()
}

/// Push-Sum over a schedule of self-loops only never moves a value: HGP is refused, naming
/// why. The same averages with their links hidden return a number that is further from
/// d_λF than the no-cooperation baseline `Local`, and whose spread says so.
#[test]
fn a_network_that_never_connects_is_refused() {
    let n = 5;
    let p = problem(n);
    let exact = Exact::new()
        .estimate(&p.clients, &p.x, &p.lambda)
        .unwrap()
        .v;
    let local = Local::new()
        .estimate(&p.clients, &p.x, &p.lambda)
        .unwrap()
        .v;
    let alone = schedule(n, &[&[]]);
    let mut hgp = Hgp::new(PushSum::new(alone.clone(), 10).unwrap(), options()).unwrap();
    let e = hgp.estimate(&p.clients, &p.x, &p.lambda).unwrap_err();
    assert!(
        matches!(
            e,
            HypergradError::NotMixed {
                averages: 1000,
                reason: Unmixed::NoLinks
            }
        ),
        "{e}"
    );
    assert!(!e.is_divergence());
    assert!(
        e.to_string().contains("no client ever sent to another"),
        "{e}"
    );
    let mut hidden = Hgp::new(Unrecorded(PushSum::new(alone, 10).unwrap()), options()).unwrap();
    let unchecked = hidden.estimate(&p.clients, &p.x, &p.lambda).unwrap();
    let error = relative_error(&unchecked.v, &exact);
    let local_error = relative_error(&local, &exact);
    let spread = unchecked.spread.unwrap();
    println!(
        "never connecting: relative error {error:.3} (Local {local_error:.3}), spread {spread:.3}"
    );
    assert!(error > local_error, "{error} against Local's {local_error}");
    assert!(spread > 1.0, "{spread}");
}

/// A client that never receives, and two groups of which one never reaches the other: each
/// is refused with the client or the pair named. Gossip with a matrix that mixes nothing is
/// refused too.
#[test]
fn a_client_never_reached_is_refused() {
    let n = 4;
    let p = problem(n);
    let refused = |network: Arc<dyn Network>| {
        Hgp::new(PushSum::new(network, 5).unwrap(), options())
            .unwrap()
            .estimate(&p.clients, &p.x, &p.lambda)
            .unwrap_err()
    };
    // 0 → 1 → 2 → 0, and 3 sends to 0 but never receives.
    let e = refused(schedule(n, &[&[(0, 1), (1, 2)], &[(2, 0), (3, 0)]]));
    assert!(
        matches!(
            e,
            HypergradError::NotMixed {
                reason: Unmixed::NeverReceived { client: 3 },
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("client 3 never received"), "{e}");
    // {0, 1} and {2, 3}, joined one way by 1 → 2.
    let e = refused(schedule(n, &[&[(0, 1), (1, 0), (2, 3)], &[(3, 2), (1, 2)]]));
    assert!(
        matches!(
            e,
            HypergradError::NotMixed {
                reason: Unmixed::NotReached { from: 2, to: 0 },
                ..
            }
        ),
        "{e}"
    );
    let identity = MixingMatrix::metropolis_hastings(&DiGraph::empty(n)).unwrap();
    let e = Hgp::new(Gossip::constant(identity, 5).unwrap(), options())
        .unwrap()
        .estimate(&p.clients, &p.x, &p.lambda)
        .unwrap_err();
    assert!(
        matches!(
            e,
            HypergradError::NotMixed {
                reason: Unmixed::NoLinks,
                ..
            }
        ),
        "{e}"
    );
}

/// On a network that connects, the spread of the averaged vectors is small and the estimate
/// close to d_λF; exact averaging has spread 0; links that connect only across averages (one
/// link per average, a cycle over three) are accepted; a client down for the whole estimate
/// is left out of the check (the survivors mix among themselves).
#[test]
fn connected_averages_are_accepted_with_their_spread() {
    let n = 5;
    let p = problem(n);
    let exact = Exact::new()
        .estimate(&p.clients, &p.x, &p.lambda)
        .unwrap()
        .v;
    let randd: Arc<dyn Network> =
        Arc::new(RandomDirected::new(n, RandomEdges::default(), 1).unwrap());
    let estimate = Hgp::new(PushSum::new(randd.clone(), 10).unwrap(), options())
        .unwrap()
        .estimate(&p.clients, &p.x, &p.lambda)
        .unwrap();
    let error = relative_error(&estimate.v, &exact);
    let spread = estimate.spread.unwrap();
    println!("RandD, S = 10: relative error {error:.2e}, spread {spread:.2e}");
    assert!(error < 2e-4, "{error}");
    assert!(spread < 1e-3, "{spread}");
    let exact_average = Hgp::new(ExactAverage::new(n).unwrap(), options())
        .unwrap()
        .estimate(&p.clients, &p.x, &p.lambda)
        .unwrap();
    assert_eq!(exact_average.spread, Some(0.0));
    // One link per average: 0 → 1, 1 → 2, 2 → 3, 3 → 4, 4 → 0 in turn.
    let turns = schedule(n, &[&[(0, 1)], &[(1, 2)], &[(2, 3)], &[(3, 4)], &[(4, 0)]]);
    let slow = Hgp::new(PushSum::new(turns, 1).unwrap(), options())
        .unwrap()
        .estimate(&p.clients, &p.x, &p.lambda)
        .unwrap();
    assert!(slow.spread.unwrap() > 0.1, "{:?}", slow.spread);
    // Client 2 down from the first step.
    let faults = Faults::none().with_crash(Crash {
        client: 2,
        at: 1,
        rejoin: None,
    });
    let protocol = PushSumProtocol {
        faults: Arc::new(faults),
        ..PushSumProtocol::default()
    };
    let survivors = PushSum::new(randd, 10).unwrap().with_protocol(protocol);
    Hgp::new(survivors, options())
        .unwrap()
        .estimate(&p.clients, &p.x, &p.lambda)
        .unwrap();
}

/// Over ranks the spread is not measured (it would need an exchange of its own); the links
/// are the same on every rank, so every rank refuses a network that never connects.
#[test]
fn over_ranks_the_links_are_checked_and_the_spread_left_out() {
    let n = 4;
    let p = problem(n);
    let results = ThreadRanks::spawn(2, |placement| {
        let randd: Arc<dyn Network> =
            Arc::new(RandomDirected::new(n, RandomEdges::default(), 1).unwrap());
        let spread = Hgp::new(
            PushSum::new(randd, 10)
                .unwrap()
                .with_placement(placement.clone()),
            options(),
        )
        .unwrap()
        .estimate(&p.clients, &p.x, &p.lambda)
        .unwrap()
        .spread;
        let refused = Hgp::new(
            PushSum::new(schedule(n, &[&[]]), 10)
                .unwrap()
                .with_placement(placement),
            options(),
        )
        .unwrap()
        .estimate(&p.clients, &p.x, &p.lambda)
        .is_err();
        (spread, refused)
    });
    for (spread, refused) in results {
        assert_eq!(spread, None);
        assert!(refused);
    }
}
