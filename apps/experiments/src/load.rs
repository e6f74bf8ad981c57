//! Reading an experiment's config from JSON ([`ExperimentConfig::from_json`]): what a run's
//! `hgp-settings.json` holds, or a file a person wrote, its options named exactly as the
//! command's flags without their dashes (`{"command": "error", "options": {"clients": 4,
//! "network": "fc"}}`), flat. The nested form the settings file writes (`"network":
//! {"network": "fc", …}`, a group of options in its own object) reads the same.
//!
//! A file is input like any other: a byte-order mark is skipped; an option the command does
//! not have, an option given twice (flat and in its group), a value of the wrong type, and an
//! option that is taken from the command line only (a program to run: `reproduce`'s
//! `mpirun`) are each one [`ConfigError`] naming the option.

use serde_json::{Map, Value};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::{ExperimentConfig, Tagged};

/// Why a config file is not an experiment's config.
#[derive(Clone, Debug, PartialEq)]
pub enum ConfigError {
    /// Not JSON.
    Syntax {
        /// The parser's message.
        message: String,
        /// Line of the error (1-based).
        line: usize,
        /// Column of the error (1-based).
        column: usize,
    },
    /// JSON, but not `{"command": …, "options": {…}}`.
    Shape(String),
    /// A `"command"` that is no experiment.
    UnknownCommand(String),
    /// An option the command does not have.
    UnknownOption {
        /// The command.
        command: &'static str,
        /// The option as written.
        option: String,
    },
    /// An option given twice: flat and in its group.
    Repeated {
        /// The option.
        option: String,
    },
    /// A value of the wrong type (or out of the option's choices).
    WrongType {
        /// The option.
        option: String,
        /// What it takes, in the parser's words.
        message: String,
    },
    /// An option that is never read from a file: it is given on the command line only.
    CommandLineOnly {
        /// The option.
        option: String,
    },
    /// A number that is not finite (NaN or infinite), which JSON cannot hold: written, it
    /// would read back as the option's default.
    NotFinite {
        /// The option, where it can be told.
        option: Option<String>,
    },
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Syntax {
                message,
                line,
                column,
            } => write!(f, "not JSON ({message} at line {line}, column {column})"),
            Self::Shape(why) => write!(
                f,
                "not the settings of an hgp experiment ({why}; a config is {{\"command\": …, \"options\": {{…}}}})"
            ),
            Self::UnknownCommand(c) => write!(
                f,
                "\"command\": {c:?} is not an hgp experiment (one of {})",
                ExperimentConfig::COMMANDS.join(", ")
            ),
            Self::UnknownOption { command, option } => write!(
                f,
                "{option:?} is not an option of `hgp {command}` (options are named as its flags without their dashes: see `hgp {command} --help`)"
            ),
            Self::Repeated { option } => write!(
                f,
                "{option:?} is given twice (on its own and in its group): give it once"
            ),
            Self::WrongType { option, message } => write!(f, "option {option:?}: {message}"),
            Self::NotFinite {
                option: Some(option),
            } => write!(
                f,
                "{option:?} is not a finite number: JSON cannot hold it (it would read back as the default)"
            ),
            Self::NotFinite { option: None } => write!(
                f,
                "a number of the config is not finite: JSON cannot hold it (it would read back as the default)"
            ),
            Self::CommandLineOnly { option } => write!(
                f,
                "{option:?} is not read from a config file: a program to run is given on the command line only (--{option})"
            ),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Options that a config file may not give: they name a program to run.
const COMMAND_LINE_ONLY: [(&str, &str); 1] = [("reproduce", "mpirun")];

impl ExperimentConfig {
    /// Reads a config from JSON (see the module's documentation for the form).
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming what is wrong and, for an option, which.
    pub fn from_json(text: &str) -> Result<Self, ConfigError> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let value: Value = serde_json::from_str(text).map_err(|e| ConfigError::Syntax {
            message: strip_position(&e.to_string()),
            line: e.line(),
            column: e.column(),
        })?;
        Self::from_value(value)
    }

