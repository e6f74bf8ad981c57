//! LEAF's preprocessed Shakespeare: JSON files of windows per user.
//!
//! LEAF (`data/shakespeare/preprocess.sh`, then its sampling and splitting scripts) writes
//! `train/*.json` and `test/*.json`, each
//!
//! ```text
//! {"users": [names], "num_samples": [counts],
//!  "user_data": {name: {"x": [windows, e.g. 80 characters each], "y": [next characters]}}}
//! ```
//!
//! sometimes with a `"hierarchies"` key (other keys are ignored). The files are hundreds of
//! megabytes: they are parsed as a stream, and every window is converted to symbol indices
//! as it is read, into one flat buffer per user, so memory stays near one byte per symbol.
//! A defect inside `x` or `y` (a character outside the vocabulary, a window of another
//! length, a `y` that is not one symbol) is recorded while parsing and reported, with its
//! user and index, once the file has been read.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::fs::{self, File};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use super::{DataError, TextClient, Windows, byte_index, char_at};

/// Buffer of the JSON reader.
const READ_BUFFER: usize = 1 << 20;
/// Characters of a bad `y` entry shown in messages.
const SHOWN_CHARS: usize = 16;

/// Reads LEAF's Shakespeare data from `dir`, which holds a `train/` and a `test/` folder of
/// `*.json` files (read in name order; other files are ignored).
///
/// A folder's users are the union of its files' users. Per user, the windows of `train/` are
/// split **in order** 3 : 1 (the first ⌊3m/4⌋ of its m windows for training, the rest for
/// validation: time order is kept, as paper 004 does), and those of `test/` are its test
/// windows. Windows keep their order within a file. Every window of every file must have the
/// same length, the `seq` of the returned windows. Clients come in the order of the files of
/// `train/` and of each file's `users` list.
///
/// # Errors
///
/// Each names the file and, where there is one, the user:
///
/// - [`DataError::NotADirectory`] if `dir`, `dir/train` or `dir/test` is not a directory,
///   [`DataError::Read`] if a file or folder cannot be read;
/// - [`DataError::NoJsonFiles`] if a folder holds no `*.json` file, [`DataError::NoUsers`]
///   if its files list no user;
/// - [`DataError::Json`] if a file is not JSON or not of LEAF's shape;
/// - [`DataError::CountsLength`], [`DataError::RepeatedUser`],
///   [`DataError::MissingUserData`], [`DataError::UnlistedUser`] if `users`, `num_samples`
///   and `user_data` disagree; [`DataError::DuplicateUser`] if a user is in two files of a
///   folder;
/// - [`DataError::Symbol`] for a character outside the vocabulary, [`DataError::Target`] for
///   a `y` that is not one symbol, [`DataError::WindowLength`] and
///   [`DataError::EmptyWindow`] for windows of different or zero length;
/// - [`DataError::XyMismatch`] and [`DataError::SampleCount`] if `x`, `y` and `num_samples`
///   disagree on a user's number of windows;
/// - [`DataError::EmptyUser`] for a user without windows, [`DataError::UnmatchedUser`] for a
///   user in only one of `train/` and `test/`.
pub fn read_leaf_dir(dir: &Path) -> Result<Vec<TextClient>, DataError> {
    if !dir.is_dir() {
        return Err(DataError::NotADirectory {
            dir: dir.to_path_buf(),
        });
    }
    let mut seq = None;
    let train = read_folder(&dir.join("train"), &mut seq)?;
    let test_dir = dir.join("test");
    let test = read_folder(&test_dir, &mut seq)?;
    let train_names: HashSet<&str> = train.iter().map(|u| u.name.as_str()).collect();
    let mut test_by_name: HashMap<String, UserWindows> = HashMap::with_capacity(test.len());
    for user in test {
        if !train_names.contains(user.name.as_str()) {
            return Err(DataError::UnmatchedUser {
                file: user.file,
                user: user.name,
                present: "test",
                missing: dir.join("train"),
            });
        }
        test_by_name.insert(user.name.clone(), user);
    }
    let mut clients = Vec::with_capacity(train.len());
    for user in train {
        let Some(test) = test_by_name.remove(&user.name) else {
            return Err(DataError::UnmatchedUser {
                file: user.file,
                user: user.name,
                present: "train",
                missing: test_dir,
            });
        };
        let m = user.windows.len();
        let (train, validation) = user.windows.split_at(m - m.div_ceil(4));
        clients.push(TextClient {
            name: user.name,
            train,
            validation,
            test: test.windows,
        });
    }
    Ok(clients)
}

