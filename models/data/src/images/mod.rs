//! Image classification data: IDX loading (grey digits), the CIFAR-10/100 binary
//! distributions (colour), and client splits.
//!
//! - [`ImageSet`] holds images (pixels scaled to [0, 1]) with integer labels.
//! - [`parse_idx_images`], [`parse_idx_labels`], [`load_idx_pair`] and [`load_idx_dir`] read
//!   the IDX format of the MNIST, Fashion-MNIST and EMNIST distributions, raw or gzipped;
//!   [`load_cifar_dir`] the CIFAR-10 and CIFAR-100 binary files, extracted or in their
//!   `.tar.gz`.
//! - [`embedded_mnist`] returns a 10,000-digit MNIST subset compiled into the crate, so
//!   experiments and tests run without any download.
//! - [`heterogeneous_split`] distributes a set between clients the way the HGP paper
//!   (Terashita & Hara, NeurIPS 2023, App. A.3, after Marfoq et al., 2021) does: clusters of
//!   clients with their own pixel normalization, and Dirichlet label proportions.
//! - [`hold_out`] and [`federated_split`] give the splits of paper 003 (Xiao & Ji, ICML 2023)
//!   and FedNest: held-out test images, then equal iid parts or label shards per client.
//! - [`label_split`] gives the splits of paper 001 (FedHyper): equal iid parts, or parts with
//!   Dirichlet(α) label proportions per client.
//! - [`dirichlet_split`] and [`pachinko_split`] give paper 004's splits of CIFAR-10 (each
//!   label over the clients in Dirichlet(0.4) proportions) and CIFAR-100 (two-stage Pachinko
//!   allocation over coarse, then fine labels).
//!
//! ```
//! use hgp_data::images::{SplitConfig, embedded_mnist, heterogeneous_split};
//!
//! let mnist = embedded_mnist()?;
//! assert_eq!((mnist.len(), mnist.rows, mnist.cols), (10_000, 28, 28));
//! let config = SplitConfig { clients: 6, ..SplitConfig::default() };
//! let clients = heterogeneous_split(&mnist, &config, 7)?;
//! let total: usize = clients.iter().map(|c| c.train.len() + c.val.len() + c.test.len()).sum();
//! assert_eq!(total, 10_000);
//! # Ok::<(), hgp_data::images::DataError>(())
//! ```

mod cifar;
mod federated;
mod idx;
mod label_split;
mod pachinko;
mod split;

pub use crate::DataError;
pub use cifar::{CIFAR_CHANNELS, CIFAR_SIDE, CifarKind, CifarSet, load_cifar_dir, parse_cifar};
pub use federated::{FedClient, FedSplit, federated_split, hold_out};
pub use idx::{
    EmnistSplit, IdxFamily, load_idx_dir, load_idx_dir_family, load_idx_dir_halves, load_idx_pair,
    parse_idx_images, parse_idx_labels,
};
pub use label_split::{LabelSplit, label_split};
pub use pachinko::{PachinkoConfig, pachinko_split};
pub use split::{ImageClient, SplitConfig, dirichlet_split, heterogeneous_split};

#[cfg(feature = "gzip")]
/// The embedded MNIST subset's images (see `data/mnist10k/PROVENANCE.md`).
static MNIST_IMAGES: &[u8] = include_bytes!("../../mnist10k/images-idx3-ubyte.gz");
#[cfg(feature = "gzip")]
/// The embedded MNIST subset's labels.
static MNIST_LABELS: &[u8] = include_bytes!("../../mnist10k/labels-idx1-ubyte.gz");

/// Images (grey, or colour with several channels) with integer labels.
///
/// Image k occupies `images[k·p .. (k+1)·p]` with p = rows·cols·channels, row-major and
/// channels-last: the value of channel ch at (r, c) is at `(r·cols + c)·channels + ch` of the
/// image. Loaders store value/255 in [0, 1]; [`heterogeneous_split`] normalizes grey images
/// per cluster. The fields are public; [`ImageSet::new`] (grey) and
/// [`ImageSet::with_channels`] build a set after checking that they agree.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageSet {
    /// Values of all images, image after image, each row-major and channels-last.
    pub images: Vec<f32>,
    /// One label per image.
    pub labels: Vec<u8>,
    /// Rows of every image.
    pub rows: usize,
    /// Columns of every image.
    pub cols: usize,
    /// Channels of every pixel: 1 for grey images, 3 for RGB.
    pub channels: usize,
}

impl Default for ImageSet {
    /// An empty set of grey images of size 0 × 0.
    fn default() -> Self {
        Self {
            images: Vec::new(),
            labels: Vec::new(),
            rows: 0,
            cols: 0,
            channels: 1,
        }
    }
}

impl ImageSet {
    /// A set of grey images from its fields.
    ///
    /// # Errors
    ///
    /// [`DataError::Shape`] unless `images.len() == labels.len() · rows · cols`.
    pub fn new(
        images: Vec<f32>,
        labels: Vec<u8>,
        rows: usize,
        cols: usize,
    ) -> Result<Self, DataError> {
        Self::with_channels(images, labels, rows, cols, 1)
    }