    /// Reads a config from parsed JSON, as [`ExperimentConfig::from_json`] reads its text.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming what is wrong and, for an option, which.
    pub fn from_value(value: Value) -> Result<Self, ConfigError> {
        let Value::Object(mut top) = value else {
            return Err(ConfigError::Shape("not a JSON object".into()));
        };
        let command = match top.get("command") {
            Some(Value::String(c)) => c.clone(),
            Some(_) => return Err(ConfigError::Shape("\"command\" is not a name".into())),
            None => return Err(ConfigError::Shape("no \"command\"".into())),
        };
        let Some(defaults) = Self::defaults_of(&command) else {
            return Err(ConfigError::UnknownCommand(command));
        };
        let name = defaults.command();
        if let Some(other) = top.keys().find(|k| *k != "command" && *k != "options") {
            return Err(ConfigError::Shape(format!(
                "{other:?} beside \"command\" and \"options\""
            )));
        }
        let options = match top.remove("options") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(o)) => o,
            Some(_) => {
                return Err(ConfigError::Shape("\"options\" is not an object".into()));
            }
        };
        for (command, option) in COMMAND_LINE_ONLY {
            if command == name && options.contains_key(option) {
                return Err(ConfigError::CommandLineOnly {
                    option: option.into(),
                });
            }
        }
        let known = options_of(&defaults);
        let mut given = Map::new();
        normalize(&options, &known, &mut given, name)?;
        let read = |options: Map<String, Value>| {
            serde_json::from_value::<Tagged>(serde_json::json!({
                "command": name,
                "options": Value::Object(options),
            }))
        };
        match read(given.clone()) {
            Ok(config) => Ok(config.into()),
            Err(whole) => {
                // The option at fault: the first that fails alone among the defaults.
                for (path, value) in leaves(&given, &known) {
                    let mut one = known.clone();
                    set(&mut one, &path, value.clone());
                    if let Err(e) = read(one) {
                        return Err(ConfigError::WrongType {
                            option: path.last().cloned().unwrap_or_default(),
                            message: strip_position(&e.to_string()),
                        });
                    }
                }
                Err(ConfigError::Shape(strip_position(&whole.to_string())))
            }
        }
    }
}

impl Serialize for ExperimentConfig {
    /// The tagged form, once every number is known to survive JSON.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // serde_json writes a number that is not finite as null, which reads back as
        // something else (an option's default): refused, naming the option.
        if let Some(option) = not_finite(&format!("{self:?}")) {
            return Err(serde::ser::Error::custom(ConfigError::NotFinite { option }));
        }
        Tagged::from(self).serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for ExperimentConfig {
    /// As [`ExperimentConfig::from_value`] reads it (unknown options refused, naming them).
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Self::from_value(value).map_err(serde::de::Error::custom)
    }
}

/// Whether a config's `Debug` text holds a number that is not finite (`NaN`, `inf`, `-inf`
/// outside its strings), and the option it is the value of, where the text tells it (`eta:
/// Some(Value(NaN))` names `eta`), kebab-cased as its flag.
#[allow(clippy::option_option)]
fn not_finite(debug: &str) -> Option<Option<String>> {
    let chars: Vec<char> = debug.chars().collect();
    let (mut in_string, mut escaped) = (false, false);
    let mut last_name = None;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        if c == '"' {
            in_string = true;
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            if word == "NaN" || word == "inf" {
                return Some(last_name.map(|n: String| n.replace('_', "-")));
            }
            if chars.get(i) == Some(&':') {
                last_name = Some(word);
            }
            continue;
        }
        i += 1;
    }
    None
}

/// A serde_json message without its " at line L column C" (meaningless once the options
/// were moved into their groups).
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(at) => message[..at].to_string(),
        None => message.to_string(),
    }
}

/// The options of `config` as JSON (every one, at its value).
fn options_of(config: &ExperimentConfig) -> Map<String, Value> {
    match serde_json::to_value(config) {
        Ok(Value::Object(mut o)) => match o.remove("options") {
            Some(Value::Object(options)) => options,
            _ => Map::new(),
        },
        _ => Map::new(),
    }
}

/// Writes `given` (flat or nested) into `out` in the nested form of `known`: an option of a
/// group, given on its own, goes into its group's object; a group's own option of the same
/// name (`"network": "fc"`) too.
fn normalize(
    given: &Map<String, Value>,
    known: &Map<String, Value>,
    out: &mut Map<String, Value>,
    command: &'static str,
) -> Result<(), ConfigError> {
    for (key, value) in given {
        let path = match known.get(key) {
            Some(Value::Object(group)) => match value {
                Value::Object(inner) => {
                    let mut nested = match out.remove(key) {
                        Some(Value::Object(o)) => o,
                        _ => Map::new(),
                    };
                    normalize(inner, group, &mut nested, command)?;
                    out.insert(key.clone(), Value::Object(nested));
                    continue;
                }
                // The group's option of its own name (`--network` in the network group).
                _ if group.get(key).is_some_and(|v| !v.is_object()) => {
                    vec![key.clone(), key.clone()]
                }
                _ => {
                    return Err(ConfigError::WrongType {
                        option: key.clone(),
                        message: "a group of options, written as an object".into(),
                    });
                }
            },
            // A list written as the flag takes it, comma-separated (`"methods": "fedavg,decay"`).
            Some(Value::Array(_)) if value.is_string() => {
                let path = vec![key.clone()];
                if get(out, &path).is_some() {
                    return Err(ConfigError::Repeated {
                        option: key.clone(),
                    });
                }
                set(out, &path, comma_list(value.as_str().unwrap_or_default()));
                continue;
            }
            Some(_) => vec![key.clone()],
            None => match find(known, key) {
                Some(path) => path,
                None => {
                    return Err(ConfigError::UnknownOption {
                        command,
                        option: key.clone(),
                    });
                }
            },
        };
        if get(out, &path).is_some() {
            return Err(ConfigError::Repeated {
                option: key.clone(),
            });
        }
        set(out, &path, value.clone());
    }
    Ok(())
}