/// The windows of one user of one folder.
#[derive(Debug)]
struct UserWindows {
    /// The file they come from.
    file: String,
    /// The user.
    name: String,
    /// Its windows.
    windows: Windows,
}

/// The window length every window must have, and where it was first seen.
#[derive(Debug)]
struct SeqOrigin {
    /// The length.
    len: usize,
    /// The file of the first window.
    file: String,
    /// Its user.
    user: String,
}

/// The users of every `*.json` file of `folder`, in file order.
fn read_folder(folder: &Path, seq: &mut Option<SeqOrigin>) -> Result<Vec<UserWindows>, DataError> {
    let files = json_files(folder)?;
    if files.is_empty() {
        return Err(DataError::NoJsonFiles {
            dir: folder.to_path_buf(),
        });
    }
    let mut users: Vec<UserWindows> = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for path in &files {
        let file = path.display().to_string();
        for (name, windows) in read_file(path, &file, seq)? {
            if let Some(&k) = seen.get(&name) {
                return Err(DataError::DuplicateUser {
                    user: name,
                    first: users[k].file.clone(),
                    second: file,
                });
            }
            seen.insert(name.clone(), users.len());
            users.push(UserWindows {
                file: file.clone(),
                name,
                windows,
            });
        }
    }
    if users.is_empty() {
        return Err(DataError::NoUsers {
            dir: folder.to_path_buf(),
        });
    }
    Ok(users)
}

