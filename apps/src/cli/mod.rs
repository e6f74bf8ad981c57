//! The flags of the `hgp` program, one group per concern (network, averager, inner solver,
//! estimator, data, run), each written into the library's config by its `apply`: a flag
//! given replaces the config's field, a flag left out keeps it (the experiment's default, or
//! the value of a `--config` file). Flags parse and describe; `Config::check` checks.

mod choice;
mod config;
mod data;
mod pipeline;

pub use choice::*;
pub use config::*;
pub use data::*;
pub use pipeline::*;

/// Comma-separated values, as `--help` shows a list default.
pub fn comma_list<T: std::fmt::Display>(values: &[T]) -> String {
    values
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Declares a flag group: a clap struct whose fields are the flags, and `apply`, which
/// writes the flags given into a config of the library. Each field says how: `set` (an
/// `Option<T>` flag for a field of type `T`), `some` (an `Option<T>` flag for an `Option<T>`
/// field), `on` (a switch for a `bool` field), `group` (a flattened group for a field that is
/// a group's config).
macro_rules! flags {
    (
        $(#[$meta:meta])*
        pub struct $name:ident => $config:ty {
            $(
                $(#[$fmeta:meta])*
                $field:ident: $ty:ty => $how:ident
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(clap::Args, Clone, Debug, Default)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        impl $name {
            /// Writes the flags given into `config` (those left out keep its values).
            pub fn apply(&self, config: &mut $config) {
                $( $crate::cli::flags!(@apply $how, config, self, $field); )*
            }
        }
    };
    (@apply set, $c:ident, $s:ident, $f:ident) => {
        if let Some(v) = &$s.$f {
            $c.$f = v.clone();
        }
    };
    (@apply some, $c:ident, $s:ident, $f:ident) => {
        if let Some(v) = &$s.$f {
            $c.$f = Some(v.clone());
        }
    };
    (@apply on, $c:ident, $s:ident, $f:ident) => {
        if $s.$f {
            $c.$f = true;
        }
    };
    (@apply group, $c:ident, $s:ident, $f:ident) => {
        $s.$f.apply(&mut $c.$f);
    };
}
pub(crate) use flags;

/// A help line ending in `[default: …]` printed from the constant the code falls back to, so
/// the help and the behaviour cannot disagree.
pub fn with_default(text: &str, default: impl std::fmt::Display) -> String {
    format!("{text} [default: {default}]")
}
