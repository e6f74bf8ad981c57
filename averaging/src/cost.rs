//! Communication accounting: what an exchange cost, counted message by message.

use std::fmt;

/// Messages and floats sent by one or more averaging calls: totals, per client, and by the
/// server where there is one. A message is one block sent along one link (self-loops are
/// free).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommCost {
    /// Communication rounds (one per Push-Sum or gossip step; one per central average: the
    /// participants send, the server aggregates and broadcasts).
    pub rounds: u64,
    /// Messages sent in total, server included.
    pub messages: u64,
    /// Floats sent in total, server included.
    pub floats: u64,
    /// Messages sent by each client.
    pub client_messages: Vec<u64>,
    /// Floats sent by each client.
    pub client_floats: Vec<u64>,
    /// Messages sent by the server (central averaging only).
    pub server_messages: u64,
    /// Floats sent by the server (central averaging only).
    pub server_floats: u64,
    /// Messages sent but never received: lost on their link, or addressed to a client that
    /// was down when they arrived, or still late when an average (or an SGP run) ended.
    pub lost: u64,
    /// Messages received later than the step they were sent in (stragglers).
    pub late: u64,
}

impl CommCost {
    /// Nothing sent yet, for `n` clients.
    pub fn new(n: usize) -> Self {
        Self {
            client_messages: vec![0; n],
            client_floats: vec![0; n],
            ..Self::default()
        }
    }

    /// Client `from` sends `messages` messages of `floats_each` floats.
    #[inline]
    pub fn client_sends(&mut self, from: usize, messages: u64, floats_each: u64) {
        self.client_messages[from] += messages;
        self.client_floats[from] += messages * floats_each;
        self.messages += messages;
        self.floats += messages * floats_each;
    }

    /// The server sends `messages` messages of `floats_each` floats.
    pub fn server_sends(&mut self, messages: u64, floats_each: u64) {
        self.server_messages += messages;
        self.server_floats += messages * floats_each;
        self.messages += messages;
        self.floats += messages * floats_each;
    }

    /// The client that sent the most floats (ties: the lowest index), with its floats.
    pub fn busiest_client(&self) -> Option<(usize, u64)> {
        self.client_floats
            .iter()
            .copied()
            .enumerate()
            .fold(None, |best, (i, f)| match best {
                Some((_, bf)) if bf >= f => best,
                _ => Some((i, f)),
            })
    }

    /// Adds another cost to this one (client vectors are extended as needed).
    pub fn merge(&mut self, other: &CommCost) {
        self.rounds += other.rounds;
        self.messages += other.messages;
        self.floats += other.floats;
        self.server_messages += other.server_messages;
        self.server_floats += other.server_floats;
        self.lost += other.lost;
        self.late += other.late;
        for (mine, theirs) in [
            (&mut self.client_messages, &other.client_messages),
            (&mut self.client_floats, &other.client_floats),
        ] {
            if mine.len() < theirs.len() {
                mine.resize(theirs.len(), 0);
            }
            for (a, b) in mine.iter_mut().zip(theirs) {
                *a += b;
            }
        }
    }
}

impl fmt::Display for CommCost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} rounds, {} messages, {} floats",
            self.rounds, self.messages, self.floats
        )?;
        if let Some((i, floats)) = self.busiest_client() {
            write!(f, "; busiest client {i} sent {floats} floats")?;
        }
        if self.server_messages > 0 {
            write!(f, "; server sent {} floats", self.server_floats)?;
        }
        if self.lost > 0 || self.late > 0 {
            write!(f, "; {} lost, {} late", self.lost, self.late)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_and_busiest() {
        let mut c = CommCost::new(3);
        c.client_sends(0, 2, 10);
        c.client_sends(2, 3, 10);
        c.server_sends(3, 10);
        assert_eq!((c.messages, c.floats), (8, 80));
        assert_eq!(c.busiest_client(), Some((2, 30)));
        let mut total = CommCost::default();
        total.merge(&c);
        total.merge(&c);
        assert_eq!(total.client_floats, vec![40, 0, 60]);
        assert!(
            total
                .to_string()
                .contains("busiest client 2 sent 60 floats")
        );
    }
}