    /// A set of images with `channels` values per pixel (channels-last).
    ///
    /// # Errors
    ///
    /// [`DataError::Shape`] unless `images.len() == labels.len() · rows · cols · channels`
    /// and `channels ≥ 1`.
    pub fn with_channels(
        images: Vec<f32>,
        labels: Vec<u8>,
        rows: usize,
        cols: usize,
        channels: usize,
    ) -> Result<Self, DataError> {
        let set = Self {
            images,
            labels,
            rows,
            cols,
            channels,
        };
        set.check_shape("image set")?;
        Ok(set)
    }

    /// Number of images.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Whether the set holds no image.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// Values per image (`rows · cols · channels`; the pixels of a grey image).
    pub fn pixels(&self) -> usize {
        self.rows * self.cols * self.channels
    }

    /// The values of image `k`, row-major and channels-last.
    ///
    /// # Panics
    ///
    /// If `k >= self.len()` (or the fields are inconsistent), like slice indexing.
    pub fn image(&self, k: usize) -> &[f32] {
        let p = self.pixels();
        &self.images[k * p..(k + 1) * p]
    }

    /// The images at `indices`, in that order (an index may repeat).
    ///
    /// # Panics
    ///
    /// If an index is out of range, like slice indexing.
    pub fn subset(&self, indices: &[usize]) -> ImageSet {
        let mut images = Vec::with_capacity(indices.len() * self.pixels());
        for &k in indices {
            images.extend_from_slice(self.image(k));
        }
        ImageSet {
            images,
            labels: indices.iter().map(|&k| self.labels[k]).collect(),
            rows: self.rows,
            cols: self.cols,
            channels: self.channels,
        }
    }

    /// The sets one after the other.
    ///
    /// # Errors
    ///
    /// [`DataError::Empty`] if `sets` is empty, [`DataError::Shape`] if a set's fields are
    /// inconsistent or its image size differs from the first set's.
    pub fn concat(sets: &[ImageSet]) -> Result<ImageSet, DataError> {
        let first = sets.first().ok_or(DataError::Empty {
            what: "list of image sets to concatenate",
        })?;
        for (i, set) in sets.iter().enumerate() {
            set.check_shape(&format!("image set {i} of the concatenation"))?;
            set.check_same_size(first, i)?;
        }
        let mut out = ImageSet {
            images: Vec::with_capacity(sets.iter().map(|s| s.images.len()).sum()),
            labels: Vec::with_capacity(sets.iter().map(ImageSet::len).sum()),
            rows: first.rows,
            cols: first.cols,
            channels: first.channels,
        };
        for set in sets {
            out.images.extend_from_slice(&set.images);
            out.labels.extend_from_slice(&set.labels);
        }
        Ok(out)
    }

    /// The images whose label satisfies `keep`, in their original order.
    pub fn filter_labels(&self, keep: impl Fn(u8) -> bool) -> ImageSet {
        let indices: Vec<usize> = (0..self.len()).filter(|&k| keep(self.labels[k])).collect();
        self.subset(&indices)
    }

    /// Number of classes: the largest label + 1 (0 for an empty set).
    pub fn classes(&self) -> usize {
        self.labels.iter().max().map_or(0, |&m| usize::from(m) + 1)
    }

    /// How many images carry each label `0..self.classes()`.
    pub fn label_counts(&self) -> Vec<usize> {
        let mut counts = vec![0; self.classes()];
        for &l in &self.labels {
            counts[usize::from(l)] += 1;
        }
        counts
    }

    /// Checks `images.len() == len · rows · cols · channels` (and at least one channel);
    /// `what` names the set in the error.
    fn check_shape(&self, what: &str) -> Result<(), DataError> {
        let expected = self
            .len()
            .checked_mul(self.rows)
            .and_then(|n| n.checked_mul(self.cols))
            .and_then(|n| n.checked_mul(self.channels));
        if self.channels >= 1 && expected == Some(self.images.len()) {
            Ok(())
        } else {
            Err(DataError::Shape {
                what: what.to_owned(),
                detail: format!(
                    "{} {} values for {} images of {}",
                    self.images.len(),
                    if self.channels == 1 {
                        "pixel"
                    } else {
                        "channel"
                    },
                    self.len(),
                    self.size_words()
                ),
            })
        }
    }

    /// `rows × cols`, with `× channels` for colour images.
    fn size_words(&self) -> String {
        match self.channels {
            1 => format!("{} × {}", self.rows, self.cols),
            c => format!("{} × {} × {c} channels", self.rows, self.cols),
        }
    }

    /// The mean and standard deviation of each channel over every pixel of every image (in
    /// f64), e.g. for the per-channel standardization of colour images.
    pub fn channel_stats(&self) -> Vec<(f64, f64)> {
        let ch = self.channels.max(1);
        let mut sum = vec![0.0f64; ch];
        let mut squares = vec![0.0f64; ch];
        for px in self.images.chunks_exact(ch) {
            for ((s, q), &v) in sum.iter_mut().zip(&mut squares).zip(px) {
                *s += f64::from(v);
                *q += f64::from(v) * f64::from(v);
            }
        }
        let count = (self.images.len() / ch).max(1) as f64;
        sum.iter()
            .zip(&squares)
            .map(|(s, q)| {
                let mean = s / count;
                (mean, (q / count - mean * mean).max(0.0).sqrt())
            })
            .collect()
    }

