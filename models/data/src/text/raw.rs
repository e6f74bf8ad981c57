//! The plain complete works (Project Gutenberg's `100.txt`, *The Complete Works of William
//! Shakespeare*, in the layout LEAF's `preprocess_shakespeare.py` reads), split by speaking
//! character.
//!
//! The rules are LEAF's:
//!
//! - a play starts at a line containing `by William Shakespeare`; its title is the nearest
//!   non-blank line 2 to 7 lines above it (trimmed). Text before the first play belongs to
//!   no play;
//! - a speech starts at a line `  NAME. text` (exactly two spaces, a name of ASCII letters
//!   and spaces starting with a letter, a period, a space): `text` is a snippet of the
//!   character NAME (upper-cased, LEAF's normalization), who becomes the current character;
//! - a line `    text` (four spaces) continues the current character's speech: `text` is
//!   another snippet;
//! - *The Comedy of Errors* is not indented: its speeches are `NAME. text` (a NAME starting
//!   with `ACT ` is a heading, which ends the current speech), and every other line continues
//!   the current speech (blank ones as empty snippets, as LEAF does) except one starting with
//!   `<` (a page-break notice), which ends it;
//! - every other line (blank lines, stage directions, the `<<THIS ELECTRONIC VERSION ...>>`
//!   notices at page breaks) is skipped *without* ending the current speech, so a speech
//!   spanning a page break continues; a new play ends it;
//! - plays with fewer than two speaking characters are dropped (LEAF's "degenerate plays");
//! - a user is named `PLAY_CHARACTER` by LEAF's `play_and_character`: spaces become `_`, then
//!   every run of characters that are neither alphanumeric nor `_` becomes one `_` (so
//!   `THE TRAGEDY OF HAMLET, PRINCE OF DENMARK` and `HAMLET` give
//!   `THE_TRAGEDY_OF_HAMLET__PRINCE_OF_DENMARK_HAMLET`, as in LEAF's data).
//!
//! Two departures from LEAF's script, which hard-codes line numbers of one edition: the
//! plays end at the first line containing "end of the project gutenberg" (any case) after
//! the first play has started, rather than at line 124,195; and instead of starting five
//! lines before the second `by William Shakespeare` line (which skips the header and the
//! sonnets), the header is skipped as text before the first play, a `by William Shakespeare`
//! line with no title above it (such as the first line, `The Project Gutenberg EBook of The
//! Complete Works of William Shakespeare, by William Shakespeare`) starts no play, and the
//! play titled `THE SONNETS` is skipped (some of its verse reads as speeches, e.g.
//! `  Admit impediments. Love is not love`).

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::Read;
use std::path::Path;

use super::{DataError, TextClient, Windows, byte_index, char_at};

/// Largest text file read (the complete works are about 5.5 MB).
const MAX_TEXT_BYTES: u64 = 1 << 30;
/// What a line starting a play contains.
const AUTHOR_LINE: &str = "by William Shakespeare";
/// What the line ending the plays contains (compared without case).
const END_MARKER: &str = "end of the project gutenberg";
/// The play with its own layout.
const COMEDY_OF_ERRORS: &str = "THE COMEDY OF ERRORS";
/// The "play" skipped (LEAF skips it by starting after it).
const SONNETS: &str = "THE SONNETS";
/// A title is searched this many lines above a `by William Shakespeare` line.
const TITLE_ABOVE: std::ops::RangeInclusive<usize> = 2..=7;

/// One speaking character of the complete works: its lines (snippets), in order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Speaker {
    /// The user name, `PLAY_CHARACTER` (see the module documentation).
    pub name: String,
    /// The snippets: the text of each speech line of the character, in order.
    pub lines: Vec<String>,
}

