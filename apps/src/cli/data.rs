//! The flags of the image and text data, one group each, shared by every command that reads
//! images or text (`personalize`, `fbo`, `fedhyper`); each command's defaults are listed at
//! the end of its `--help`.

use std::path::PathBuf;

use hgp_experiments::setup::{Dataset, ImageData, TextData};

use super::{choice, flags};

flags! {
    /// Where the images (or the text) come from and how many are used.
    pub struct ImageFlags => ImageData {
        /// The data set: grey digits, letters or clothes (IDX), CIFAR-10 / CIFAR-100 in
        /// colour, or the text of Shakespeare's plays (one client per speaking character)
        /// [default: mnist].
        #[arg(long, value_parser = choice::<Dataset>())]
        dataset: Option<Dataset> => set,
        /// Directory with the data set's files: MNIST-format IDX files (MNIST, EMNIST,
        /// Fashion-MNIST; all pairs in it are pooled), the CIFAR binary files (or their folder
        /// or .tar.gz), LEAF's train/ and test/ folders of JSON files or the complete-works text
        /// file (or a folder holding it) for shakespeare [default: the embedded 10,000-digit
        /// MNIST subset].
        #[arg(long, value_name = "DIR")]
        data_dir: Option<PathBuf> => some,
        /// Images used: the first N of the data, before the test images are held out
        /// [default: listed at the end].
        #[arg(long, value_name = "N")]
        images: Option<usize> => some,
        /// Images held out as the test set (no client sees them); the rest is split between
        /// the clients. With text: test windows, evenly spaced among the clients' held-out
        /// lines [default: listed at the end].
        #[arg(long, value_name = "N")]
        test_images: Option<usize> => some,
        /// Clients the data are split over (with text: speaking characters drawn at random
        /// from those with enough windows) [default: listed at the end].
        #[arg(long, value_name = "N")]
        clients: Option<usize> => some,
    }
}

flags! {
    /// The windows of text.
    pub struct TextFlags => TextData {
        /// Symbols per window with --dataset shakespeare (the LSTM reads them and predicts the
        /// next one); LEAF's files hold windows of 80, which a smaller N cuts to their last N
        /// [default: listed at the end].
        #[arg(long, value_name = "N")]
        seq: Option<usize> => some,
    }
}
