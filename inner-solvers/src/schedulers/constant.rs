//! FedAvg's rates: constant β^0 on the clients and α = 1 on the server.

use super::LrScheduler;

/// FedAvg (McMahan et al., 2017): the clients step with the base rate β^0 and the server adds
/// the aggregated update, W^{t+1} = W^t + Δ^t. Every default of [`LrScheduler`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Constant;

impl LrScheduler for Constant {
    fn name(&self) -> String {
        "fedavg".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedulers::{LocalStep, testing::step};

    #[test]
    fn fedavg_adds_the_mean_update_and_keeps_the_rates() {
        let mut s = Constant;
        let (out, rate) = step(&mut s, 3, &[0.5, -1.0], &[]);
        assert_eq!((out, rate), (vec![0.5, -1.0], 1.0));
        assert_eq!(s.broadcast_rate(0.05), 0.05);
        let local = LocalStep {
            k: 4,
            base: 0.05,
            broadcast: 0.05,
            previous: 0.05,
            grad_dot_previous: 3.0,
            grad_dot_global: -1.0,
            participants: 10,
        };
        assert_eq!(s.local_rate(&local), 0.05);
        assert!(!s.adapts_local_rate());
    }
}
