//! The Shakespeare next-character task (paper 004, App. A.1; LEAF's Shakespeare, Caldas et
//! al., 2018): each speaking character of Shakespeare's plays is a client whose data are
//! windows of `seq` symbols, each labelled with the symbol that follows it.
//!
//! - [`VOCABULARY`] holds LEAF's 80 symbols; [`symbol_index`] and [`symbol`] convert between
//!   characters and their indices.
//! - [`Windows`] holds windows of symbol indices with their next symbols, and
//!   [`Windows::from_text`] cuts a text into every window at stride 1.
//! - [`read_leaf_dir`] reads LEAF's preprocessed JSON files (`train/` and `test/` folders).
//! - [`read_raw_text`] and [`parse_complete_works`] split Project Gutenberg's complete works
//!   (`100.txt`) into speaking characters the way LEAF's `preprocess_shakespeare.py` does,
//!   and [`Speaker::split`] cuts a character's lines into training, validation and test
//!   windows in time order.
//! - [`choose_clients`] draws the clients of a run among those with enough text, and
//!   [`TextClient::truncate`] caps their windows for quick runs.
//!
//! Every reader refuses malformed input with a [`DataError`] naming the file, the user and
//! the offending value.

#[cfg(feature = "leaf")]
mod leaf;
mod raw;

use std::ops::Range;

use hgp_base::rng::stream;
use rand::RngExt;

pub use crate::DataError;
#[cfg(feature = "leaf")]
pub use leaf::read_leaf_dir;
pub use raw::{Speaker, parse_complete_works, read_raw_text};

/// LEAF's vocabulary: newline, space, `! " & ' ( ) , - .`, the digits, `: ; > ?`, `A`–`Z`,
/// `[ ]`, `a`–`z` and `}`. A symbol's index is its position here.
pub const VOCABULARY: &str =
    "\n !\"&'(),-.0123456789:;>?ABCDEFGHIJKLMNOPQRSTUVWXYZ[]abcdefghijklmnopqrstuvwxyz}";

/// Number of symbols of [`VOCABULARY`].
pub const VOCABULARY_SIZE: usize = 80;

const _: () = assert!(VOCABULARY.len() == VOCABULARY_SIZE);

/// Stream domain of [`choose_clients`] (`"textcl"`; distinct from every domain of
/// `hgp_base::rng::domain`, which a test checks).
const TEXT_CLIENTS: u64 = 0x7465_7874_636c;

/// Marks a byte that is not a symbol in [`LOOKUP`].
const NO_SYMBOL: u8 = u8::MAX;

/// The index of every byte in [`VOCABULARY`], [`NO_SYMBOL`] for the others (every symbol is
/// ASCII, so bytes ≥ 0x80 are never symbols).
static LOOKUP: [u8; 256] = build_lookup();

const fn build_lookup() -> [u8; 256] {
    let mut table = [NO_SYMBOL; 256];
    let bytes = VOCABULARY.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        table[bytes[i] as usize] = i as u8;
        i += 1;
    }
    table
}

/// The index of character `c` in [`VOCABULARY`], if it is one of its symbols.
pub fn symbol_index(c: char) -> Option<u8> {
    u8::try_from(c).ok().and_then(byte_index)
}

/// The symbol at `index` of [`VOCABULARY`], if `index < VOCABULARY_SIZE`.
pub fn symbol(index: u8) -> Option<char> {
    VOCABULARY
        .as_bytes()
        .get(usize::from(index))
        .map(|&b| char::from(b))
}

/// The index of the one-byte character `b`, if it is a symbol.
fn byte_index(b: u8) -> Option<u8> {
    Some(LOOKUP[usize::from(b)]).filter(|&i| i != NO_SYMBOL)
}

/// Windows of `seq` symbol indices, each with the index of the symbol that follows it.
///
/// Window k is `symbols[k·seq .. (k+1)·seq]` and its next symbol `next[k]`; the fields are
/// public, and [`Windows::new`] builds a value after checking that they agree. The windows
/// are stored in full (`seq` bytes each), as LEAF stores them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Windows {
    /// Symbols per window.
    pub seq: usize,
    /// The windows' symbol indices, window after window (`len() · seq` of them).
    pub symbols: Vec<u8>,
    /// The index of the symbol following each window.
    pub next: Vec<u8>,
}