/// The regular files (following links) of `folder` whose names end in `.json`, sorted.
fn json_files(folder: &Path) -> Result<Vec<PathBuf>, DataError> {
    if !folder.is_dir() {
        return Err(DataError::NotADirectory {
            dir: folder.to_path_buf(),
        });
    }
    let io = |error| DataError::Read {
        path: folder.to_path_buf(),
        error,
    };
    let mut files = Vec::new();
    for entry in fs::read_dir(folder).map_err(io)? {
        let path = entry.map_err(io)?.path();
        let is_json = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json"));
        if is_json && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// Parses one LEAF file and checks it; returns its users with their windows, in the order
/// of `users`. `seq` is the window length of the files read before (set by the first).
fn read_file(
    path: &Path,
    file: &str,
    seq: &mut Option<SeqOrigin>,
) -> Result<Vec<(String, Windows)>, DataError> {
    let reader = File::open(path).map_err(|error| DataError::Read {
        path: path.to_path_buf(),
        error,
    })?;
    let mut buffered = BufReader::with_capacity(READ_BUFFER, reader);
    // A UTF-8 byte-order mark (which some editors write) is not JSON; it is skipped.
    let bom = buffered.fill_buf().map_err(|error| DataError::Read {
        path: path.to_path_buf(),
        error,
    })?;
    if bom.starts_with(b"\xEF\xBB\xBF") {
        buffered.consume(3);
    }
    let parsed: LeafFile = serde_json::from_reader(buffered).map_err(|error| {
        if error.is_io() {
            DataError::Read {
                path: path.to_path_buf(),
                error: error.into(),
            }
        } else {
            DataError::Json {
                file: file.to_owned(),
                error,
            }
        }
    })?;
    check_file(parsed, file, seq)
}

/// Checks a parsed file (listing, counts, defects, window lengths) and converts its users.
fn check_file(
    parsed: LeafFile,
    file: &str,
    seq: &mut Option<SeqOrigin>,
) -> Result<Vec<(String, Windows)>, DataError> {
    let LeafFile {
        users,
        num_samples,
        user_data: UserData(data),
    } = parsed;
    if users.len() != num_samples.len() {
        return Err(DataError::CountsLength {
            file: file.to_owned(),
            users: users.len(),
            counts: num_samples.len(),
        });
    }
    let repeated = |user: &str, field| DataError::RepeatedUser {
        file: file.to_owned(),
        user: user.to_owned(),
        field,
    };
    let mut listed: HashSet<&str> = HashSet::with_capacity(users.len());
    for user in &users {
        if !listed.insert(user) {
            return Err(repeated(user, "users"));
        }
    }
    let mut keys: HashSet<&str> = HashSet::with_capacity(data.len());
    for (user, _) in &data {
        if !keys.insert(user) {
            return Err(repeated(user, "user_data"));
        }
        if !listed.contains(user.as_str()) {
            return Err(DataError::UnlistedUser {
                file: file.to_owned(),
                user: user.clone(),
            });
        }
    }
    let mut by_name: HashMap<String, RawUser> = data.into_iter().collect();
    let mut out = Vec::with_capacity(users.len());
    for (user, expected) in users.into_iter().zip(num_samples) {
        let Some(raw) = by_name.remove(&user) else {
            return Err(DataError::MissingUserData {
                file: file.to_owned(),
                user,
            });
        };
        let windows = check_user(raw, &user, expected, file, seq)?;
        out.push((user, windows));
    }
    Ok(out)
}

/// Checks one user's windows and returns them.
fn check_user(
    raw: RawUser,
    user: &str,
    expected: u64,
    file: &str,
    seq: &mut Option<SeqOrigin>,
) -> Result<Windows, DataError> {
    let RawUser { x, y } = raw;
    if let Some(defect) = x.defect.or(y.defect) {
        return Err(defect.into_error(file, user, x.len));
    }
    if x.len == Some(0) {
        return Err(DataError::EmptyWindow {
            file: file.to_owned(),
            user: user.to_owned(),
        });
    }
    if x.count != y.count {
        return Err(DataError::XyMismatch {
            file: file.to_owned(),
            user: user.to_owned(),
            x: x.count,
            y: y.count,
        });
    }
    if usize::try_from(expected).ok() != Some(x.count) {
        return Err(DataError::SampleCount {
            file: file.to_owned(),
            user: user.to_owned(),
            expected,
            x: x.count,
            y: y.count,
        });
    }
    let Some(len) = x.len else {
        return Err(DataError::EmptyUser {
            file: file.to_owned(),
            user: user.to_owned(),
        });
    };
    match seq {
        Some(origin) if origin.len != len => {
            return Err(DataError::WindowLength {
                file: file.to_owned(),
                user: user.to_owned(),
                window: 0,
                found: len,
                expected: origin.len,
                first: first_window(&origin.user, &origin.file),
            });
        }
        Some(_) => {}
        None => {
            *seq = Some(SeqOrigin {
                len,
                file: file.to_owned(),
                user: user.to_owned(),
            });
        }
    }
    Windows::new(len, x.symbols, y.next)
}

/// The first window of `user` in `file`, in words (for [`DataError::WindowLength`]).
fn first_window(user: &str, file: &str) -> String {
    format!("x[0] of user {user:?} in {file}")
}

/// A LEAF file, as parsed (other keys, such as `hierarchies`, are skipped).
#[derive(Deserialize)]
struct LeafFile {
    /// The users, in order.
    users: Vec<String>,
    /// Windows per user.
    num_samples: Vec<u64>,
    /// Each user's windows.
    user_data: UserData,
}

/// The entries of `user_data` in file order (repeated keys kept, for the check).
struct UserData(Vec<(String, RawUser)>);

impl<'de> Deserialize<'de> for UserData {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(UserDataVisitor)
    }
}

struct UserDataVisitor;

impl<'de> Visitor<'de> for UserDataVisitor {
    type Value = UserData;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map from user names to {\"x\": [...], \"y\": [...]}")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<UserData, A::Error> {
        let mut entries = Vec::new();
        while let Some(entry) = map.next_entry::<String, RawUser>()? {
            entries.push(entry);
        }
        Ok(UserData(entries))
    }
}

/// One user's entry of `user_data` (other keys are skipped).
#[derive(Deserialize)]
struct RawUser {
    /// The windows.
    x: Inputs,
    /// Their next symbols.
    y: Targets,
}

/// A problem inside `x` or `y`, found while parsing (the first one of the list).
#[derive(Debug)]
enum Defect {
    /// A character outside the vocabulary.
    Symbol {
        field: &'static str,
        index: usize,
        ch: char,
    },
    /// A window whose length differs from the first window's.
    Length { index: usize, found: usize },
    /// A `y` entry that is not one character.
    Target {
        index: usize,
        shown: String,
        chars: usize,
    },
}

impl Defect {
    /// The error, for `user` of `file` whose first window has length `first_len`.
    fn into_error(self, file: &str, user: &str, first_len: Option<usize>) -> DataError {
        let (file, user) = (file.to_owned(), user.to_owned());
        match self {
            Defect::Symbol { field, index, ch } => DataError::Symbol {
                file,
                user,
                field,
                index,
                ch,
            },
            Defect::Length { index, found } => DataError::WindowLength {
                first: first_window(&user, &file),
                file,
                user,
                window: index,
                found,
                expected: first_len.unwrap_or(0),
            },
            Defect::Target {
                index,
                shown,
                chars,
            } => DataError::Target {
                file,
                user,
                index,
                shown,
                chars,
            },
        }
    }
}

/// The windows of `x`, converted to symbol indices as they are read.
#[derive(Default)]
struct Inputs {
    /// Symbol indices, window after window (cleared after a defect).
    symbols: Vec<u8>,
    /// Windows read.
    count: usize,
    /// The first window's length.
    len: Option<usize>,
    /// The first defect.
    defect: Option<Defect>,
}

impl Inputs {
    fn push(&mut self, window: &str) {
        let index = self.count;
        self.count += 1;
        if self.defect.is_some() {
            return;
        }
        self.symbols.reserve(window.len());
        for (pos, b) in window.bytes().enumerate() {
            match byte_index(b) {
                Some(i) => self.symbols.push(i),
                None => {
                    let ch = char_at(window, pos);
                    self.fail(Defect::Symbol {
                        field: "x",
                        index,
                        ch,
                    });
                    return;
                }
            }
        }
        // Every symbol is one byte, so the window has as many symbols as bytes.
        let found = window.len();
        match self.len {
            None => self.len = Some(found),
            Some(len) if len != found => self.fail(Defect::Length { index, found }),
            Some(_) => {}
        }
    }

    /// Records `defect` and frees the symbols (the file will be refused).
    fn fail(&mut self, defect: Defect) {
        self.defect = Some(defect);
        self.symbols = Vec::new();
    }
}

impl<'de> Deserialize<'de> for Inputs {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_seq(InputsVisitor)
    }
}