impl Speaker {
    /// Training, validation and test windows of `seq` symbols, in time order (paper 004,
    /// App. A.1): of the L lines, the first b = ⌊4L/5⌋ are training and validation in a
    /// 3 : 1 ratio (lines `0..a` training and `a..b` validation, a = ⌊3b/4⌋), and the last
    /// L − b are the test lines. With the floors every part has a line when L ≥ 3
    /// (L = 10 gives 6, 2 and 2 lines).
    ///
    /// Each part's text is its lines joined with one space, every run of two or more spaces
    /// then collapsed to one (LEAF's `gen_all_data.py`), cut by [`Windows::from_text`]; a
    /// part too short for one window has none (the caller filters clients, e.g. with
    /// [`choose_clients`](super::choose_clients)). Characters outside the vocabulary, which
    /// [`parse_complete_works`] never returns but a hand-built speaker may hold, are left
    /// out.
    pub fn split(&self, seq: usize) -> TextClient {
        let [train, validation, test] = self.parts().map(|p| Windows::from_text(&p, seq));
        TextClient {
            name: self.name.clone(),
            train,
            validation,
            test,
        }
    }

    /// The fewest windows of `seq` symbols of the three parts of [`Speaker::split`], without
    /// cutting the text into windows.
    pub fn min_windows(&self, seq: usize) -> usize {
        self.parts()
            .iter()
            .map(|p| p.len().saturating_sub(seq))
            .min()
            .unwrap_or(0)
    }

    /// The symbols of the training, validation and test lines (see [`Speaker::split`]).
    fn parts(&self) -> [Vec<u8>; 3] {
        let count = self.lines.len();
        let b = count - count.div_ceil(5);
        let a = b - b.div_ceil(4);
        [
            join_symbols(&self.lines[..a]),
            join_symbols(&self.lines[a..b]),
            join_symbols(&self.lines[b..]),
        ]
    }
}

/// The symbol indices of `lines` joined with one space, runs of spaces collapsed to one, and
/// characters outside the vocabulary left out.
fn join_symbols(lines: &[String]) -> Vec<u8> {
    let space = byte_index(b' ').unwrap_or_default();
    let mut out = Vec::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
    for (k, line) in lines.iter().enumerate() {
        let separator = (k > 0).then_some(space);
        for symbol in separator
            .into_iter()
            .chain(line.bytes().filter_map(byte_index))
        {
            if !(symbol == space && out.last() == Some(&space)) {
                out.push(symbol);
            }
        }
    }
    out
}

/// Reads the complete works from `path` and splits them by speaking character (see
/// [`parse_complete_works`]). A leading byte-order mark is ignored.
///
/// # Errors
///
/// [`DataError::Read`] if the file cannot be read, [`DataError::TooLarge`] beyond 1 GiB,
/// [`DataError::Utf8`] if it is not UTF-8 (naming the byte offset), and the errors of
/// [`parse_complete_works`].
pub fn read_raw_text(path: &Path) -> Result<Vec<Speaker>, DataError> {
    let io = |error| DataError::Read {
        path: path.to_path_buf(),
        error,
    };
    let too_large = |bytes| DataError::TooLarge {
        path: path.to_path_buf(),
        bytes,
        limit: MAX_TEXT_BYTES,
    };
    let size = fs::metadata(path).map_err(io)?.len();
    if size > MAX_TEXT_BYTES {
        return Err(too_large(size));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or_default());
    File::open(path)
        .map_err(io)?
        .take(MAX_TEXT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > MAX_TEXT_BYTES {
        return Err(too_large(bytes.len() as u64));
    }
    let file = path.display().to_string();
    let text = String::from_utf8(bytes).map_err(|e| DataError::Utf8 {
        file: file.clone(),
        offset: e.utf8_error().valid_up_to(),
    })?;
    parse_complete_works(&text, &file)
}

/// Splits the complete works (`text`, named `file` in errors) by speaking character, by the
/// rules of the module documentation. Speakers come in the order of their first line;
/// characters of the same name in two plays of the same title are one speaker (as in LEAF).
/// Lines may end with `\n` or `\r\n`; a leading byte-order mark is ignored.
///
/// # Errors
///
/// [`DataError::SnippetSymbol`] for a character outside the vocabulary in a snippet of a
/// play that is kept (naming the line, from 1, and the user; characters outside the
/// vocabulary in skipped lines are fine), and [`DataError::NoSpeakers`] if no play has two
/// speaking characters.
pub fn parse_complete_works(text: &str, file: &str) -> Result<Vec<Speaker>, DataError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let lines: Vec<&str> = text
        .split_terminator('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    let mut speakers = Speakers::default();
    let mut play: Option<Play<'_>> = None;
    // The current character, an index into the play's characters.
    let mut current: Option<usize> = None;
    for (i, &line) in lines.iter().enumerate() {
        if play.is_some() && contains_ignoring_case(line, END_MARKER) {
            break;
        }
        if line.contains(AUTHOR_LINE)
            && let Some(title) = title_above(&lines, i)
        {
            if let Some(done) = play.take() {
                done.finish(file, &mut speakers)?;
            }
            play = Some(Play::new(title));
            current = None;
            continue;
        }
        let Some(play) = play.as_mut() else {
            continue;
        };
        let number = i + 1;
        if let Some((name, snippet)) = speech(line, play.unindented) {
            let name = name.to_ascii_uppercase();
            if play.unindented && name.starts_with("ACT ") {
                current = None;
            } else {
                let c = play.character(name);
                play.push(c, number, snippet);
                current = Some(c);
            }
        } else if let Some(c) = current {
            if !play.unindented {
                if let Some(rest) = line.strip_prefix("    ") {
                    play.push(c, number, rest);
                }
            } else if line.starts_with('<') {
                current = None;
            } else {
                play.push(c, number, line);
            }
        }
    }
    if let Some(done) = play {
        done.finish(file, &mut speakers)?;
    }
    if speakers.list.is_empty() {
        return Err(DataError::NoSpeakers {
            file: file.to_owned(),
        });
    }
    Ok(speakers.list)
}

/// The nearest non-blank line 2 to 7 lines above line `i`, trimmed.
fn title_above<'t>(lines: &[&'t str], i: usize) -> Option<&'t str> {
    TITLE_ABOVE
        .filter_map(|k| i.checked_sub(k))
        .map(|k| lines[k].trim())
        .find(|l| !l.is_empty())
}