/// A comma-separated list as the command line writes it, as JSON: each entry a number where
/// it reads as one, else a name.
fn comma_list(text: &str) -> Value {
    Value::Array(
        text.split(',')
            .map(str::trim)
            .map(|v| {
                serde_json::from_str::<serde_json::Number>(v)
                    .map_or_else(|_| Value::String(v.into()), Value::Number)
            })
            .collect(),
    )
}

/// The path to the option `key` inside one of `known`'s groups, if exactly one has it.
fn find(known: &Map<String, Value>, key: &str) -> Option<Vec<String>> {
    let mut found = None;
    for (name, value) in known {
        if let Value::Object(group) = value {
            let inner = match group.get(key) {
                Some(v) if !v.is_object() => Some(vec![key.to_string()]),
                _ => find(group, key),
            };
            if let Some(mut inner) = inner {
                if found.is_some() {
                    return None;
                }
                inner.insert(0, name.clone());
                found = Some(inner);
            }
        }
    }
    found
}

/// The value at `path` in `map`.
fn get<'a>(map: &'a Map<String, Value>, path: &[String]) -> Option<&'a Value> {
    let (last, groups) = path.split_last()?;
    let mut at = map;
    for g in groups {
        at = at.get(g)?.as_object()?;
    }
    at.get(last)
}

/// Sets the value at `path` in `map`, creating the groups on the way.
fn set(map: &mut Map<String, Value>, path: &[String], value: Value) {
    let Some((last, groups)) = path.split_last() else {
        return;
    };
    let mut at = map;
    for g in groups {
        let entry = at
            .entry(g.clone())
            .or_insert_with(|| Value::Object(Map::new()));
        if !entry.is_object() {
            *entry = Value::Object(Map::new());
        }
        let Value::Object(inner) = entry else {
            return;
        };
        at = inner;
    }
    at.insert(last.clone(), value);
}