struct InputsVisitor;

impl<'de> Visitor<'de> for InputsVisitor {
    type Value = Inputs;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of window strings")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Inputs, A::Error> {
        let mut inputs = Inputs::default();
        while seq.next_element_seed(WindowSeed(&mut inputs))?.is_some() {}
        inputs.symbols.shrink_to_fit();
        Ok(inputs)
    }
}

/// Reads one string of `x` into the [`Inputs`].
struct WindowSeed<'a>(&'a mut Inputs);

impl<'de> DeserializeSeed<'de> for WindowSeed<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for WindowSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a window string")
    }

    fn visit_str<E: de::Error>(self, window: &str) -> Result<(), E> {
        self.0.push(window);
        Ok(())
    }
}

/// The next symbols of `y`, converted as they are read.
#[derive(Default)]
struct Targets {
    /// Symbol indices.
    next: Vec<u8>,
    /// Entries read.
    count: usize,
    /// The first defect.
    defect: Option<Defect>,
}

impl Targets {
    fn push(&mut self, target: &str) {
        let index = self.count;
        self.count += 1;
        if self.defect.is_some() {
            return;
        }
        let mut chars = target.chars();
        let defect = match (chars.next(), chars.next()) {
            (Some(ch), None) => match u8::try_from(ch).ok().and_then(byte_index) {
                Some(i) => {
                    self.next.push(i);
                    return;
                }
                None => Defect::Symbol {
                    field: "y",
                    index,
                    ch,
                },
            },
            _ => {
                let shown: String = target.chars().take(SHOWN_CHARS).collect();
                let more = if shown.len() < target.len() {
                    "…"
                } else {
                    ""
                };
                Defect::Target {
                    index,
                    shown: format!("{shown:?}{more}"),
                    chars: target.chars().count(),
                }
            }
        };
        self.defect = Some(defect);
        self.next = Vec::new();
    }
}

impl<'de> Deserialize<'de> for Targets {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_seq(TargetsVisitor)
    }
}

struct TargetsVisitor;

impl<'de> Visitor<'de> for TargetsVisitor {
    type Value = Targets;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of one-character strings")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Targets, A::Error> {
        let mut targets = Targets::default();
        while seq.next_element_seed(TargetSeed(&mut targets))?.is_some() {}
        targets.next.shrink_to_fit();
        Ok(targets)
    }
}

/// Reads one string of `y` into the [`Targets`].
struct TargetSeed<'a>(&'a mut Targets);