/// The name and snippet of a speech line: `  NAME. text` (indented by exactly two spaces), or
/// `NAME. text` if `unindented`; NAME is ASCII letters and spaces, starting with a letter.
fn speech(line: &str, unindented: bool) -> Option<(&str, &str)> {
    let rest = if unindented {
        line
    } else {
        line.strip_prefix("  ")?
    };
    if !rest.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return None;
    }
    let end = rest
        .find(|c: char| !(c.is_ascii_alphabetic() || c == ' '))
        .unwrap_or(rest.len());
    let (name, after) = rest.split_at(end);
    Some((name, after.strip_prefix(". ")?))
}

/// Whether `line` contains `needle` (lower-case ASCII), ignoring ASCII case.
fn contains_ignoring_case(line: &str, needle: &str) -> bool {
    line.as_bytes()
        .windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle.as_bytes()))
}

/// LEAF's user name of `character` in `play`: spaces become `_`, then every run of
/// characters other than alphanumerics and `_` becomes one `_` (Python's `\W+`).
fn user_name(play: &str, character: &str) -> String {
    let joined = format!("{play}_{character}").replace(' ', "_");
    let mut out = String::with_capacity(joined.len());
    let mut in_run = false;
    for c in joined.chars() {
        if c.is_alphanumeric() || c == '_' {
            out.push(c);
            in_run = false;
        } else if !in_run {
            out.push('_');
            in_run = true;
        }
    }
    out
}

/// The speakers found so far, with an index by name.
#[derive(Default)]
struct Speakers {
    /// In order of first appearance.
    list: Vec<Speaker>,
    /// Position of each name in `list`.
    index: HashMap<String, usize>,
}

/// A play being read.
struct Play<'t> {
    /// Its title.
    title: &'t str,
    /// Whether speeches are unindented (*The Comedy of Errors*).
    unindented: bool,
    /// Whether the play is skipped (*The Sonnets*).
    skipped: bool,
    /// Its characters (upper-cased names) and their snippets, in order of first speech.
    characters: Vec<(String, Vec<&'t str>)>,
    /// Position of each name in `characters`.
    index: HashMap<String, usize>,
    /// The first snippet holding a character outside the vocabulary: (line, speaker, char).
    bad: Option<(usize, usize, char)>,
}

