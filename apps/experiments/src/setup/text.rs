//! The text of the Shakespeare experiments (`--dataset shakespeare`): where it is read from
//! (LEAF's JSON folders or the complete-works text), the windows' length, the choice of the
//! clients, and the windows as the instance sets the network clients take.

use std::path::Path;

use anyhow::{Context, Result, bail};
use hgp_data::images::{ImageClient, ImageSet};
use hgp_data::text::{TextClient, Windows};

/// Where `--data-dir` points for text, in words and in kind.
enum TextSource<'a> {
    /// LEAF's `train/` and `test/` folders of JSON files.
    Leaf(&'a Path),
    /// One plain-text file of the complete works.
    Raw(std::path::PathBuf),
}

fn source(data_dir: Option<&Path>) -> Result<TextSource<'_>> {
    let Some(dir) = data_dir else {
        bail!(
            "--dataset shakespeare reads its text from --data-dir: LEAF's train/ and test/ folders of JSON files, or the complete-works text file (Project Gutenberg's 100.txt)"
        );
    };
    if dir.is_file() {
        return Ok(TextSource::Raw(dir.to_path_buf()));
    }
    if !dir.is_dir() {
        match std::fs::metadata(dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                bail!("--data-dir {}: no such file or directory", dir.display())
            }
            Err(e) => bail!("--data-dir {}: cannot read it: {e}", dir.display()),
            Ok(_) => bail!(
                "--data-dir {} is neither a folder nor a regular file (a device, a pipe or a socket): give LEAF's folder or the complete-works text file",
                dir.display()
            ),
        }
    }
    if dir.join("train").is_dir() && dir.join("test").is_dir() {
        return Ok(TextSource::Leaf(dir));
    }
    let texts: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("--data-dir {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "txt"))
        .collect();
    match texts.as_slice() {
        [one] => Ok(TextSource::Raw(one.clone())),
        [] => bail!(
            "--data-dir {} holds neither LEAF's train/ and test/ folders nor a .txt file of the complete works",
            dir.display()
        ),
        _ => bail!(
            "--data-dir {} holds {} .txt files: give the complete-works file itself as --data-dir",
            dir.display(),
            texts.len()
        ),
    }
}

/// The text of an experiment before the clients are chosen: LEAF's users with their
/// windows, or the speaking characters of the complete works (cut into windows only once
/// chosen: every character's windows of 200 symbols would take 200 times the text).
pub struct TextCorpus {
    kind: CorpusKind,
    seq: usize,
    /// Where the text came from, in words.
    pub description: String,
}

enum CorpusKind {
    Leaf(Vec<TextClient>),
    Raw(Vec<hgp_data::text::Speaker>),
}

/// The text in `data_dir` for windows of `seq` symbols (paper 004 App. A.1). LEAF's files
/// hold windows of their own length (80): a shorter `seq` keeps the last `seq` symbols of
/// each (said in the description), a longer one is refused. The raw text is split by
/// speaking character, each character's lines in order into train / validation / test.
///
/// # Errors
///
/// No `--data-dir`, a folder of neither kind, the readers' errors, windows shorter than
/// `seq`.
pub fn load_text(data_dir: Option<&Path>, seq: usize) -> Result<TextCorpus> {
    match source(data_dir)? {
        TextSource::Leaf(dir) => {
            let mut clients = hgp_data::text::read_leaf_dir(dir)?;
            let found = clients.first().map_or(seq, |c| c.train.seq);
            if seq > found {
                bail!(
                    "--seq {seq}: LEAF's files in {} hold windows of {found} symbols; give --seq {found} or less (or the complete-works text, cut into windows of any length)",
                    dir.display()
                );
            }
            let how = if seq < found {
                for c in &mut clients {
                    for w in [&mut c.train, &mut c.validation, &mut c.test] {
                        *w = last_symbols(w, seq);
                    }
                }
                format!("LEAF's windows of {found} symbols cut to their last {seq} (--seq {seq})")
            } else {
                format!("LEAF's windows of {found} symbols")
            };
            let description = format!(
                "{} ({} users, {how}; each user's training windows split 3 : 1 in order into train and validation)",
                dir.display(),
                clients.len()
            );
            Ok(TextCorpus {
                kind: CorpusKind::Leaf(clients),
                seq,
                description,
            })
        }
        TextSource::Raw(path) => {
            let speakers = hgp_data::text::read_raw_text(&path)?;
            let description = format!(
                "{} ({} speaking characters, each one's lines split in order 60 / 20 / 20 % into train / validation / test, windows of {seq} symbols)",
                path.display(),
                speakers.len()
            );
            Ok(TextCorpus {
                kind: CorpusKind::Raw(speakers),
                seq,
                description,
            })
        }
    }
}

