//! What the ranks of an MPI run agree on: a failure on any rank stops all of them (the
//! lowest failing rank's error on every rank), and rank 0's values reach the others. In one
//! process both are the identity.

use anyhow::{Result, anyhow};
use hgp_averaging::Placement;

/// Every rank's `result` compared: if any failed, every rank returns the failure of the
/// lowest failing rank (rank 0 prints it), so all stop together (a collective when the
/// clients are spread over ranks; `result` itself in one process).
pub fn agree<R>(placement: &Placement, result: Result<R>) -> Result<R> {
    if !placement.is_distributed() {
        return result;
    }
    let mine = match &result {
        Ok(_) => Vec::new(),
        Err(e) => format!("{e:#}").into_bytes(),
    };
    let all = placement.all_gather_bytes(&mine);
    match all.iter().position(|m| !m.is_empty()) {
        None => result,
        Some(r) => {
            let message = String::from_utf8_lossy(&all[r]).into_owned();
            Err(if r == 0 {
                anyhow!(message)
            } else {
                anyhow!("rank {r} of {}: {message}", placement.ranks())
            })
        }
    }
}

/// Rank 0's `value` on every rank (the others pass `None`, or anything: only rank 0's is
/// kept); in one process, `value` itself. A collective: every rank calls it. Values travel
/// as JSON, whose parser may round an f64 in its last bit: a number that must arrive
/// exactly travels as its bits ([`f64::to_bits`]).
pub fn shared_from_root<V: serde::Serialize + serde::de::DeserializeOwned>(
    placement: &Placement,
    value: Option<V>,
) -> Result<V> {
    let mine = match (&value, placement.is_root()) {
        (Some(v), true) => serde_json::to_vec(v)?,
        _ => Vec::new(),
    };
    if !placement.is_distributed() {
        return value.ok_or_else(|| anyhow!("no value on rank 0"));
    }
    let all = placement.all_gather_bytes(&mine);
    Ok(serde_json::from_slice(&all[0])?)
}