impl Windows {
    /// Windows from their fields.
    ///
    /// # Errors
    ///
    /// [`DataError::WindowShape`] unless `symbols.len() == next.len() · seq`.
    pub fn new(seq: usize, symbols: Vec<u8>, next: Vec<u8>) -> Result<Self, DataError> {
        if next.len().checked_mul(seq) != Some(symbols.len()) {
            return Err(DataError::WindowShape {
                detail: format!(
                    "{} symbols for {} windows of {seq}",
                    symbols.len(),
                    next.len()
                ),
            });
        }
        Ok(Self { seq, symbols, next })
    }

    /// No window of `seq` symbols.
    pub fn empty(seq: usize) -> Self {
        Self {
            seq,
            symbols: Vec::new(),
            next: Vec::new(),
        }
    }

    /// Every window of `seq` symbols of `text` (symbol indices) at stride 1, each with the
    /// symbol after it: window i is `text[i .. i+seq]` and its next symbol `text[i+seq]`, for
    /// i in `0 .. text.len() − seq`. A text of at most `seq` symbols gives no window.
    ///
    /// The windows take `seq` bytes each: a text of n symbols takes about n·seq bytes.
    pub fn from_text(text: &[u8], seq: usize) -> Self {
        let count = text.len().saturating_sub(seq);
        let mut symbols = Vec::with_capacity(count.saturating_mul(seq));
        for i in 0..count {
            symbols.extend_from_slice(&text[i..i + seq]);
        }
        let next = text.get(seq..).map_or_else(Vec::new, <[u8]>::to_vec);
        Self { seq, symbols, next }
    }

    /// Number of windows.
    pub fn len(&self) -> usize {
        self.next.len()
    }

    /// Whether there is no window.
    pub fn is_empty(&self) -> bool {
        self.next.is_empty()
    }

    /// The symbols of window `k`.
    ///
    /// # Panics
    ///
    /// If `k >= self.len()` (or the fields disagree), like slice indexing.
    pub fn window(&self, k: usize) -> &[u8] {
        &self.symbols[k * self.seq..(k + 1) * self.seq]
    }

    /// The windows with their next symbols, in order.
    ///
    /// # Panics
    ///
    /// While iterating, if the fields disagree (see [`Windows::new`]).
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&[u8], u8)> + '_ {
        self.next
            .iter()
            .enumerate()
            .map(|(k, &next)| (self.window(k), next))
    }

    /// A copy of the windows in `range`, clamped to `0 .. self.len()` (so an empty or
    /// out-of-range `range` gives no window rather than a panic).
    pub fn subset(&self, range: Range<usize>) -> Windows {
        let end = range.end.min(self.len());
        let start = range.start.min(end);
        let symbols = self
            .symbols
            .get(start.saturating_mul(self.seq)..end.saturating_mul(self.seq))
            .unwrap_or_default();
        Windows {
            seq: self.seq,
            symbols: symbols.to_vec(),
            next: self.next[start..end].to_vec(),
        }
    }

    /// The first `k` windows (all of them if `k ≥ len()`) and the rest, in order.
    pub fn split_at(mut self, k: usize) -> (Windows, Windows) {
        let k = k.min(self.len());
        let cut = k.saturating_mul(self.seq).min(self.symbols.len());
        let tail = Windows {
            seq: self.seq,
            symbols: self.symbols.split_off(cut),
            next: self.next.split_off(k),
        };
        self.symbols.shrink_to_fit();
        self.next.shrink_to_fit();
        (self, tail)
    }

    /// Keeps the first `max` windows (all of them if there are no more).
    pub fn truncate(&mut self, max: usize) {
        self.next.truncate(max);
        self.symbols.truncate(max.saturating_mul(self.seq));
    }
}

/// One client of the Shakespeare task: the windows of one speaking character.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TextClient {
    /// The user name (LEAF's `PLAY_CHARACTER`).
    pub name: String,
    /// Training windows.
    pub train: Windows,
    /// Validation windows (after the training ones in time).
    pub validation: Windows,
    /// Test windows.
    pub test: Windows,
}