impl<'t> Play<'t> {
    fn new(title: &'t str) -> Self {
        Self {
            title,
            unindented: title == COMEDY_OF_ERRORS,
            skipped: title == SONNETS,
            characters: Vec::new(),
            index: HashMap::new(),
            bad: None,
        }
    }

    /// The index of character `name`, added if new.
    fn character(&mut self, name: String) -> usize {
        if let Some(&c) = self.index.get(&name) {
            return c;
        }
        let c = self.characters.len();
        self.index.insert(name.clone(), c);
        self.characters.push((name, Vec::new()));
        c
    }

    /// Appends `snippet` (of line `number`) to character `c`.
    fn push(&mut self, c: usize, number: usize, snippet: &'t str) {
        if self.bad.is_none()
            && let Some(pos) = snippet.bytes().position(|b| byte_index(b).is_none())
        {
            self.bad = Some((number, c, char_at(snippet, pos)));
        }
        self.characters[c].1.push(snippet);
    }

    /// Adds the characters to `speakers` unless the play is degenerate or skipped.
    fn finish(self, file: &str, speakers: &mut Speakers) -> Result<(), DataError> {
        if self.skipped || self.characters.len() < 2 {
            return Ok(());
        }
        if let Some((line, c, ch)) = self.bad {
            return Err(DataError::SnippetSymbol {
                file: file.to_owned(),
                line,
                user: user_name(self.title, &self.characters[c].0),
                ch,
            });
        }
        for (name, snippets) in self.characters {
            let name = user_name(self.title, &name);
            let k = *speakers.index.entry(name.clone()).or_insert_with(|| {
                speakers.list.push(Speaker {
                    name,
                    lines: Vec::new(),
                });
                speakers.list.len() - 1
            });
            speakers.list[k]
                .lines
                .extend(snippets.into_iter().map(str::to_owned));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::encode;
    use super::*;

    const HAMLET: &str = "THE_TRAGEDY_OF_HAMLET__PRINCE_OF_DENMARK";
    const NOTICE: &str = "<<THIS ELECTRONIC VERSION OF THE COMPLETE WORKS OF WILLIAM \
                          SHAKESPEARE IS COPYRIGHT 1990-1993 BY WORLD LIBRARY, INC.>>";

    /// An excerpt in the layout of Gutenberg's `100.txt`, one line per entry.
    fn excerpt() -> Vec<String> {
        let lines = [
            "The Project Gutenberg EBook of The Complete Works of William Shakespeare, by William Shakespeare",
            "",
            "This eBook is for the use of anyone anywhere at no cost.",
            "  HEADER. A speech-like line before any play belongs to no play.",
            "  NOTICE. Nor does this one, even with a | bar.",
            "",
            "1609",
            "",
            "THE SONNETS",
            "",
            "by William Shakespeare",
            "",
            "  Admit impediments. Love is not love",
            "  Which alters when. It alteration finds,",
            "",
            "1603",
            "",
            "THE TRAGEDY OF HAMLET, PRINCE OF DENMARK",
            "",
            "",
            "by William Shakespeare",
            "",
            "Dramatis Personae",
            "    A four-space line before any speech is skipped.",
            "ACT I. SCENE I.",
            "Elsinore. A platform before the Castle.",
            "",
            "Enter two Sentinels-[first,] Francisco, [who paces up and down at his post].",
            "",
            "  BERNARDO. Who's there?",
            "  FRANCISCO. Nay, answer me. Stand and unfold",
            "    yourself.",
            "  BERNARDO. Long live the King!",
            "  Francisco. You come most carefully upon your hour.",
            "",
            "",
            NOTICE,
            "\u{c}",
            "",
            "    'Tis now struck twelve. Get thee to bed, Francisco.",
            "  [Exit Bernardo \u{2014} and a ghost.]",
            "    For this relief much thanks.",
            "   THREE. Three spaces make no speech.",
            "  HORATIO. Friends to this ground.",
            "",
            "1593",
            "",
            "THE COMEDY OF ERRORS",
            "",
            "by William Shakespeare",
            "",
            "ACT I. SCENE I.",
            "A hall in DUKE SOLINUS'S palace.",
            "Enter DUKE, AEGEON, JAILER, OFFICERS, and other ATTENDANTS",
            "",
            "AEGEON. Proceed, Solinus, to procure my fall,",
            "And by the doom of death end woes and all.",
            "Duke. Merchant of Syracusa, plead no more.",
            NOTICE,
            "I am not partial to infringe our laws;",
            "DUKE. Again.",
            "",
            "ACT II. SCENE 1.",
            "The house of ANTIPHOLUS of Ephesus.",
            "",
            "A LOVER'S COMPLAINT",
            "",
            "by William Shakespeare",
            "",
            "  SOLO. Une fen\u{ea}tre: one speaker only, so the play is dropped.",
            "    And only I speak.",
            "",
            "THE TEMPEST",
            "",
            "",
            "",
            "",
            "by William Shakespeare",
            "  MASTER. Boatswain!",
            "  BOATSWAIN. Here, master. What cheer?",
            "  MASTER. Good, speak to th' mariners.",
            "",
            "End of the Project Gutenberg EBook of The Complete Works of William Shakespeare, by William Shakespeare",
            "  MASTER. This must be ignored.",
            "  GHOST. So must this.",
            "",
            "THE LAST PLAY",
            "",
            "by William Shakespeare",
            "  ONE. Ignored.",
            "  TWO. Ignored too.",
        ];
        lines.iter().map(|l| (*l).to_owned()).collect()
    }

    fn speaker(name: &str, lines: &[&str]) -> Speaker {
        Speaker {
            name: name.to_owned(),
            lines: lines.iter().map(|l| (*l).to_owned()).collect(),
        }
    }

    fn expected() -> Vec<Speaker> {
        vec![
            speaker(
                &format!("{HAMLET}_BERNARDO"),
                &["Who's there?", "Long live the King!"],
            ),
            speaker(
                &format!("{HAMLET}_FRANCISCO"),
                &[
                    "Nay, answer me. Stand and unfold",
                    "yourself.",
                    "You come most carefully upon your hour.",
                    "'Tis now struck twelve. Get thee to bed, Francisco.",
                    "For this relief much thanks.",
                ],
            ),
            speaker(&format!("{HAMLET}_HORATIO"), &["Friends to this ground."]),
            speaker(
                "THE_COMEDY_OF_ERRORS_AEGEON",
                &[
                    "Proceed, Solinus, to procure my fall,",
                    "And by the doom of death end woes and all.",
                ],
            ),
            speaker(
                "THE_COMEDY_OF_ERRORS_DUKE",
                &["Merchant of Syracusa, plead no more.", "Again.", ""],
            ),
            speaker(
                "THE_TEMPEST_MASTER",
                &["Boatswain!", "Good, speak to th' mariners."],
            ),
            speaker("THE_TEMPEST_BOATSWAIN", &["Here, master. What cheer?"]),
        ]
    }

    #[test]
    fn parses_the_gutenberg_layout() {
        let lines = excerpt();
        let crlf = lines.join("\r\n") + "\r\n";
        assert_eq!(parse_complete_works(&crlf, "100.txt").unwrap(), expected());
        let lf = format!("\u{feff}{}", lines.join("\n"));
        assert_eq!(parse_complete_works(&lf, "100.txt").unwrap(), expected());
    }

    #[test]
    fn reads_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("100.txt");
        fs::write(&path, excerpt().join("\r\n")).unwrap();
        assert_eq!(read_raw_text(&path).unwrap(), expected());
        let mut bytes = excerpt().join("\n").into_bytes();
        bytes.splice(100..100, [b'x', 0xff, b'y']);
        fs::write(&path, bytes).unwrap();
        let err = read_raw_text(&path).unwrap_err();
        assert!(matches!(err, DataError::Utf8 { offset: 101, .. }), "{err}");
        assert!(
            err.to_string().contains("100.txt: not UTF-8") && err.to_string().contains("101"),
            "{err}"
        );
        let err = read_raw_text(&dir.path().join("missing.txt")).unwrap_err();
        assert!(matches!(err, DataError::Read { .. }), "{err}");
        assert!(err.to_string().contains("missing.txt"), "{err}");
        // Checked from the size, before reading (a sparse file).
        let big = dir.path().join("big.txt");
        File::create(&big)
            .unwrap()
            .set_len(MAX_TEXT_BYTES + 1)
            .unwrap();
        let err = read_raw_text(&big).unwrap_err();
        assert!(matches!(err, DataError::TooLarge { .. }), "{err}");
        assert!(
            err.to_string().contains("big.txt: 1073741825 bytes"),
            "{err}"
        );
    }

    #[test]
    fn rejects_symbols_outside_the_vocabulary_in_speeches() {
        for (from, to, line_of, user) in [
            (
                "  BERNARDO. Long live the King!",
                "  BERNARDO. Long live the King | and Queen!",
                '|',
                "BERNARDO",
            ),
            (
                "    yourself.",
                "    yourself, caf\u{e9}.",
                '\u{e9}',
                "FRANCISCO",
            ),
        ] {
            let mut lines = excerpt();
            let k = lines.iter().position(|l| l == from).unwrap();
            lines[k] = to.to_owned();
            let err = parse_complete_works(&lines.join("\r\n"), "works.txt").unwrap_err();
            let user = format!("{HAMLET}_{user}");
            assert!(
                matches!(&err, DataError::SnippetSymbol { line, user: u, ch, .. }
                    if *line == k + 1 && *u == user && *ch == line_of),
                "{err}"
            );
            let msg = err.to_string();
            assert!(
                msg.starts_with(&format!(
                    "works.txt: line {}: user \"{user}\" speaks '",
                    k + 1
                )) && msg.contains(&format!("(U+{:04X})", u32::from(line_of))),
                "{msg}"
            );
        }
    }

    #[test]
    fn needs_a_play_with_two_speakers() {
        for text in [
            "",
            "Just some prose.\n  A. b\n",
            "T\n\nby William Shakespeare\n  A. b\n",
        ] {
            let err = parse_complete_works(text, "x.txt").unwrap_err();
            assert!(matches!(err, DataError::NoSpeakers { .. }), "{err}");
            assert!(err.to_string().starts_with("x.txt: no play"), "{err}");
        }
        // The same character in two plays of one title is one speaker.
        let text = "T\n\nby William Shakespeare\n  A. one\n  B. two\n\
                    T\n\nby William Shakespeare\n  A. three\n  C. four\n";
        let speakers = parse_complete_works(text, "x.txt").unwrap();
        assert_eq!(
            speakers,
            vec![
                speaker("T_A", &["one", "three"]),
                speaker("T_B", &["two"]),
                speaker("T_C", &["four"])
            ]
        );
    }

    #[test]
    fn user_names_follow_leaf() {
        assert_eq!(
            user_name("THE TRAGEDY OF HAMLET, PRINCE OF DENMARK", "HAMLET"),
            "THE_TRAGEDY_OF_HAMLET__PRINCE_OF_DENMARK_HAMLET"
        );
        assert_eq!(
            user_name("LOVE'S LABOUR'S LOST", "KING"),
            "LOVE_S_LABOUR_S_LOST_KING"
        );
        assert_eq!(
            user_name("TWELFTH NIGHT; OR, WHAT YOU WILL", "SIR TOBY"),
            "TWELFTH_NIGHT__OR__WHAT_YOU_WILL_SIR_TOBY"
        );
        assert_eq!(user_name("A -- B", "C "), "A___B_C_");
    }

    #[test]
    fn speech_lines() {
        assert_eq!(speech("  HAMLET. To be", false), Some(("HAMLET", "To be")));
        assert_eq!(
            speech("  FIRST LORD. Ay. So.", false),
            Some(("FIRST LORD", "Ay. So."))
        );
        assert_eq!(speech("  HAMLET.", false), None);
        assert_eq!(speech("  HAMLET.To be", false), None);
        assert_eq!(speech("   HAMLET. x", false), None);
        assert_eq!(speech(" HAMLET. x", false), None);
        assert_eq!(speech("HAMLET. x", false), None);
        assert_eq!(speech("  K2. x", false), None);
        assert_eq!(speech("  [Exit.] x", false), None);
        assert_eq!(speech("HAMLET. x", true), Some(("HAMLET", "x")));
        assert_eq!(speech("  HAMLET. x", true), None);
        assert_eq!(speech("", true), None);
        assert!(contains_ignoring_case(
            "*** END OF THE PROJECT GUTENBERG EBOOK ***",
            END_MARKER
        ));
        assert!(!contains_ignoring_case("end of the project", END_MARKER));
    }

    #[test]
    fn splits_a_speaker_in_time_order() {
        let lines = [
            "To be,",
            "or  not",
            "to be:",
            " that",
            "is",
            "the",
            "question.",
            "Whether",
            "'tis  ",
            "nobler",
        ];
        let client = speaker("P_X", &lines).split(4);
        assert_eq!(client.name, "P_X");
        let windows = |text: &str| Windows::from_text(&encode(text).unwrap(), 4);
        // 10 lines: 6 training, 2 validation, 2 test; spaces collapsed.
        assert_eq!(client.train, windows("To be, or not to be: that is the"));
        assert_eq!(client.validation, windows("question. Whether"));
        assert_eq!(client.test, windows("'tis nobler"));
        assert_eq!(client.train.len(), 32 - 4);
        assert_eq!(client.train.window(0), &encode("To b").unwrap()[..]);
        assert_eq!(client.train.next[0], encode("e").unwrap()[0]);
        assert_eq!(client.test.window(6), &encode("oble").unwrap()[..]);
        assert_eq!(client.test.next[6], encode("r").unwrap()[0]);
        // Part sizes (train, validation, test) in lines.
        for (count, sizes) in [
            (0, [0, 0, 0]),
            (1, [0, 0, 1]),
            (2, [0, 1, 1]),
            (3, [1, 1, 1]),
            (4, [2, 1, 1]),
            (5, [3, 1, 1]),
            (10, [6, 2, 2]),
            (100, [60, 20, 20]),
            (101, [60, 20, 21]),
        ] {
            // One distinct symbol per line, seq 0: a part of k lines has 2k − 1 symbols.
            let lines: Vec<String> = (0..count).map(|k| format!("{}", k % 10)).collect();
            let client = Speaker {
                name: String::new(),
                lines,
            }
            .split(0);
            let parts = [&client.train, &client.validation, &client.test];
            let got = parts.map(|w| w.len().div_ceil(2));
            assert_eq!(got, sizes, "{count} lines");
        }
        // Characters outside the vocabulary of a hand-built speaker are left out.
        let odd = speaker("odd", &["a|b", "c  \u{e9} d", "e", "f", "g"]).split(1);
        assert_eq!(
            odd.train,
            Windows::from_text(&encode("ab c d e").unwrap(), 1)
        );
    }

    /// The window count used to choose characters is the fewest windows of the split's
    /// parts, and drawing by counts picks the same characters as drawing the split clients.
    #[test]
    fn window_counts_match_the_split() {
        let speakers: Vec<Speaker> = (0..12)
            .map(|k| {
                let lines: Vec<String> = (0..3 + 2 * k)
                    .map(|j| format!("Line {j} of speaker {k}, said twice over."))
                    .collect();
                Speaker {
                    name: format!("PLAY_SPEAKER{k}"),
                    lines,
                }
            })
            .collect();
        for seq in [1, 8, 40, 200] {
            for s in &speakers {
                assert_eq!(s.min_windows(seq), s.split(seq).min_windows(), "{seq}");
            }
            let counts: Vec<(&str, usize)> = speakers
                .iter()
                .map(|s| (s.name.as_str(), s.min_windows(seq)))
                .collect();
            let clients: Vec<TextClient> = speakers.iter().map(|s| s.split(seq)).collect();
            let (n, min) = (3, 5);
            match (
                crate::text::choose_by_counts(&counts, n, min, 7),
                crate::text::choose_clients(clients, n, min, 7),
            ) {
                (Ok(ids), Ok(chosen)) => {
                    let names: Vec<&str> = ids.iter().map(|&k| counts[k].0).collect();
                    let chosen: Vec<&str> = chosen.iter().map(|c| c.name.as_str()).collect();
                    assert_eq!(names, chosen);
                }
                (Err(_), Err(_)) => {}
                (a, b) => panic!("seq {seq}: {a:?} vs {}", b.is_ok()),
            }
        }
    }
}
