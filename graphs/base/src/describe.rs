//! One line that says what a method is, for logs and tables.

/// A method's one-line description ("HGP, M = 100, η = 0.5, full batches, with Push-Sum,
/// S = 10, over …"). Its own trait, not a method of the traits generic over the float type
/// or the client objective (`Averager<T>`, `InnerSolver<T, C>`, `HyperGradient<T, C>`,
/// `JointEstimator<T, C>`, which all require it): `hgp.describe()` needs no type annotations.
pub trait Describe {
    /// The description.
    fn describe(&self) -> String;
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
