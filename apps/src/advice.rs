//! What to change, in the options of the subcommand that failed. The libraries say what
//! went wrong and what to change in the papers' terms (lower η, lower γ, use running sums);
//! this names the flags that set it, in parentheses after the message, and only flags the
//! subcommand has (read from its definition), so no message suggests an option that does
//! not exist where it is printed.

use std::collections::BTreeSet;

use hgp_averaging::AveragingError;
use hgp_hypergrad::HypergradError;
use hgp_inner_solvers::InnerError;

/// The long flags of a subcommand, as typed (`--eta`).
pub type Flags = BTreeSet<String>;

/// The long flags of subcommand `name` of `command`.
pub fn flags_of(command: &clap::Command, name: &str) -> Flags {
    command
        .find_subcommand(name)
        .map(|sub| {
            sub.get_arguments()
                .filter_map(|a| a.get_long())
                .map(|l| format!("--{l}"))
                .collect()
        })
        .unwrap_or_default()
}

/// The advice for `error`, from the first cause in its chain that has one, in `flags`.
pub fn advice(error: &anyhow::Error, flags: &Flags) -> Option<String> {
    error.chain().find_map(|cause| {
        if let Some(e) = cause.downcast_ref::<HypergradError>() {
            return hypergrad(e, flags);
        }
        if let Some(e) = cause.downcast_ref::<InnerError>() {
            return inner(e, flags);
        }
        cause
            .downcast_ref::<AveragingError>()
            .and_then(|e| averaging(e, flags))
    })
}

fn has(flags: &Flags, flag: &str) -> bool {
    flags.contains(flag)
}

fn hypergrad(e: &HypergradError, flags: &Flags) -> Option<String> {
    match e {
        HypergradError::Diverged { .. } | HypergradError::Growing { .. } => {
            if !has(flags, "--eta") {
                return None;
            }
            // `--eta auto` exists where its power iterations do.
            Some(if has(flags, "--power-iterations") {
                "--eta; --eta auto chooses it from the problem".to_string()
            } else {
                "--eta".to_string()
            })
        }
        HypergradError::Curvature(_) => has(flags, "--eta").then(|| "give --eta".to_string()),
        HypergradError::NeumannGrowing { .. } => {
            has(flags, "--neumann-step").then(|| "--neumann-step".to_string())
        }
        HypergradError::PdboGrowing { .. }
        | HypergradError::Expansive { .. }
        | HypergradError::FixedPoint { .. } => {
            has(flags, "--pdbo-lr").then(|| "--pdbo-lr".to_string())
        }
        HypergradError::TooLarge { .. } => {
            has(flags, "--estimator").then(|| "--estimator hgp".to_string())
        }
        HypergradError::Inner(e) => inner(e, flags),
        HypergradError::Averaging(e) => averaging(e, flags),
        _ => None,
    }
}

fn inner(e: &InnerError, flags: &Flags) -> Option<String> {
    match e {
        InnerError::Diverged { .. } => ["--lr", "--inner-lr"]
            .into_iter()
            .find(|f| has(flags, f))
            .map(str::to_string),
        InnerError::LostMass { .. } => running_sums(flags),
        InnerError::TooLarge { .. } => has(flags, "--inner").then(|| "--inner sgp".to_string()),
        InnerError::Averaging(e) => averaging(e, flags),
        _ => None,
    }
}

fn averaging(e: &AveragingError, flags: &Flags) -> Option<String> {
    match e {
        AveragingError::VanishingWeight { .. } => running_sums(flags),
        _ => None,
    }
}

fn running_sums(flags: &Flags) -> Option<String> {
    has(flags, "--averager").then(|| "--averager robust-push-sum".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(list: &[&str]) -> Flags {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn advice_names_only_flags_the_command_has() {
        let diverged = anyhow::Error::from(HypergradError::Diverged {
            m: 3,
            initial: 1.0,
            current: 1e7,
            eta: 9.0,
        })
        .context("hyper-gradient");
        assert_eq!(
            advice(&diverged, &flags(&["--eta", "--power-iterations"])).unwrap(),
            "--eta; --eta auto chooses it from the problem"
        );
        // `hgp faults` has --eta but no `auto`.
        assert_eq!(advice(&diverged, &flags(&["--eta"])).unwrap(), "--eta");
        assert_eq!(advice(&diverged, &flags(&["--lr"])), None);
        let lost = anyhow::Error::from(InnerError::LostMass {
            step: 3,
            omega: 1e-9,
            loss: 0.1,
        });
        assert_eq!(advice(&lost, &flags(&["--eta"])), None);
        assert_eq!(
            advice(&lost, &flags(&["--averager"])).unwrap(),
            "--averager robust-push-sum"
        );
    }
}