impl TextClient {
    /// Keeps the first `max_train` training windows and the first `max_other` validation and
    /// test windows, in order (for quick runs).
    pub fn truncate(&mut self, max_train: usize, max_other: usize) {
        self.train.truncate(max_train);
        self.validation.truncate(max_other);
        self.test.truncate(max_other);
    }

    /// The fewest windows of its three parts.
    pub fn min_windows(&self) -> usize {
        self.train
            .len()
            .min(self.validation.len())
            .min(self.test.len())
    }
}

/// Draws `n` clients uniformly at random without replacement among those with at least
/// `min_windows` windows in each of training, validation and test, and returns them sorted
/// by name.
///
/// The draw is a pure function of the set of clients (they are sorted by name first, so the
/// order given does not matter), `n`, `min_windows` and `seed`: a partial Fisher–Yates
/// shuffle on `hgp_base::rng::stream(seed, TEXT_CLIENTS, 0)`.
///
/// # Errors
///
/// [`DataError::TooFewClients`] if fewer than `n` clients have enough windows, saying how
/// many do.
pub fn choose_clients(
    clients: Vec<TextClient>,
    n: usize,
    min_windows: usize,
    seed: u64,
) -> Result<Vec<TextClient>, DataError> {
    let counts: Vec<(&str, usize)> = clients
        .iter()
        .map(|c| (c.name.as_str(), c.min_windows()))
        .collect();
    let chosen = choose_by_counts(&counts, n, min_windows, seed)?;
    let mut slots: Vec<Option<TextClient>> = clients.into_iter().map(Some).collect();
    Ok(chosen.iter().filter_map(|&k| slots[k].take()).collect())
}

/// The draw of [`choose_clients`] from the clients' names and fewest windows of their three
/// parts alone (so a caller can choose before it cuts any text into windows): the indices
/// into `counts` of the `n` drawn, in the order of their names.
///
/// # Errors
///
/// [`DataError::TooFewClients`] as [`choose_clients`].
pub fn choose_by_counts(
    counts: &[(&str, usize)],
    n: usize,
    min_windows: usize,
    seed: u64,
) -> Result<Vec<usize>, DataError> {
    let mut eligible: Vec<usize> = (0..counts.len())
        .filter(|&k| counts[k].1 >= min_windows)
        .collect();
    eligible.sort_by(|&a, &b| counts[a].0.cmp(counts[b].0));
    if eligible.len() < n {
        return Err(DataError::TooFewClients {
            wanted: n,
            eligible: eligible.len(),
            total: counts.len(),
            min_windows,
        });
    }
    let mut rng = stream(seed, TEXT_CLIENTS, 0);
    for i in 0..n {
        let j = rng.random_range(i..eligible.len());
        eligible.swap(i, j);
    }
    eligible.truncate(n);
    eligible.sort_by(|&a, &b| counts[a].0.cmp(counts[b].0));
    Ok(eligible)
}

/// Symbol indices of `text` (in tests), or the byte offset and character of the first character
/// outside the vocabulary.
#[cfg(test)]
fn encode(text: &str) -> Result<Vec<u8>, (usize, char)> {
    text.bytes()
        .enumerate()
        .map(|(pos, b)| byte_index(b).ok_or_else(|| (pos, char_at(text, pos))))
        .collect()
}

