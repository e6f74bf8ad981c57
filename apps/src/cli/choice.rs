//! A flag that takes one of the library's named values ([`Choice`]): parsed, listed in the
//! help with each value's description, and refused with the values it takes.

use std::ffi::OsStr;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use hgp_experiments::setup::Choice;

/// The parser of a flag that takes the values `offered` of `E`.
#[derive(Clone, Copy, Debug)]
pub struct ChoiceParser<E: 'static>(&'static [E]);

/// The parser of a flag that takes any value of `E`.
pub fn choice<E: Choice>() -> ChoiceParser<E> {
    ChoiceParser(E::variants())
}

/// The parser of a flag that takes the values `offered` of `E` (the others are the
/// library's own).
pub fn choice_of<E: Choice>(offered: &'static [E]) -> ChoiceParser<E> {
    ChoiceParser(offered)
}

impl<E: Choice> ChoiceParser<E> {
    fn possible(&self) -> Vec<PossibleValue> {
        self.0
            .iter()
            .map(|e| {
                let words = e
                    .description()
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ");
                // As clap shows a value's doc comment: without its closing full stop.
                let help = words.strip_suffix('.').unwrap_or(&words).to_string();
                PossibleValue::new(e.choice_name()).help(help)
            })
            .collect()
    }
}

impl<E: Choice> TypedValueParser for ChoiceParser<E> {
    type Value = E;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<E, clap::Error> {
        let name = PossibleValuesParser::new(self.possible()).parse_ref(cmd, arg, value)?;
        Ok(*self
            .0
            .iter()
            .find(|e| e.choice_name() == name)
            .expect("the parser accepts only listed names"))
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(self.possible().into_iter()))
    }
}