impl<'de> DeserializeSeed<'de> for TargetSeed<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for TargetSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a one-character string")
    }

    fn visit_str<E: de::Error>(self, target: &str) -> Result<(), E> {
        self.0.push(target);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::encode;
    use super::*;
    use serde_json::{Value, json};

    /// Every window of `seq` characters of `text` (LEAF's `x`) and the character after each
    /// (`y`).
    fn windows_of(text: &str, seq: usize) -> (Vec<String>, Vec<String>) {
        (0..text.len() - seq)
            .map(|i| {
                (
                    text[i..i + seq].to_owned(),
                    text[i + seq..=i + seq].to_owned(),
                )
            })
            .unzip()
    }

    /// A LEAF file holding `users` (name, x, y) with matching `num_samples`.
    fn file_json(users: &[(&str, Vec<String>, Vec<String>)]) -> Value {
        let mut data = serde_json::Map::new();
        for (name, x, y) in users {
            data.insert((*name).to_owned(), json!({ "x": x, "y": y }));
        }
        json!({
            "users": users.iter().map(|u| u.0).collect::<Vec<_>>(),
            "num_samples": users.iter().map(|u| u.1.len()).collect::<Vec<_>>(),
            "user_data": data,
        })
    }

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    /// A user with two 8-symbol windows.
    fn small(name: &str) -> (&str, Vec<String>, Vec<String>) {
        (
            name,
            strings(&["abcdefgh", "bcdefghi"]),
            strings(&["i", "j"]),
        )
    }

    /// A directory with `files` (path under it, content), folders created as needed.
    fn dir_with(files: &[(&str, String)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for folder in ["train", "test"] {
            fs::create_dir(dir.path().join(folder)).unwrap();
        }
        for (path, content) in files {
            fs::write(dir.path().join(path), content).unwrap();
        }
        dir
    }

    /// A valid train/ and test/ pair for `U1` around `broken` (path, content), which
    /// replaces the file of the same path.
    fn read_with(broken: (&str, String)) -> (tempfile::TempDir, DataError) {
        let good = file_json(&[small("U1")]).to_string();
        let mut files = vec![("train/a.json", good.clone()), ("test/a.json", good)];
        files.retain(|(p, _)| *p != broken.0);
        files.push(broken);
        let dir = dir_with(&files);
        let err = read_leaf_dir(dir.path()).unwrap_err();
        (dir, err)
    }

    /// Asserts that `err`'s message names every one of `parts`.
    fn names_all(err: &DataError, parts: &[&str]) {
        let msg = err.to_string();
        assert!(!msg.contains('\n'), "{msg}");
        for part in parts {
            assert!(msg.contains(part), "{msg:?} does not name {part:?}");
        }
    }

    const ALICE: &str = "To be, or not to be: that is the question.";
    const BOB: &str = "Now is the winter of our discontent";
    const CAROL: &str = "Friends, Romans, countrymen";

    /// A file that starts with a UTF-8 byte-order mark (as some editors save JSON) reads as
    /// the same file without it.
    #[test]
    fn a_byte_order_mark_is_skipped() {
        let good = file_json(&[small("U1")]).to_string();
        let dir = dir_with(&[
            ("train/a.json", format!("\u{feff}{good}")),
            ("test/a.json", good),
        ]);
        let clients = read_leaf_dir(dir.path()).unwrap();
        assert_eq!(clients.len(), 1);
        assert_eq!(clients[0].name, "U1");
    }

    #[test]
    fn reads_users_in_order_and_splits_train_three_to_one() {
        let user = |name, train: &str| {
            let (x, y) = windows_of(train, 8);
            (name, x, y)
        };
        let mut a = file_json(&[user("ALICE", ALICE), user("BOB", BOB)]);
        a["hierarchies"] = json!(["play", "other"]);
        let b = file_json(&[user("CAROL", CAROL)]);
        let test = file_json(&[
            user("CAROL", "lend me your ears"),
            user("ALICE", "Whether 'tis nobler"),
            user("BOB", "Made glorious summer"),
        ]);
        let dir = dir_with(&[
            ("train/a.json", a.to_string()),
            ("train/b.json", b.to_string()),
            ("train/notes.txt", "not JSON, not read".to_owned()),
            ("test/t.json", test.to_string()),
        ]);
        let clients = read_leaf_dir(dir.path()).unwrap();
        let names: Vec<&str> = clients.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["ALICE", "BOB", "CAROL"]);
        let expected = |train: &str, test: &str| {
            let all = Windows::from_text(&encode(train).unwrap(), 8);
            let m = all.len();
            let (train, validation) = all.split_at(3 * m / 4);
            (
                train,
                validation,
                Windows::from_text(&encode(test).unwrap(), 8),
            )
        };
        for (client, (train, test)) in clients.iter().zip([
            (ALICE, "Whether 'tis nobler"),
            (BOB, "Made glorious summer"),
            (CAROL, "lend me your ears"),
        ]) {
            let (t, v, s) = expected(train, test);
            assert_eq!(client.train, t, "{}", client.name);
            assert_eq!(client.validation, v, "{}", client.name);
            assert_eq!(client.test, s, "{}", client.name);
        }
        // ALICE: 34 windows, the first 25 for training, the last 9 (in order) for validation.
        let alice = &clients[0];
        assert_eq!((alice.train.len(), alice.validation.len()), (25, 9));
        assert_eq!(alice.train.seq, 8);
        let text = |w: &[u8]| -> String {
            w.iter()
                .map(|&i| super::super::symbol(i).unwrap())
                .collect()
        };
        assert_eq!(text(alice.train.window(0)), "To be, o");
        assert_eq!(text(alice.validation.window(0)), &ALICE[25..33]);
        assert_eq!(text(alice.validation.window(8)), &ALICE[33..41]);
        assert_eq!(super::super::symbol(alice.validation.next[8]), Some('.'));
        assert_eq!(alice.test.len(), "Whether 'tis nobler".len() - 8);
    }

    #[test]
    fn reads_escaped_symbols() {
        // A quote and a newline (both symbols) arrive escaped in JSON.
        let text = "a\"b\nc}d'e\nf";
        let (x, y) = windows_of(text, 8);
        let file = file_json(&[("Ü \"odd\" name", x, y)]).to_string();
        assert!(file.contains(r#"\"b\nc}"#), "{file}");
        let dir = dir_with(&[("train/a.json", file.clone()), ("test/a.json", file)]);
        let clients = read_leaf_dir(dir.path()).unwrap();
        assert_eq!(clients.len(), 1);
        assert_eq!(clients[0].name, "Ü \"odd\" name");
        let all = Windows::from_text(&encode(text).unwrap(), 8);
        assert_eq!(all.len(), 3);
        assert_eq!(clients[0].train, all.subset(0..2));
        assert_eq!(clients[0].validation, all.subset(2..3));
        assert_eq!(clients[0].test, all);
    }

    #[test]
    fn rejects_bad_json() {
        let (_dir, err) = read_with((
            "train/bad.json",
            r#"{"users": ["U1"], "num_samples": [2], "user_data": {"U1": {"x": ["abcdefgh","#
                .to_owned(),
        ));
        assert!(matches!(err, DataError::Json { .. }), "{err}");
        names_all(&err, &["bad.json", "not a LEAF JSON file", "line 1"]);
        for (content, says) in [
            (
                json!({"users": ["U1"], "num_samples": [2]}),
                "missing field `user_data`",
            ),
            (
                json!({"users": ["U1"], "num_samples": [2], "user_data": {"U1": {"x": [1, 2], "y": ["i", "j"]}}}),
                "expected a window string",
            ),
            (json!([1, 2]), "invalid type: integer `1`"),
            (
                json!({"users": "U1", "num_samples": [2], "user_data": {}}),
                "invalid type",
            ),
        ] {
            let (_dir, err) = read_with(("train/a.json", content.to_string()));
            assert!(matches!(err, DataError::Json { .. }), "{err}");
            names_all(&err, &["a.json", says]);
        }
        let (_dir, err) = read_with(("test/a.json", "{} trailing".to_owned()));
        assert!(matches!(err, DataError::Json { .. }), "{err}");
    }

    #[test]
    fn rejects_a_num_samples_mismatch() {
        let mut file = file_json(&[small("U1")]);
        file["num_samples"] = json!([3]);
        let (_dir, err) = read_with(("train/a.json", file.to_string()));
        assert!(
            matches!(
                err,
                DataError::SampleCount {
                    expected: 3,
                    x: 2,
                    y: 2,
                    ..
                }
            ),
            "{err}"
        );
        names_all(&err, &["a.json", "user \"U1\"", "num_samples says 3"]);
        file["num_samples"] = json!([2, 2]);
        let (_dir, err) = read_with(("train/a.json", file.to_string()));
        assert!(
            matches!(
                err,
                DataError::CountsLength {
                    users: 1,
                    counts: 2,
                    ..
                }
            ),
            "{err}"
        );
        names_all(&err, &["a.json"]);
    }

    #[test]
    fn rejects_symbols_outside_the_vocabulary() {
        let (x, y) = (strings(&["abcdefgh", "bcd|fghi"]), strings(&["i", "j"]));
        let file = file_json(&[small("U0"), ("U1", x, y)]);
        let (_dir, err) = read_with(("test/a.json", file.to_string()));
        assert!(
            matches!(
                err,
                DataError::Symbol {
                    field: "x",
                    index: 1,
                    ch: '|',
                    ..
                }
            ),
            "{err}"
        );
        names_all(&err, &["a.json", "user \"U1\"", "x[1]", "'|' (U+007C)"]);
        let (x, y) = (strings(&["abcdefgh", "bcdéfghi"]), strings(&["i", "j"]));
        let (_dir, err) = read_with(("train/a.json", file_json(&[("U1", x, y)]).to_string()));
        names_all(&err, &["x[1]", "'é' (U+00E9)"]);
        let (x, y) = (strings(&["abcdefgh", "bcdefghi"]), strings(&["i", "\t"]));
        let (_dir, err) = read_with(("train/a.json", file_json(&[("U1", x, y)]).to_string()));
        assert!(
            matches!(
                err,
                DataError::Symbol {
                    field: "y",
                    index: 1,
                    ..
                }
            ),
            "{err}"
        );
        names_all(&err, &["a.json", "\"U1\"", "y[1]", "'\\t' (U+0009)"]);
    }

    #[test]
    fn rejects_an_empty_user() {
        let file = file_json(&[small("U1"), ("U2", vec![], vec![])]);
        let (_dir, err) = read_with(("train/a.json", file.to_string()));
        assert!(matches!(err, DataError::EmptyUser { .. }), "{err}");
        names_all(&err, &["a.json", "user \"U2\" has no windows"]);
        let empty = strings(&["", ""]);
        let file = file_json(&[("U1", empty, strings(&["i", "j"]))]);
        let (_dir, err) = read_with(("test/a.json", file.to_string()));
        assert!(matches!(err, DataError::EmptyWindow { .. }), "{err}");
        names_all(&err, &["a.json", "\"U1\""]);
    }

    #[test]
    fn rejects_a_target_of_two_symbols() {
        let file = file_json(&[(
            "U1",
            strings(&["abcdefgh", "bcdefghi"]),
            strings(&["ij", "j"]),
        )]);
        let (_dir, err) = read_with(("train/a.json", file.to_string()));
        assert!(
            matches!(
                err,
                DataError::Target {
                    index: 0,
                    chars: 2,
                    ..
                }
            ),
            "{err}"
        );
        names_all(&err, &["a.json", "\"U1\"", "y[0] is \"ij\" (2 symbols)"]);
        let long = "x".repeat(100);
        let file = file_json(&[("U1", strings(&["abcdefgh"]), vec![long])]);
        let (_dir, err) = read_with(("train/a.json", file.to_string()));
        names_all(&err, &["\"xxxxxxxxxxxxxxxx\"…", "(100 symbols)"]);
        let file = file_json(&[("U1", strings(&["abcdefgh"]), strings(&[""]))]);
        let (_dir, err) = read_with(("train/a.json", file.to_string()));
        names_all(&err, &["y[0] is \"\" (0 symbols)"]);
    }

    #[test]
    fn rejects_windows_of_two_lengths() {
        let file = file_json(&[(
            "U1",
            strings(&["abcdefgh", "bcdefghij"]),
            strings(&["i", "j"]),
        )]);
        let (_dir, err) = read_with(("train/a.json", file.to_string()));
        assert!(
            matches!(
                err,
                DataError::WindowLength {
                    window: 1,
                    found: 9,
                    expected: 8,
                    ..
                }
            ),
            "{err}"
        );
        names_all(
            &err,
            &[
                "a.json",
                "\"U1\"",
                "x[1] has 9 symbols",
                "x[0] of user \"U1\"",
            ],
        );
        // Across files: test/ has windows of 9.
        let file = file_json(&[("U1", strings(&["abcdefghi"]), strings(&["j"]))]);
        let (dir, err) = read_with(("test/a.json", file.to_string()));
        assert!(
            matches!(
                err,
                DataError::WindowLength {
                    found: 9,
                    expected: 8,
                    ..
                }
            ),
            "{err}"
        );
        let train = dir
            .path()
            .join("train")
            .join("a.json")
            .display()
            .to_string();
        let test = dir.path().join("test").join("a.json").display().to_string();
        assert!(err.to_string().starts_with(&test), "{err}");
        names_all(&err, &["\"U1\"", &format!("in {train} has 8")]);
    }

    #[test]
    fn rejects_a_user_in_one_folder_only() {
        let two = file_json(&[small("U1"), small("U2")]).to_string();
        let (dir, err) = read_with(("train/a.json", two.clone()));
        assert!(
            matches!(
                err,
                DataError::UnmatchedUser {
                    present: "train",
                    ..
                }
            ),
            "{err}"
        );
        let test = dir.path().join("test").display().to_string();
        names_all(&err, &["a.json", "user \"U2\" of train/", &test]);
        let (_dir, err) = read_with(("test/b.json", file_json(&[small("U3")]).to_string()));
        assert!(
            matches!(
                err,
                DataError::UnmatchedUser {
                    present: "test",
                    ..
                }
            ),
            "{err}"
        );
        names_all(&err, &["b.json", "user \"U3\" of test/"]);
    }

    #[test]
    fn rejects_inconsistent_listings() {
        let mut file = file_json(&[small("U1")]);
        file["users"] = json!(["U1", "U9"]);
        file["num_samples"] = json!([2, 2]);
        let (_dir, err) = read_with(("train/a.json", file.to_string()));
        assert!(matches!(err, DataError::MissingUserData { .. }), "{err}");
        names_all(&err, &["a.json", "\"U9\""]);
        let mut file = file_json(&[small("U1"), small("U2")]);
        file["users"] = json!(["U1"]);
        file["num_samples"] = json!([2]);
        let (_dir, err) = read_with(("train/a.json", file.to_string()));
        assert!(matches!(err, DataError::UnlistedUser { .. }), "{err}");
        names_all(&err, &["a.json", "\"U2\""]);
        let mut file = file_json(&[small("U1")]);
        file["users"] = json!(["U1", "U1"]);
        file["num_samples"] = json!([2, 2]);
        let (_dir, err) = read_with(("train/a.json", file.to_string()));
        assert!(
            matches!(err, DataError::RepeatedUser { field: "users", .. }),
            "{err}"
        );
        let entry = r#"{"x": ["abcdefgh"], "y": ["i"]}"#;
        let repeated = format!(
            r#"{{"users": ["U1"], "num_samples": [1], "user_data": {{"U1": {entry}, "U1": {entry}}}}}"#
        );
        let (_dir, err) = read_with(("train/a.json", repeated));
        assert!(
            matches!(
                err,
                DataError::RepeatedUser {
                    field: "user_data",
                    ..
                }
            ),
            "{err}"
        );
        names_all(&err, &["a.json", "\"U1\" appears twice in `user_data`"]);
        let file = file_json(&[("U1", strings(&["abcdefgh", "bcdefghi"]), strings(&["i"]))]);
        let (_dir, err) = read_with(("train/a.json", file.to_string()));
        assert!(
            matches!(err, DataError::XyMismatch { x: 2, y: 1, .. }),
            "{err}"
        );
        names_all(&err, &["a.json", "\"U1\""]);
        // A user in two files of one folder.
        let (dir, err) = read_with(("train/b.json", file_json(&[small("U1")]).to_string()));
        assert!(matches!(err, DataError::DuplicateUser { .. }), "{err}");
        let first = dir
            .path()
            .join("train")
            .join("a.json")
            .display()
            .to_string();
        let second = dir
            .path()
            .join("train")
            .join("b.json")
            .display()
            .to_string();
        names_all(&err, &["\"U1\"", &format!("both {first} and {second}")]);
    }

    #[test]
    fn rejects_missing_folders_files_and_users() {
        let dir = tempfile::tempdir().unwrap();
        let err = read_leaf_dir(&dir.path().join("nope")).unwrap_err();
        assert!(matches!(err, DataError::NotADirectory { .. }), "{err}");
        let err = read_leaf_dir(dir.path()).unwrap_err();
        names_all(&err, &["train is not a directory"]);
        let good = file_json(&[small("U1")]).to_string();
        let dir = dir_with(&[("train/a.json", good.clone())]);
        let err = read_leaf_dir(dir.path()).unwrap_err();
        assert!(matches!(err, DataError::NoJsonFiles { .. }), "{err}");
        names_all(&err, &["no `*.json` file in", "test"]);
        let none = file_json(&[]).to_string();
        let dir = dir_with(&[("train/a.json", none), ("test/a.json", good)]);
        let err = read_leaf_dir(dir.path()).unwrap_err();
        assert!(matches!(err, DataError::NoUsers { .. }), "{err}");
        names_all(&err, &["no user in the JSON files of", "train"]);
    }
}