/// The character starting at byte `pos` of `text` (the replacement character if `pos` is not
/// a character boundary, which the callers never pass).
fn char_at(text: &str, pos: usize) -> char {
    text.get(pos..)
        .and_then(|rest| rest.chars().next())
        .unwrap_or(char::REPLACEMENT_CHARACTER)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send_sync<T: Send + Sync>() {}

    #[test]
    fn public_types_are_send_and_sync() {
        send_sync::<Windows>();
        send_sync::<TextClient>();
        send_sync::<Speaker>();
        send_sync::<DataError>();
    }

    #[test]
    fn vocabulary_has_80_distinct_symbols_and_round_trips() {
        let chars: Vec<char> = VOCABULARY.chars().collect();
        assert_eq!(chars.len(), VOCABULARY_SIZE);
        let mut sorted = chars.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), VOCABULARY_SIZE);
        for (k, &c) in chars.iter().enumerate() {
            assert_eq!(symbol_index(c), Some(k as u8), "{c:?}");
            assert_eq!(symbol(k as u8), Some(c));
        }
        assert_eq!(symbol(VOCABULARY_SIZE as u8), None);
        assert_eq!(symbol(u8::MAX), None);
        // Every other character of the basic plane is outside.
        let inside = (0..0x1_0000)
            .filter_map(char::from_u32)
            .filter(|&c| symbol_index(c).is_some())
            .count();
        assert_eq!(inside, VOCABULARY_SIZE);
        for c in [
            '|', 'é', '\t', '\r', '<', '{', '`', '\u{ff}', '\u{100}', '😀',
        ] {
            assert_eq!(symbol_index(c), None, "{c:?}");
        }
        assert_eq!(symbol_index('\n'), Some(0));
        assert_eq!(symbol_index(' '), Some(1));
        assert_eq!(symbol_index('}'), Some(79));
        assert_eq!(encode("Ab c"), Ok(vec![25, 54, 1, 55]));
        assert_eq!((symbol_index('A'), symbol_index('a')), (Some(25), Some(53)));
        assert_eq!(encode("ab|c"), Err((2, '|')));
        assert_eq!(encode("aé"), Err((1, 'é')));
    }

    #[test]
    fn windows_from_a_short_text() {
        let w = Windows::from_text(&[10, 11, 12, 13, 14], 2);
        assert_eq!(w.seq, 2);
        assert_eq!(w.len(), 3);
        assert_eq!(w.symbols, vec![10, 11, 11, 12, 12, 13]);
        assert_eq!(w.next, vec![12, 13, 14]);
        assert_eq!(w.window(0), &[10, 11]);
        assert_eq!(w.window(2), &[12, 13]);
        let pairs: Vec<(Vec<u8>, u8)> = w.iter().map(|(s, n)| (s.to_vec(), n)).collect();
        assert_eq!(
            pairs,
            vec![(vec![10, 11], 12), (vec![11, 12], 13), (vec![12, 13], 14)]
        );
        // A text of at most seq symbols gives no window.
        for len in 0..=3 {
            let w = Windows::from_text(&[1, 2, 3][..len], 3);
            assert!(w.is_empty() && w.symbols.is_empty() && w.seq == 3, "{len}");
        }
        let one = Windows::from_text(&[1, 2, 3, 4], 3);
        assert_eq!((one.symbols, one.next), (vec![1, 2, 3], vec![4]));
        // seq 0: one empty window per symbol, labelled by it.
        let zero = Windows::from_text(&[7, 8], 0);
        assert_eq!(
            (zero.len(), zero.window(1), zero.next.clone()),
            (2, &[][..], vec![7, 8])
        );
    }

    #[test]
    fn windows_subset_split_and_truncate() {
        let w = Windows::from_text(&[0, 1, 2, 3, 4, 5, 6], 2);
        assert_eq!(w.len(), 5);
        let s = w.subset(1..3);
        assert_eq!((s.symbols, s.next), (vec![1, 2, 2, 3], vec![3, 4]));
        assert!(w.subset(Range { start: 4, end: 2 }).is_empty());
        assert_eq!(w.subset(3..100).len(), 2);
        assert!(w.subset(9..12).is_empty());
        let (head, tail) = w.clone().split_at(3);
        assert_eq!(head, w.subset(0..3));
        assert_eq!(tail, w.subset(3..5));
        let (all, none) = w.clone().split_at(10);
        assert_eq!((all, none), (w.clone(), Windows::empty(2)));
        let mut t = w.clone();
        t.truncate(2);
        assert_eq!(t, w.subset(0..2));
        t.truncate(9);
        assert_eq!(t.len(), 2);
        assert!(Windows::new(2, vec![0; 4], vec![1, 2]).is_ok());
        let err = Windows::new(2, vec![0; 5], vec![1, 2]).unwrap_err();
        assert!(
            matches!(err, DataError::WindowShape { .. })
                && err.to_string().contains("5 symbols for 2 windows of 2"),
            "{err}"
        );
    }

    /// A client named `name` with `sizes` windows (train, validation, test) of 1 symbol.
    fn client(name: &str, sizes: [usize; 3]) -> TextClient {
        let part = |n: usize| Windows::from_text(&vec![3; n + 1], 1);
        TextClient {
            name: name.to_owned(),
            train: part(sizes[0]),
            validation: part(sizes[1]),
            test: part(sizes[2]),
        }
    }

    fn names(clients: &[TextClient]) -> Vec<&str> {
        clients.iter().map(|c| c.name.as_str()).collect()
    }

    #[test]
    fn truncate_caps_each_part() {
        let mut c = client("a", [10, 4, 5]);
        c.truncate(6, 3);
        assert_eq!((c.train.len(), c.validation.len(), c.test.len()), (6, 3, 3));
        assert_eq!(c.min_windows(), 3);
        c.truncate(100, 100);
        assert_eq!(c.train.len(), 6);
    }

    #[test]
    fn domain_is_distinct() {
        assert!(!hgp_base::rng::domain::ALL.contains(&TEXT_CLIENTS));
    }

    #[test]
    fn choose_clients_is_reproducible_and_respects_the_threshold() {
        let pool: Vec<TextClient> = (0..20)
            .map(|i| {
                // Clients 0, 5, 10, 15 have too few validation windows.
                let val = if i % 5 == 0 { 2 } else { 4 };
                client(&format!("c{i:02}"), [8, val, 4])
            })
            .collect();
        let a = choose_clients(pool.clone(), 6, 3, 11).unwrap();
        assert_eq!(a.len(), 6);
        let mut reversed = pool.clone();
        reversed.reverse();
        assert_eq!(a, choose_clients(reversed, 6, 3, 11).unwrap());
        assert!(
            a.windows(2).all(|w| w[0].name < w[1].name),
            "{:?}",
            names(&a)
        );
        assert!(a.iter().all(|c| c.min_windows() >= 3));
        let draws: std::collections::BTreeSet<Vec<String>> = (0..8)
            .map(|seed| {
                let chosen = choose_clients(pool.clone(), 6, 3, seed).unwrap();
                assert!(chosen.iter().all(|c| c.min_windows() >= 3));
                chosen.into_iter().map(|c| c.name).collect()
            })
            .collect();
        assert!(draws.len() > 1, "every seed drew the same clients");
        // All eligible ones, and none.
        let all = choose_clients(pool.clone(), 16, 3, 1).unwrap();
        assert_eq!(all.len(), 16);
        assert!(choose_clients(pool.clone(), 0, 3, 1).unwrap().is_empty());
        // The threshold 2 makes all 20 eligible.
        assert_eq!(choose_clients(pool.clone(), 20, 2, 1).unwrap().len(), 20);
        let err = choose_clients(pool, 17, 3, 1).unwrap_err();
        assert!(
            matches!(
                err,
                DataError::TooFewClients {
                    wanted: 17,
                    eligible: 16,
                    total: 20,
                    min_windows: 3
                }
            ),
            "{err}"
        );
        let msg = err.to_string();
        assert!(
            msg.contains("only 16 of the 20 clients have at least 3 windows")
                && msg.contains("17 were asked for"),
            "{msg}"
        );
    }

    #[test]
    fn choose_clients_is_uniform() {
        let pool: Vec<TextClient> = (0..6).map(|i| client(&format!("c{i}"), [1; 3])).collect();
        let mut counts = [0usize; 6];
        let runs = 3000;
        for seed in 0..runs {
            for c in choose_clients(pool.clone(), 2, 1, seed).unwrap() {
                counts[usize::from(c.name.as_bytes()[1] - b'0')] += 1;
            }
        }
        // Each client is chosen with probability 1/3: 1000 times expected, sd ≈ 26.
        for (i, &k) in counts.iter().enumerate() {
            assert!((850..=1150).contains(&k), "client {i}: {k} of {runs}");
        }
    }
}