/// Symbols per window: paper 004's 200, and `--quick`'s 20.
pub fn text_seq(quick: bool) -> usize {
    if quick { 20 } else { 200 }
}

/// Paper 004's next-character LSTM (App. A.1: an embedding of 8, two LSTM layers, a dense
/// layer to the 80 symbols) on windows of `seq`: 256 units a layer, 32 with `--quick`.
pub fn text_lstm(seq: usize, quick: bool) -> hgp_nn::Architecture {
    hgp_nn::Architecture::CharLstm {
        seq,
        vocab: hgp_data::text::VOCABULARY_SIZE,
        embed: 8,
        hidden: if quick { 32 } else { 256 },
        layers: 2,
    }
}

/// `--quick` keeps each character's first this many training windows, and (second)
/// validation and test windows; the characters drawn have at least the second in each part.
pub const TEXT_QUICK_WINDOWS: (usize, usize) = (100, 40);

impl TextCorpus {
    /// `n` clients drawn (reproducibly from `seed`; `hgp_data::text::choose_clients`) from
    /// those with enough windows in each part: a `batch` of each, or with `quick`
    /// [`TEXT_QUICK_WINDOWS`]' second, each then cut to its first [`TEXT_QUICK_WINDOWS`];
    /// with the choice in words.
    ///
    /// # Errors
    ///
    /// Fewer than `n` characters with enough text (naming `flag`, which sets `n`, and what
    /// sets the threshold).
    pub fn choose(
        self,
        (n, flag): (usize, &str),
        quick: bool,
        batch: usize,
        seed: u64,
    ) -> Result<(Vec<TextClient>, String)> {
        let (min_windows, threshold) = if quick {
            (
                TEXT_QUICK_WINDOWS.1,
                "--quick's validation and test windows",
            )
        } else {
            (batch, "a --batch of each")
        };
        // LEAF's windows are fixed by its files: a shorter --seq cuts each one, it makes no
        // more of them. The complete works are cut here, so a shorter --seq makes more.
        let leaf = matches!(self.kind, CorpusKind::Leaf(_));
        let refused = |e| match e {
            hgp_data::text::DataError::TooFewClients {
                eligible: 0, total, ..
            } => {
                let remedy = match (leaf, quick) {
                    (true, true) => {
                        "LEAF's files fix how many windows each user has: give a LEAF folder with more text per user, or the complete-works text".to_string()
                    }
                    (true, false) => "use a smaller --batch (LEAF's files fix how many windows each user has: a shorter --seq makes no more)".to_string(),
                    (false, true) => "use a shorter --seq".to_string(),
                    (false, false) => "use a shorter --seq or a smaller --batch".to_string(),
                };
                anyhow::anyhow!(
                    "none of the {total} speaking characters has {min_windows} windows of --seq {} symbols in each of train, validation and test ({threshold}): {remedy}",
                    self.seq,
                )
            }
            hgp_data::text::DataError::TooFewClients {
                eligible, total, ..
            } => anyhow::anyhow!(
                "{flag} {n}: only {eligible} of the {total} speaking characters have at least {min_windows} windows in each of train, validation and test ({threshold}): use {flag} {eligible} or fewer",
            ),
            e => anyhow::Error::from(e).context(format!("{flag} {n}")),
        };
        let (total, mut chosen) = match self.kind {
            CorpusKind::Leaf(clients) => (
                clients.len(),
                hgp_data::text::choose_clients(clients, n, min_windows, seed).map_err(refused)?,
            ),
            CorpusKind::Raw(speakers) => {
                // Chosen by their window counts; only the chosen ones are cut into windows.
                let counts: Vec<(&str, usize)> = speakers
                    .iter()
                    .map(|s| (s.name.as_str(), s.min_windows(self.seq)))
                    .collect();
                let chosen = hgp_data::text::choose_by_counts(&counts, n, min_windows, seed)
                    .map_err(refused)?;
                let clients = chosen
                    .iter()
                    .map(|&k| speakers[k].split(self.seq))
                    .collect();
                (speakers.len(), clients)
            }
        };
        let mut how = format!(
            "{n} of {total} drawn at random from those with at least {min_windows} windows in each part"
        );
        if quick {
            let (train, other) = TEXT_QUICK_WINDOWS;
            for c in &mut chosen {
                c.truncate(train, other);
            }
            how.push_str(&format!(
                ", each cut to its first {train} training and {other} validation and test windows"
            ));
        }
        Ok((chosen, how))
    }
}

