//! One line that says what a method is, for logs and tables.

/// A method's one-line description ("HGP, M = 100, η = 0.5, full batches, with Push-Sum,
/// S = 10, over …"). Its own trait, not a method of the traits generic over the float type
/// or the client objective (`Averager<T>`, `InnerSolver<T, C>`, `HyperGradient<T, C>`,
/// `JointEstimator<T, C>`, which all require it): `hgp.describe()` needs no type annotations.
pub trait Describe {
    /// The description.
    fn describe(&self) -> String;
}

/// A number as a description shows it: as Rust writes it when that is short (0.5, 2, 1e-3
/// stays 0.001), else to four significant digits in scientific notation (2.000e-10, not
/// 0.00000000020000000000000021; 1.000e-300, not three hundred zeros).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Short(pub f64);

impl std::fmt::Display for Short {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let plain = self.0.to_string();
        if plain.len() <= 8 {
            f.write_str(&plain)
        } else {
            write!(f, "{:.3e}", self.0)
        }
    }
}

impl<D: Describe + ?Sized> Describe for Box<D> {
    fn describe(&self) -> String {
        (**self).describe()
    }
}

impl<D: Describe + ?Sized> Describe for &D {
    fn describe(&self) -> String {
        (**self).describe()
    }
}

impl<D: Describe + ?Sized> Describe for &mut D {
    fn describe(&self) -> String {
        (**self).describe()
    }
}

#[cfg(test)]
mod tests {
    use super::Short;

    #[test]
    fn numbers_in_descriptions_are_short() {
        for (x, shown) in [
            (0.5, "0.5"),
            (2.0, "2"),
            (1e-3, "0.001"),
            (0.1 + 0.2, "3.000e-1"),
            (1e-300, "1.000e-300"),
            (2e-10, "2.000e-10"),
            (123456789.0, "1.235e8"),
            (f64::INFINITY, "inf"),
        ] {
            assert_eq!(Short(x).to_string(), shown);
        }
    }
}