    /// Standardizes every value of channel ch to (v − mean_ch) / std_ch (a standard deviation
    /// below 1e-6 counts as 1e-6, so a constant channel stays finite).
    ///
    /// # Panics
    ///
    /// If `stats` does not have one entry per channel.
    pub fn standardize_channels(&mut self, stats: &[(f64, f64)]) {
        assert_eq!(stats.len(), self.channels, "one (mean, std) per channel");
        for px in self.images.chunks_exact_mut(self.channels) {
            for (v, &(mean, std)) in px.iter_mut().zip(stats) {
                *v = ((f64::from(*v) - mean) / std.max(1e-6)) as f32;
            }
        }
    }

    /// Checks that `self` (set `index` of a concatenation) has `first`'s image size.
    fn check_same_size(&self, first: &ImageSet, index: usize) -> Result<(), DataError> {
        if (self.rows, self.cols, self.channels) == (first.rows, first.cols, first.channels) {
            Ok(())
        } else {
            Err(DataError::Shape {
                what: format!("image set {index} of the concatenation"),
                detail: format!(
                    "images are {}, but the first set's are {}",
                    self.size_words(),
                    first.size_words()
                ),
            })
        }
    }
}

#[cfg(feature = "gzip")]
/// The 10,000-digit MNIST subset embedded in the crate: 28 × 28 images, pixels in [0, 1],
/// labels 0–9 (provenance in `data/mnist10k/PROVENANCE.md` of the crate).
///
/// # Errors
///
/// None in practice: the embedded files are checked by the tests; the parser's errors are
/// passed on rather than hidden.
pub fn embedded_mnist() -> Result<ImageSet, DataError> {
    idx::image_set_from_bytes(
        MNIST_IMAGES,
        "embedded images-idx3-ubyte.gz",
        MNIST_LABELS,
        "embedded labels-idx1-ubyte.gz",
        idx::IdxFamily::Mnist,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> ImageSet {
        // Three 1 × 2 images with labels 2, 0, 2.
        ImageSet::new(vec![0.0, 0.1, 0.2, 0.3, 0.4, 0.5], vec![2, 0, 2], 1, 2).unwrap()
    }

    #[test]
    fn accessors() {
        let set = tiny();
        assert_eq!((set.len(), set.pixels(), set.classes()), (3, 2, 3));
        assert!(!set.is_empty());
        assert_eq!(set.image(1), &[0.2, 0.3]);
        assert_eq!(set.label_counts(), vec![1, 0, 2]);
        let sub = set.subset(&[2, 0]);
        assert_eq!(sub.images, vec![0.4, 0.5, 0.0, 0.1]);
        assert_eq!(sub.labels, vec![2, 2]);
        let kept = set.filter_labels(|l| l == 0);
        assert_eq!((kept.images, kept.labels), (vec![0.2, 0.3], vec![0]));
        let empty = ImageSet::default();
        assert_eq!((empty.classes(), empty.label_counts()), (0, vec![]));
    }

    #[test]
    fn new_rejects_inconsistent_fields() {
        let err = ImageSet::new(vec![0.0; 5], vec![1, 2], 1, 2).unwrap_err();
        assert!(
            err.to_string().contains("5 pixel values for 2 images"),
            "{err}"
        );
    }

    #[test]
    fn concat_requires_equal_sizes() {
        let set = tiny();
        let both = ImageSet::concat(&[set.clone(), set.subset(&[1])]).unwrap();
        assert_eq!(both.len(), 4);
        assert_eq!(both.image(3), &[0.2, 0.3]);
        let other = ImageSet::new(vec![0.0; 2], vec![1], 2, 1).unwrap();
        let err = ImageSet::concat(&[set, other]).unwrap_err();
        assert!(
            err.to_string().contains("are 2 × 1, but the first"),
            "{err}"
        );
        let err = ImageSet::concat(&[]).unwrap_err();
        assert!(matches!(err, DataError::Empty { .. }), "{err}");
    }

    #[test]
    fn embedded_mnist_is_complete() {
        let set = embedded_mnist().unwrap();
        assert_eq!((set.len(), set.rows, set.cols), (10_000, 28, 28));
        assert_eq!(set.images.len(), 10_000 * 784);
        assert_eq!(set.classes(), 10);
        assert!(
            set.label_counts().iter().all(|&c| c > 500),
            "{:?}",
            set.label_counts()
        );
        assert!(set.images.iter().all(|p| (0.0..=1.0).contains(p)));
        // Real digits: mostly background, some ink, both extremes present.
        let ink = set.images.iter().filter(|&&p| p > 0.5).count() as f64;
        assert!((0.05..0.3).contains(&(ink / set.images.len() as f64)));
        assert!(set.images.contains(&0.0) && set.images.contains(&1.0));
    }
}