/// Every option of `given` (nested as `known`) with its path.
fn leaves<'a>(
    given: &'a Map<String, Value>,
    known: &Map<String, Value>,
) -> Vec<(Vec<String>, &'a Value)> {
    let mut all = Vec::new();
    for (key, value) in given {
        match (value, known.get(key)) {
            (Value::Object(inner), Some(Value::Object(group))) => {
                for (mut path, v) in leaves(inner, group) {
                    path.insert(0, key.clone());
                    all.push((path, v));
                }
            }
            _ => all.push((vec![key.clone()], value)),
        }
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<ExperimentConfig, ConfigError> {
        ExperimentConfig::from_json(text)
    }

    #[test]
    fn options_are_named_as_the_flags_flat_or_nested() {
        let flat = read(
            r#"{"command": "error", "options": {"clients": 4, "network": "fc", "rho-low": 0.5}}"#,
        )
        .unwrap();
        let nested = read(
            r#"{"command": "error", "options": {"data": {"clients": 4}, "network": {"network": "fc", "rho-low": 0.5}}}"#,
        )
        .unwrap();
        assert_eq!(flat, nested);
        let ExperimentConfig::Error(c) = &flat else {
            panic!("{flat:?}")
        };
        assert_eq!(c.data.clients, Some(4));
        assert_eq!(c.network.network, crate::setup::NetworkKind::Fc);
        // What a run's settings file holds reads back the same.
        let written = serde_json::to_string(&flat).unwrap();
        assert_eq!(read(&written).unwrap(), flat);
        // With a byte-order mark.
        assert_eq!(read(&format!("\u{feff}{written}")).unwrap(), flat);
        // Every command's defaults read back.
        for name in ExperimentConfig::COMMANDS {
            let d = ExperimentConfig::defaults_of(name).unwrap();
            assert_eq!(
                read(&serde_json::to_string(&d).unwrap()).unwrap(),
                d,
                "{name}"
            );
        }
    }

    #[test]
    fn a_wrong_option_is_named() {
        let e = read(r#"{"command": "error", "options": {"neuman-terms": 5}}"#).unwrap_err();
        assert!(
            matches!(&e, ConfigError::UnknownOption { option, .. } if option == "neuman-terms"),
            "{e}"
        );
        let e = read(r#"{"command": "error", "options": {"clients": 4, "data": {"clients": 5}}}"#)
            .unwrap_err();
        assert_eq!(
            e,
            ConfigError::Repeated {
                option: "clients".into()
            }
        );
        let e = read(r#"{"command": "error", "options": {"clients": "four"}}"#).unwrap_err();
        assert!(
            matches!(&e, ConfigError::WrongType { option, message } if option == "clients" && message.contains("expected")),
            "{e}"
        );
        let e = read(r#"{"command": "error", "options": {"network": "nowhere"}}"#).unwrap_err();
        assert!(
            matches!(&e, ConfigError::WrongType { option, .. } if option == "network"),
            "{e}"
        );
        let e = read(r#"{"command": "error", "options": {"quick": null}}"#).unwrap_err();
        assert!(
            matches!(&e, ConfigError::WrongType { option, .. } if option == "quick"),
            "{e}"
        );
        let e = read(r#"{"command": "reproduce", "options": {"mpirun": "sh -c 'rm -rf x'"}}"#)
            .unwrap_err();
        assert_eq!(
            e,
            ConfigError::CommandLineOnly {
                option: "mpirun".into()
            }
        );
        // A list as the flag writes it.
        let listed =
            read(r#"{"command": "fedhyper", "options": {"methods": "fedavg, decay"}}"#).unwrap();
        let array = read(r#"{"command": "fedhyper", "options": {"methods": ["fedavg", "decay"]}}"#)
            .unwrap();
        assert_eq!(listed, array);
        let e = read(r#"{"command": "erorr", "options": {}}"#).unwrap_err();
        assert!(matches!(e, ConfigError::UnknownCommand(_)), "{e}");
        let e = read("{\"command\": \"error\",\n \"options\": {").unwrap_err();
        assert!(matches!(e, ConfigError::Syntax { line: 2, .. }), "{e}");
        let e = read(r#"[1]"#).unwrap_err();
        assert!(matches!(e, ConfigError::Shape(_)), "{e}");
    }

    /// Read by serde, a config is as strict as `--config`: an option an experiment does not
    /// have is refused for every experiment (those whose options are grouped flat too).
    #[test]
    fn serde_refuses_unknown_options_for_every_experiment() {
        for (command, option) in [
            ("personalize", "outer_steps"),
            ("personalize", "bogus-option"),
            ("fbo", "neuman-terms"),
            ("fedhyper", "round"),
            ("error", "bogus-option"),
        ] {
            let text = format!(r#"{{"command": "{command}", "options": {{"{option}": 1}}}}"#);
            let e = serde_json::from_str::<ExperimentConfig>(&text).unwrap_err();
            assert!(e.to_string().contains(option), "{command}: {e}");
        }
        // A whole settings file reads as before.
        let d = ExperimentConfig::defaults_of("personalize").unwrap();
        let text = serde_json::to_string(&d).unwrap();
        assert_eq!(serde_json::from_str::<ExperimentConfig>(&text).unwrap(), d);
    }

    /// A number that is not finite is refused when written (JSON would hold `null`, which
    /// reads back as the default), naming its option.
    #[test]
    fn a_number_that_is_not_finite_is_not_written() {
        let error = crate::error::Config {
            eta: Some(crate::setup::EtaArg::Value(f64::NAN)),
            ..crate::error::Config::default()
        };
        let fbo = crate::fbo::Config {
            target: f64::INFINITY,
            ..crate::fbo::Config::default()
        };
        let fedhyper = crate::fedhyper::Config {
            lr: Some(f64::NEG_INFINITY),
            ..crate::fedhyper::Config::default()
        };
        for (config, option) in [
            (ExperimentConfig::from(error), "eta"),
            (ExperimentConfig::from(fbo), "target"),
            (ExperimentConfig::from(fedhyper), "lr"),
        ] {
            let e = serde_json::to_string(&config).unwrap_err().to_string();
            assert!(
                e.contains(&format!("{option:?} is not a finite number")),
                "{option}: {e}"
            );
        }
        assert_eq!(
            not_finite("Config { path: \"a NaN b\", eta: Some(Value(NaN)) }"),
            Some(Some("eta".into()))
        );
        assert_eq!(
            not_finite("Config { inner_lr: Some(-inf) }"),
            Some(Some("inner-lr".into()))
        );
        assert_eq!(
            not_finite("Config { dir: \"/data/NaN \\\" inf\", x: 1.0 }"),
            None
        );
        assert_eq!(
            not_finite("Config { information: 1.0, nan_like: 2.0 }"),
            None
        );
        // A mpirun launcher, never written, does not stop its config being written.
        let reproduce = crate::reproduce::Config {
            mpirun: Some("mpirun -n 2".into()),
            ..crate::reproduce::Config::default()
        };
        assert!(serde_json::to_string(&ExperimentConfig::from(reproduce)).is_ok());
    }
}