/// The windows cut to their last `seq` symbols (the symbol each predicts is unchanged).
fn last_symbols(w: &Windows, seq: usize) -> Windows {
    let symbols = w
        .iter()
        .flat_map(|(window, _)| window[window.len() - seq..].iter().copied())
        .collect();
    Windows {
        seq,
        symbols,
        next: w.next.clone(),
    }
}

/// Windows as the instance sets of the network clients: one "image" of 1 × `seq` values
/// (the symbol indices) per window, labelled by the symbol that follows.
pub fn windows_set(w: &Windows) -> ImageSet {
    ImageSet {
        images: w.symbols.iter().map(|&s| f32::from(s)).collect(),
        labels: w.next.clone(),
        rows: 1,
        cols: w.seq,
        channels: 1,
    }
}

/// A text client as the image experiments' client: its train, validation and test windows
/// (one cluster; no standardization).
pub fn text_image_client(c: &TextClient) -> ImageClient {
    ImageClient {
        train: windows_set(&c.train),
        val: windows_set(&c.validation),
        test: windows_set(&c.test),
        cluster: 0,
        mean: 0.0,
        std: 1.0,
    }
}

/// Refuses, before any data is read, flags that do not go with the kind of `dataset`: with
/// text an image network (`model`: its name on the command line, if given), `--images`
/// (`images`) or a `--seq` of 0; with images `--model lstm` or `--seq` (`seq`). The one
/// place `--seq` is checked, for every command that reads text.
///
/// # Errors
///
/// One line naming the flag.
pub fn check_data_kind(
    dataset: super::Dataset,
    model: Option<&str>,
    images: bool,
    seq: Option<usize>,
) -> Result<()> {
    if dataset.text() {
        if let Some(seq) = seq {
            super::at_least_one(&[("--seq", seq)])?;
        }
        if let Some(m) = model.filter(|&m| m != "lstm") {
            bail!(
                "--model {m} takes images; --dataset shakespeare takes --model lstm (the default)"
            );
        }
        if images {
            bail!(
                "--images counts images; with --dataset shakespeare the clients' windows follow from the text and --seq (--clients sets how many characters)"
            );
        }
    } else {
        if model == Some("lstm") {
            bail!(
                "--model lstm reads text: give --dataset shakespeare (--dataset {} is images)",
                dataset.name()
            );
        }
        if seq.is_some() {
            bail!(
                "--seq is the window length of text: give --dataset shakespeare (--dataset {} is images)",
                dataset.name()
            );
        }
    }
    Ok(())
}
