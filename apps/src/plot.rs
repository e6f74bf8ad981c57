//! A small SVG writer for scientific figures.
//!
//! A [`Figure`] is a row of [`Panel`]s drawn side by side. Each panel has its
//! own axes (linear or base-10 logarithmic, see [`Scale`]), a title, axis
//! labels, light grid lines at the major ticks, a legend and any number of
//! [`Series`]: polylines, scatter markers and optional shaded bands (for
//! instance the 10–90 % percentiles around a median curve). A panel may also
//! carry a dashed reference line such as `y = x`.
//!
//! The output is a standalone SVG 1.1 document that needs no external
//! resources. Rendering never panics: non-finite coordinates and non-positive
//! values on a logarithmic axis are skipped (lines break at such points),
//! degenerate ranges are widened, and a panel without data still shows its
//! axes together with the message "no data".
//!
//! ```ignore
//! let curve: Vec<(f64, f64)> = (0..=100).map(|i| (i as f64, 0.9f64.powi(i))).collect();
//! let panel = Panel::new("Convergence", "iteration", "error")
//!     .with_scales(Scale::Linear, Scale::Log10)
//!     .with_series(Series::line("gradient descent", curve));
//! Figure::new().with_title("Example").with_panel(panel).write(path)?;
//! ```

#![allow(dead_code)]

use std::fmt::Write as _;
use std::path::Path;

/// Width of one panel in pixels.
const PANEL_W: f64 = 480.0;
/// Height of one panel in pixels.
const PANEL_H: f64 = 360.0;
/// Extra height above the panels when the figure has a title.
const FIG_TITLE_H: f64 = 30.0;
/// Space above the plot area of a panel (holds the panel title).
const MARGIN_TOP: f64 = 34.0;
/// Space below the plot area of a panel (tick labels and the x label).
const MARGIN_BOTTOM: f64 = 54.0;
/// Minimal space right of the plot area.
const MARGIN_RIGHT: f64 = 18.0;
/// Font size of tick labels and legend entries.
const TICK_FONT: f64 = 12.0;
/// Font size of axis labels.
const LABEL_FONT: f64 = 13.0;
/// Font size of panel titles.
const TITLE_FONT: f64 = 14.0;
/// Font size of the figure title.
const FIG_TITLE_FONT: f64 = 16.0;
/// Length of major tick marks.
const TICK_LEN: f64 = 5.0;
/// Font stack used for all text.
const FONT_FAMILY: &str = "Helvetica, Arial, 'DejaVu Sans', 'Liberation Sans', sans-serif";
/// Colour of grid lines.
const GRID_COLOUR: &str = "#e3e3e3";
/// Colour of the axis frame, tick marks and text.
const INK: &str = "#222222";
/// Colour of the reference line.
const REFERENCE_COLOUR: &str = "#7a7a7a";
/// Longest series name shown in a legend, in characters.
const MAX_LEGEND_NAME: usize = 40;

/// Qualitative colour palette (Tableau 10), cycled per series.
pub const PALETTE: [&str; 10] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];

/// How data values are mapped onto an axis.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Scale {
    /// Values are placed proportionally to their magnitude.
    #[default]
    Linear,
    /// Values are placed proportionally to their base-10 logarithm;
    /// non-positive values cannot be shown and are skipped.
    Log10,
}

/// The symbol drawn at each data point of a series.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Marker {
    /// No symbol (a pure line series).
    #[default]
    None,
    /// A filled circle of radius 3 px (a scatter series).
    Circle,
}

/// One named data series of a [`Panel`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Series {
    /// Name shown in the legend.
    pub name: String,
    /// Data points `(x, y)`, drawn in the given order.
    pub points: Vec<(f64, f64)>,
    /// Symbol drawn at each point.
    pub marker: Marker,
    /// Whether consecutive points are joined by a line.
    pub line: bool,
    /// Optional shaded band given as `(x, lo, hi)` triples in drawing order,
    /// e.g. the 10–90 % percentiles around the series.
    pub band: Option<Vec<(f64, f64, f64)>>,
}

impl Series {
    /// A line series without markers.
    pub fn line(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Self {
            name: name.into(),
            points,
            marker: Marker::None,
            line: true,
            band: None,
        }
    }

    /// A scatter series: circle markers, no connecting line.
    pub fn scatter(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Self {
            name: name.into(),
            points,
            marker: Marker::Circle,
            line: false,
            band: None,
        }
    }

    /// Adds a shaded band of `(x, lo, hi)` triples drawn behind the series.
    pub fn with_band(mut self, band: Vec<(f64, f64, f64)>) -> Self {
        self.band = Some(band);
        self
    }
}

/// One set of axes with its series.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Panel {
    /// Title drawn above the plot area.
    pub title: String,
    /// Label of the horizontal axis.
    pub x_label: String,
    /// Label of the vertical axis.
    pub y_label: String,
    /// Scale of the horizontal axis.
    pub x_scale: Scale,
    /// Scale of the vertical axis.
    pub y_scale: Scale,
    /// Series drawn in order; colours cycle through [`PALETTE`].
    pub series: Vec<Series>,
    /// Optional reference line through two points, e.g. `((0, 0), (1, 1))`
    /// for `y = x`. It is drawn dashed across the whole plot area and does
    /// not widen the data range.
    pub reference_line: Option<((f64, f64), (f64, f64))>,
}

impl Panel {
    /// An empty panel with linear axes.
    pub fn new(
        title: impl Into<String>,
        x_label: impl Into<String>,
        y_label: impl Into<String>,
    ) -> Self {
        Self {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            ..Self::default()
        }
    }

    /// Sets the scales of the horizontal and vertical axes.
    pub fn with_scales(mut self, x_scale: Scale, y_scale: Scale) -> Self {
        self.x_scale = x_scale;
        self.y_scale = y_scale;
        self
    }

    /// Appends a series.
    pub fn with_series(mut self, series: Series) -> Self {
        self.series.push(series);
        self
    }

    /// Sets the reference line through the points `a` and `b`.
    pub fn with_reference_line(mut self, a: (f64, f64), b: (f64, f64)) -> Self {
        self.reference_line = Some((a, b));
        self
    }
}

/// A figure: an optional title above a row of panels.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Figure {
    /// Optional title drawn above all panels.
    pub title: Option<String>,
    /// Panels laid out side by side in one row, each about 480 × 360 px.
    pub panels: Vec<Panel>,
}

impl Figure {
    /// An empty figure without title.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the figure title.
    pub fn with_title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// Appends a panel to the right of the existing ones.
    pub fn with_panel(mut self, panel: Panel) -> Self {
        self.panels.push(panel);
        self
    }

    /// Renders the figure as a standalone SVG 1.1 document.
    pub fn to_svg(&self) -> String {
        let columns = self.panels.len().max(1);
        let width = PANEL_W * columns as f64;
        let title_h = if self.title.is_some() {
            FIG_TITLE_H
        } else {
            0.0
        };
        let height = PANEL_H + title_h;
        let mut out = String::with_capacity(16 * 1024);
        let _ = writeln!(
            out,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"{w}\" \
             height=\"{h}\" viewBox=\"0 0 {w} {h}\" font-family=\"{FONT_FAMILY}\" \
             font-size=\"{TICK_FONT}\" fill=\"{INK}\">",
            w = num(width),
            h = num(height),
        );
        if let Some(title) = &self.title {
            let _ = writeln!(out, "<title>{}</title>", escape(title));
        }
        let _ = writeln!(
            out,
            "<rect x=\"0\" y=\"0\" width=\"{}\" height=\"{}\" fill=\"#ffffff\"/>",
            num(width),
            num(height)
        );
        if let Some(title) = &self.title {
            let _ = writeln!(
                out,
                "<text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"{FIG_TITLE_FONT}\" \
                 font-weight=\"bold\">{}</text>",
                num(width / 2.0),
                escape(title)
            );
        }
        if self.panels.is_empty() {
            let _ = writeln!(
                out,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"{TITLE_FONT}\" \
                 fill=\"#888888\">no data</text>",
                num(width / 2.0),
                num(title_h + PANEL_H / 2.0)
            );
        }
        for (i, panel) in self.panels.iter().enumerate() {
            render_panel(&mut out, panel, i, PANEL_W * i as f64, title_h);
        }
        out.push_str("</svg>\n");
        out
    }

    /// Writes the SVG document to `path`, creating missing parent
    /// directories.
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        if let Some(parent) = path.parent()
            && !parent.as_os_str().is_empty()
        {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, self.to_svg())
    }
}

// ---------------------------------------------------------------------------
// Scales and axes
// ---------------------------------------------------------------------------

impl Scale {
    /// Whether `v` can be placed on an axis of this scale.
    fn accepts(self, v: f64) -> bool {
        v.is_finite()
            && match self {
                Scale::Linear => true,
                Scale::Log10 => v > 0.0,
            }
    }

    /// Data value to axis coordinate ("t-space").
    fn coord(self, v: f64) -> f64 {
        match self {
            Scale::Linear => v,
            Scale::Log10 => v.log10(),
        }
    }

    /// Axis coordinate back to a finite data value.
    fn value(self, t: f64) -> f64 {
        let v = match self {
            Scale::Linear => t,
            Scale::Log10 => 10f64.powf(t),
        };
        v.clamp(-f64::MAX, f64::MAX)
    }
}

/// A major tick: position in t-space and its label (possibly empty).
#[derive(Clone, Debug, PartialEq)]
struct Tick {
    t: f64,
    label: String,
}

/// A finished axis: its range in t-space and its ticks.
#[derive(Clone, Debug)]
struct Axis {
    scale: Scale,
    t_lo: f64,
    t_hi: f64,
    ticks: Vec<Tick>,
    /// Positions of unlabelled minor tick marks in t-space.
    minor: Vec<f64>,
}

impl Axis {
    /// Builds an axis over the t-space range `[t_lo, t_hi]` (with
    /// `t_lo < t_hi`, both finite) aiming at about `target` labels.
    fn new(scale: Scale, t_lo: f64, t_hi: f64, target: usize) -> Self {
        let (ticks, minor) = match scale {
            Scale::Linear => (linear_ticks(t_lo, t_hi, target), Vec::new()),
            Scale::Log10 => log_ticks(t_lo, t_hi, target + 1),
        };
        Self {
            scale,
            t_lo,
            t_hi,
            ticks,
            minor,
        }
    }

    /// Relative position of the t-space coordinate `t` (0 at the low end,
    /// 1 at the high end).
    fn frac_t(&self, t: f64) -> f64 {
        let half = self.t_hi * 0.5 - self.t_lo * 0.5;
        let f = (t * 0.5 - self.t_lo * 0.5) / half;
        if f.is_finite() {
            f.clamp(-100.0, 100.0)
        } else {
            0.0
        }
    }

    /// Relative position of the data value `v`, if it can be shown.
    fn frac(&self, v: f64) -> Option<f64> {
        self.scale
            .accepts(v)
            .then(|| self.frac_t(self.scale.coord(v)))
    }

    /// Data range of the axis.
    fn data_range(&self) -> (f64, f64) {
        (self.scale.value(self.t_lo), self.scale.value(self.t_hi))
    }

    /// Widest tick label in pixels.
    fn max_label_width(&self) -> f64 {
        self.ticks
            .iter()
            .map(|t| text_width(&t.label, TICK_FONT))
            .fold(0.0, f64::max)
    }
}

/// Padded t-space range of an axis showing `values` (data values that the
/// scale accepts). Always returns finite bounds with `lo < hi`.
fn axis_extent(scale: Scale, values: &[f64]) -> (f64, f64) {
    let mut lo = f64::INFINITY;
    let mut hi = f64::NEG_INFINITY;
    for &v in values {
        if scale.accepts(v) {
            let t = scale.coord(v);
            lo = lo.min(t);
            hi = hi.max(t);
        }
    }
    if lo > hi {
        // Nothing to show: a unit range (0..1, or 1..10 on a log axis).
        return (0.0, 1.0);
    }
    let (lo, hi) = widen(scale, lo, hi);
    let pad = (hi * 0.5 - lo * 0.5) * 0.1;
    let lo = (lo - pad).max(-f64::MAX);
    let hi = (hi + pad).min(f64::MAX);
    (lo, hi)
}

/// Widens a degenerate t-space range (all values equal, or equal up to
/// rounding) to a sensible one.
fn widen(scale: Scale, lo: f64, hi: f64) -> (f64, f64) {
    let mag = lo.abs().max(hi.abs());
    let half = hi * 0.5 - lo * 0.5;
    if half > mag * 1e-10 && half > 1e-300 {
        return (lo, hi);
    }
    match scale {
        // One decade on either side.
        Scale::Log10 => (lo - 1.0, hi + 1.0),
        Scale::Linear if mag < 1e-300 => (lo - 1.0, hi + 1.0),
        Scale::Linear => {
            let d = mag * 0.1;
            ((lo - d).max(-f64::MAX), (hi + d).min(f64::MAX))
        }
    }
}

/// `10^e` rounded correctly.
fn pow10(e: i32) -> f64 {
    format!("1e{e}").parse().unwrap_or(f64::NAN)
}

/// `m * 10^e` rounded correctly (for integer-valued `m`).
fn scaled(m: f64, e: i32) -> f64 {
    if e >= 0 {
        m * pow10(e)
    } else if e >= -22 {
        // Powers of ten up to 1e22 are exact, so the division rounds once.
        m / pow10(-e)
    } else {
        m * pow10(e)
    }
}

/// "Nice" ticks (steps 1, 2 or 5 times a power of ten) within `[lo, hi]`,
/// with a count close to `target`.
fn linear_ticks(lo: f64, hi: f64, target: usize) -> Vec<Tick> {
    let target = target.max(2) as f64;
    if !(lo.is_finite() && hi.is_finite() && lo < hi) {
        return vec![Tick {
            t: if lo.is_finite() { lo } else { 0.0 },
            label: format_general(if lo.is_finite() { lo } else { 0.0 }),
        }];
    }
    let raw = (hi * 0.5 - lo * 0.5) / (target * 0.5);
    let e0 = raw.log10().floor();
    if !e0.is_finite() {
        return endpoint_ticks(lo, hi);
    }
    let e0 = e0 as i32;
    // (score, multiplier, exponent, first index, last index)
    let mut best: Option<(f64, f64, i32, f64, f64)> = None;
    for e in e0 - 1..=e0 + 1 {
        for m in [1.0, 2.0, 5.0] {
            let step = scaled(m, e);
            if !(step.is_finite() && step > 0.0) {
                continue;
            }
            let k0 = (lo / step - 1e-9).ceil();
            let k1 = (hi / step + 1e-9).floor();
            let count = k1 - k0 + 1.0;
            if !count.is_finite() || !(2.0..=60.0).contains(&count) {
                continue;
            }
            let score = (count - target).abs();
            // Candidates come in increasing step order: ties go to the
            // coarser step.
            if best.is_none_or(|b| score <= b.0) {
                best = Some((score, m, e, k0, k1));
            }
        }
    }
    let Some((_, m, e, k0, k1)) = best else {
        return endpoint_ticks(lo, hi);
    };
    let step = scaled(m, e);
    let values: Vec<f64> = (0..=(k1 - k0) as usize)
        .map(|i| {
            let v = scaled((k0 + i as f64) * m, e);
            if v.abs() < step * 1e-6 { 0.0 } else { v }
        })
        .filter(|v| v.is_finite())
        .collect();
    let labels = format_linear(&values, e);
    values
        .into_iter()
        .zip(labels)
        .map(|(t, label)| Tick { t, label })
        .collect()
}

/// Two ticks at the ends of a range whose nice ticks cannot be computed.
fn endpoint_ticks(lo: f64, hi: f64) -> Vec<Tick> {
    [lo, hi]
        .into_iter()
        .map(|t| Tick {
            t,
            label: format_general(t),
        })
        .collect()
}

/// Labels for linear ticks whose step is a multiple of `10^e`.
fn format_linear(values: &[f64], e: i32) -> Vec<String> {
    let max_abs = values.iter().map(|v| v.abs()).fold(0.0, f64::max);
    let em = if max_abs > 0.0 {
        max_abs.log10().floor() as i32
    } else {
        e
    };
    if max_abs > 0.0 && !(-3..6).contains(&em) {
        let decimals = (em - e).clamp(0, 15) as usize;
        values
            .iter()
            .map(|&v| {
                if v == 0.0 {
                    "0".to_owned()
                } else {
                    with_minus(trim_exponential(&format!("{v:.decimals$e}")))
                }
            })
            .collect()
    } else {
        let decimals = (-e).clamp(0, 15) as usize;
        values
            .iter()
            .map(|&v| {
                let v = if v == 0.0 { 0.0 } else { v };
                with_minus(format!("{v:.decimals$}"))
            })
            .collect()
    }
}

/// Removes trailing zeros from the mantissa of Rust's exponential format
/// (`"1.50e6"` becomes `"1.5e6"`, `"2.00e-7"` becomes `"2e-7"`).
fn trim_exponential(s: &str) -> String {
    match s.split_once('e') {
        Some((mantissa, exp)) if mantissa.contains('.') => {
            let mantissa = mantissa.trim_end_matches('0').trim_end_matches('.');
            format!("{mantissa}e{exp}")
        }
        _ => s.to_owned(),
    }
}

/// A compact label for an arbitrary value.
fn format_general(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return "0".to_owned();
    }
    let e = v.abs().log10().floor() as i32;
    if (-3..6).contains(&e) {
        let decimals = (3 - e).clamp(0, 6) as usize;
        let s = format!("{v:.decimals$}");
        let s = if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_owned()
        } else {
            s
        };
        with_minus(s)
    } else {
        with_minus(trim_exponential(&format!("{v:.3e}")))
    }
}

/// Ticks of a logarithmic axis over the t-space range `[t_lo, t_hi]`
/// (decimal exponents) with at most about `max_labels` labels, and the
/// positions of unlabelled minor ticks.
///
/// Ranges over four or more decades get ticks at powers of ten, labelled
/// like `10⁻⁶`; shorter ranges get ticks at 1, 2 and 5 times powers of ten,
/// and ranges shorter than that get linear nice ticks, so that at least two
/// ticks are always shown.
fn log_ticks(t_lo: f64, t_hi: f64, max_labels: usize) -> (Vec<Tick>, Vec<f64>) {
    let max_labels = max_labels.max(2);
    if !(t_lo.is_finite() && t_hi.is_finite() && t_lo < t_hi) {
        return (Vec::new(), Vec::new());
    }
    let eps = 1e-9;
    let k0 = (t_lo - eps).ceil();
    let k1 = (t_hi + eps).floor();
    let decades = k1 - k0 + 1.0;
    if decades >= 4.0 {
        let (k0, k1) = (k0 as i64, k1 as i64);
        let stride = ((decades / max_labels as f64).ceil() as i64).max(1);
        let mut ticks = Vec::new();
        let mut minor = Vec::new();
        for k in k0..=k1 {
            if k.rem_euclid(stride) == 0 {
                ticks.push(Tick {
                    t: k as f64,
                    label: decade_label(k),
                });
            } else {
                minor.push(k as f64);
            }
        }
        if stride == 1 && decades <= 8.0 {
            for k in k0 - 1..=k1 {
                for m in 2..=9 {
                    let t = k as f64 + f64::from(m).log10();
                    if t > t_lo && t < t_hi {
                        minor.push(t);
                    }
                }
            }
        }
        return (ticks, minor);
    }

    // 1, 2, 5 times powers of ten.
    let mut ticks = Vec::new();
    for k in (t_lo.floor() as i64)..=(t_hi.ceil() as i64) {
        for m in [1u8, 2, 5] {
            let t = k as f64 + f64::from(m).log10();
            if t >= t_lo - eps && t <= t_hi + eps {
                ticks.push(Tick {
                    t,
                    label: mantissa_label(m, k),
                });
            }
        }
    }
    if ticks.len() >= 3 {
        if ticks.len() > max_labels {
            // Keep the labels at 1 and 5 only; the 2s stay as tick marks.
            for tick in &mut ticks {
                let frac = tick.t - tick.t.floor();
                if (frac - 2f64.log10()).abs() < 1e-6 {
                    tick.label.clear();
                }
            }
        }
        return (ticks, Vec::new());
    }

    // Less than about half a decade: linear nice ticks in data space.
    let lo = Scale::Log10.value(t_lo);
    let hi = Scale::Log10.value(t_hi);
    let linear: Vec<Tick> = linear_ticks(lo, hi, max_labels.min(6))
        .into_iter()
        .filter(|t| t.t > 0.0)
        .map(|t| Tick {
            t: t.t.log10(),
            label: t.label,
        })
        .collect();
    if linear.len() >= 2 || linear.len() >= ticks.len() {
        (linear, Vec::new())
    } else {
        (ticks, Vec::new())
    }
}

/// Label of the decade `10^k`, with a superscript exponent.
fn decade_label(k: i64) -> String {
    let mut s = String::from("10");
    for c in k.to_string().chars() {
        s.push(match c {
            '-' => '\u{207b}',
            '0' => '\u{2070}',
            '1' => '\u{b9}',
            '2' => '\u{b2}',
            '3' => '\u{b3}',
            '4' => '\u{2074}',
            '5' => '\u{2075}',
            '6' => '\u{2076}',
            '7' => '\u{2077}',
            '8' => '\u{2078}',
            '9' => '\u{2079}',
            other => other,
        });
    }
    s
}

/// Label of `m * 10^k` for a single digit `m`: plain decimal notation for
/// moderate exponents, `2e-7` style otherwise.
fn mantissa_label(m: u8, k: i64) -> String {
    match k {
        0..=5 => format!("{m}{}", "0".repeat(k as usize)),
        -4..=-1 => format!("0.{}{m}", "0".repeat((-k - 1) as usize)),
        _ => format!("{m}e{k}"),
    }
}

// ---------------------------------------------------------------------------
// Panels
// ---------------------------------------------------------------------------

/// A point in data or screen coordinates.
type Point = (f64, f64);

/// Pixel geometry of a panel's plot area together with its axes.
struct Frame {
    x: Axis,
    y: Axis,
    left: f64,
    top: f64,
    width: f64,
    height: f64,
}

impl Frame {
    /// Screen position of a data point, if both coordinates can be shown.
    fn project(&self, (x, y): (f64, f64)) -> Option<(f64, f64)> {
        let fx = self.x.frac(x)?;
        let fy = self.y.frac(y)?;
        Some(self.at(fx, fy))
    }

    /// Screen position of relative coordinates.
    fn at(&self, fx: f64, fy: f64) -> (f64, f64) {
        (
            self.left + fx * self.width,
            self.top + (1.0 - fy) * self.height,
        )
    }

    fn right(&self) -> f64 {
        self.left + self.width
    }

    fn bottom(&self) -> f64 {
        self.top + self.height
    }
}

/// Splits a sequence of optional screen points into runs of consecutive
/// valid points.
fn runs(points: impl IntoIterator<Item = Option<(f64, f64)>>) -> Vec<Vec<(f64, f64)>> {
    let mut out = Vec::new();
    let mut current = Vec::new();
    for p in points {
        match p {
            Some(p) => current.push(p),
            None if !current.is_empty() => out.push(std::mem::take(&mut current)),
            None => {}
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// Outline polygons of a band, one per run of valid `(x, lo, hi)` entries.
fn band_polygons(frame: &Frame, band: &[(f64, f64, f64)]) -> Vec<Vec<(f64, f64)>> {
    let edges = band.iter().map(|&(x, lo, hi)| {
        let lo = frame.project((x, lo))?;
        let hi = frame.project((x, hi))?;
        Some((lo, hi))
    });
    let mut polygons = Vec::new();
    let mut current: Vec<(Point, Point)> = Vec::new();
    let mut flush = |current: &mut Vec<(Point, Point)>| {
        if current.len() >= 2 {
            let mut poly: Vec<(f64, f64)> = current.iter().map(|e| e.1).collect();
            poly.extend(current.iter().rev().map(|e| e.0));
            polygons.push(poly);
        }
        current.clear();
    };
    for e in edges {
        match e {
            Some(e) => current.push(e),
            None => flush(&mut current),
        }
    }
    flush(&mut current);
    polygons
}

/// Clips the infinite line through `a` and `b` to the rectangle
/// `xr × yr` (data coordinates); returns the visible segment.
fn clip_line(
    a: (f64, f64),
    b: (f64, f64),
    xr: (f64, f64),
    yr: (f64, f64),
) -> Option<((f64, f64), (f64, f64))> {
    let dx = b.0 - a.0;
    let dy = b.1 - a.1;
    if !(dx.is_finite() && dy.is_finite()) || (dx == 0.0 && dy == 0.0) {
        return None;
    }
    let mut t0 = f64::NEG_INFINITY;
    let mut t1 = f64::INFINITY;
    for (p, q) in [
        (-dx, a.0 - xr.0),
        (dx, xr.1 - a.0),
        (-dy, a.1 - yr.0),
        (dy, yr.1 - a.1),
    ] {
        if p == 0.0 {
            if q < 0.0 {
                return None;
            }
        } else {
            let r = q / p;
            if p < 0.0 {
                t0 = t0.max(r);
            } else {
                t1 = t1.min(r);
            }
        }
    }
    if !(t0.is_finite() && t1.is_finite() && t0 <= t1) {
        return None;
    }
    let p0 = (a.0 + t0 * dx, a.1 + t0 * dy);
    let p1 = (a.0 + t1 * dx, a.1 + t1 * dy);
    let ok = |p: (f64, f64)| p.0.is_finite() && p.1.is_finite();
    (ok(p0) && ok(p1)).then_some((p0, p1))
}

/// Screen polylines of the reference line through `a` and `b`, clipped to
/// the plot area. On logarithmic axes the line is sampled, since a straight
/// line in data space is in general curved on screen.
fn reference_polylines(frame: &Frame, a: (f64, f64), b: (f64, f64)) -> Vec<Vec<(f64, f64)>> {
    let Some((p0, p1)) = clip_line(a, b, frame.x.data_range(), frame.y.data_range()) else {
        return Vec::new();
    };
    if frame.x.scale == Scale::Linear && frame.y.scale == Scale::Linear {
        return runs([frame.project(p0), frame.project(p1)]);
    }
    const SAMPLES: usize = 200;
    let (dx, dy) = (b.0 - a.0, b.1 - a.1);
    let along_x = p0.0 != p1.0 && dx != 0.0;
    let (axis, s0, s1) = if along_x {
        (&frame.x, p0.0, p1.0)
    } else {
        (&frame.y, p0.1, p1.1)
    };
    if !(axis.scale.accepts(s0) && axis.scale.accepts(s1)) {
        return Vec::new();
    }
    let (u0, u1) = (axis.scale.coord(s0), axis.scale.coord(s1));
    runs((0..=SAMPLES).map(|i| {
        let u = u0 + (u1 - u0) * (i as f64 / SAMPLES as f64);
        let s = axis.scale.value(u);
        let p = if along_x {
            (s, a.1 + (s - a.0) * (dy / dx))
        } else if dy != 0.0 {
            (a.0 + (s - a.1) * (dx / dy), s)
        } else {
            (a.0, s)
        };
        frame.project(p)
    }))
}

/// Renders one panel with its top-left corner at `(x0, y0)`.
fn render_panel(out: &mut String, panel: &Panel, index: usize, x0: f64, y0: f64) {
    let (xs_scale, ys_scale) = (panel.x_scale, panel.y_scale);
    let valid = |x: f64, y: f64| xs_scale.accepts(x) && ys_scale.accepts(y);

    // Data extent over all valid points and band entries.
    let mut xs = Vec::new();
    let mut ys = Vec::new();
    for s in &panel.series {
        for &(x, y) in &s.points {
            if valid(x, y) {
                xs.push(x);
                ys.push(y);
            }
        }
        for &(x, lo, hi) in s.band.iter().flatten() {
            if valid(x, lo) && valid(x, hi) {
                xs.push(x);
                ys.push(lo);
                ys.push(hi);
            }
        }
    }
    let has_data = !xs.is_empty();
    if !has_data && let Some((a, b)) = panel.reference_line {
        for (x, y) in [a, b] {
            if valid(x, y) {
                xs.push(x);
                ys.push(y);
            }
        }
    }
    let (xt_lo, xt_hi) = axis_extent(xs_scale, &xs);
    let (yt_lo, yt_hi) = axis_extent(ys_scale, &ys);

    // Layout: the left margin depends on the width of the y tick labels,
    // the x ticks on the width of the plot area.
    let y_axis = Axis::new(ys_scale, yt_lo, yt_hi, 6);
    let left = 36.0 + y_axis.max_label_width();
    let top = y0 + MARGIN_TOP;
    let height = PANEL_H - MARGIN_TOP - MARGIN_BOTTOM;
    let mut right = MARGIN_RIGHT;
    let mut x_axis = Axis::new(xs_scale, xt_lo, xt_hi, 6);
    for _ in 0..2 {
        let width = PANEL_W - left - right;
        for target in (2..=6).rev() {
            x_axis = Axis::new(xs_scale, xt_lo, xt_hi, target);
            let needed: f64 = x_axis
                .ticks
                .iter()
                .map(|t| text_width(&t.label, TICK_FONT) + 12.0)
                .sum();
            if needed <= width {
                break;
            }
        }
        // Room for the overhang of a label at the right end of the axis.
        let overhang = x_axis
            .ticks
            .iter()
            .filter(|t| x_axis.frac_t(t.t) > 0.9)
            .map(|t| text_width(&t.label, TICK_FONT) / 2.0 + 4.0)
            .fold(MARGIN_RIGHT, f64::max);
        if overhang <= right {
            break;
        }
        right = overhang;
    }
    let frame = Frame {
        x: x_axis,
        y: y_axis,
        left: x0 + left,
        top,
        width: PANEL_W - left - right,
        height,
    };

    let _ = writeln!(out, "<g class=\"panel\">");
    let clip_id = format!("plot-area-{index}");
    let _ = writeln!(
        out,
        "<defs><clipPath id=\"{clip_id}\"><rect x=\"{}\" y=\"{}\" width=\"{}\" \
         height=\"{}\"/></clipPath></defs>",
        num(frame.left),
        num(frame.top),
        num(frame.width),
        num(frame.height)
    );
    render_grid(out, &frame);

    // Data, clipped to the plot area.
    let _ = writeln!(out, "<g clip-path=\"url(#{clip_id})\">");
    let mut occupied: Vec<(f64, f64)> = Vec::new();
    for (i, s) in panel.series.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        if let Some(band) = &s.band {
            for poly in band_polygons(&frame, band) {
                let _ = writeln!(
                    out,
                    "<polygon fill=\"{colour}\" fill-opacity=\"0.2\" stroke=\"none\" \
                     points=\"{}\"/>",
                    point_list(&poly)
                );
                occupied.extend_from_slice(&poly);
            }
        }
    }
    if let Some((a, b)) = panel.reference_line {
        for line in reference_polylines(&frame, a, b) {
            if line.len() >= 2 {
                let _ = writeln!(
                    out,
                    "<polyline fill=\"none\" stroke=\"{REFERENCE_COLOUR}\" stroke-width=\"1.2\" \
                     stroke-dasharray=\"6 4\" points=\"{}\"/>",
                    point_list(&line)
                );
                occupied.extend(densify(&line));
            }
        }
    }
    for (i, s) in panel.series.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        let projected = s.points.iter().map(|&p| frame.project(p));
        if s.line {
            for line in runs(projected.clone()) {
                if line.len() >= 2 {
                    let _ = writeln!(
                        out,
                        "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.8\" \
                         stroke-linejoin=\"round\" stroke-linecap=\"round\" points=\"{}\"/>",
                        point_list(&line)
                    );
                    occupied.extend(densify(&line));
                }
            }
        }
        if s.marker == Marker::Circle {
            for (cx, cy) in projected.flatten() {
                let _ = writeln!(
                    out,
                    "<circle cx=\"{}\" cy=\"{}\" r=\"3\" fill=\"{colour}\" \
                     fill-opacity=\"0.85\"/>",
                    num(cx),
                    num(cy)
                );
                occupied.push((cx, cy));
            }
        }
    }
    let _ = writeln!(out, "</g>");

    if !has_data {
        let _ = writeln!(
            out,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"{TITLE_FONT}\" \
             fill=\"#888888\">no data</text>",
            num(frame.left + frame.width / 2.0),
            num(frame.top + frame.height / 2.0 + TITLE_FONT / 3.0)
        );
    }

    render_axes(out, &frame, panel, x0);
    render_legend(out, &frame, &panel.series, &occupied);
    let _ = writeln!(out, "</g>");
}

/// Grid lines at the major ticks (behind the data).
fn render_grid(out: &mut String, frame: &Frame) {
    let mut path = String::new();
    for tick in &frame.x.ticks {
        let (x, _) = frame.at(frame.x.frac_t(tick.t), 0.0);
        if inside(x, frame.left, frame.right()) {
            let _ = write!(
                path,
                "M{} {}V{}",
                num(x),
                num(frame.top),
                num(frame.bottom())
            );
        }
    }
    for tick in &frame.y.ticks {
        let (_, y) = frame.at(0.0, frame.y.frac_t(tick.t));
        if inside(y, frame.top, frame.bottom()) {
            let _ = write!(
                path,
                "M{} {}H{}",
                num(frame.left),
                num(y),
                num(frame.right())
            );
        }
    }
    if !path.is_empty() {
        let _ = writeln!(
            out,
            "<path fill=\"none\" stroke=\"{GRID_COLOUR}\" stroke-width=\"1\" d=\"{path}\"/>"
        );
    }
}

/// Frame, tick marks, tick labels, axis labels and panel title.
fn render_axes(out: &mut String, frame: &Frame, panel: &Panel, x0: f64) {
    let _ = writeln!(
        out,
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"{INK}\" \
         stroke-width=\"1\"/>",
        num(frame.left),
        num(frame.top),
        num(frame.width),
        num(frame.height)
    );

    let mut marks = String::new();
    let mut labels = String::new();
    let label_y = frame.bottom() + TICK_LEN + 3.0 + TICK_FONT;
    for tick in &frame.x.ticks {
        let (x, _) = frame.at(frame.x.frac_t(tick.t), 0.0);
        if !inside(x, frame.left, frame.right()) {
            continue;
        }
        let _ = write!(marks, "M{} {}v{}", num(x), num(frame.bottom()), TICK_LEN);
        if !tick.label.is_empty() {
            let _ = writeln!(
                labels,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                num(x),
                num(label_y),
                escape(&tick.label)
            );
        }
    }
    for tick in &frame.y.ticks {
        let (_, y) = frame.at(0.0, frame.y.frac_t(tick.t));
        if !inside(y, frame.top, frame.bottom()) {
            continue;
        }
        let _ = write!(marks, "M{} {}h{}", num(frame.left), num(y), -TICK_LEN);
        if !tick.label.is_empty() {
            let _ = writeln!(
                labels,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
                num(frame.left - TICK_LEN - 3.0),
                num(y + TICK_FONT * 0.35),
                escape(&tick.label)
            );
        }
    }
    for &t in &frame.x.minor {
        let (x, _) = frame.at(frame.x.frac_t(t), 0.0);
        if inside(x, frame.left, frame.right()) {
            let _ = write!(marks, "M{} {}v3", num(x), num(frame.bottom()));
        }
    }
    for &t in &frame.y.minor {
        let (_, y) = frame.at(0.0, frame.y.frac_t(t));
        if inside(y, frame.top, frame.bottom()) {
            let _ = write!(marks, "M{} {}h-3", num(frame.left), num(y));
        }
    }
    if !marks.is_empty() {
        let _ = writeln!(
            out,
            "<path fill=\"none\" stroke=\"{INK}\" stroke-width=\"1\" d=\"{marks}\"/>"
        );
    }
    out.push_str(&labels);

    if !panel.x_label.is_empty() {
        let _ = writeln!(
            out,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"{LABEL_FONT}\">{}</text>",
            num(frame.left + frame.width / 2.0),
            num(label_y + 8.0 + LABEL_FONT),
            escape(&panel.x_label)
        );
    }
    if !panel.y_label.is_empty() {
        let (x, y) = (x0 + 18.0, frame.top + frame.height / 2.0);
        let _ = writeln!(
            out,
            "<text x=\"{x}\" y=\"{y}\" transform=\"rotate(-90 {x} {y})\" text-anchor=\"middle\" \
             font-size=\"{LABEL_FONT}\">{}</text>",
            escape(&panel.y_label),
            x = num(x),
            y = num(y),
        );
    }
    if !panel.title.is_empty() {
        let _ = writeln!(
            out,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"{TITLE_FONT}\" \
             font-weight=\"bold\">{}</text>",
            num(frame.left + frame.width / 2.0),
            num(frame.top - 12.0),
            escape(&panel.title)
        );
    }
}

/// Legend box in the corner of the plot area that hides the fewest drawn
/// points (`occupied`, in screen coordinates).
fn render_legend(out: &mut String, frame: &Frame, series: &[Series], occupied: &[(f64, f64)]) {
    if series.is_empty() {
        return;
    }
    const ROW: f64 = 18.0;
    const PAD: f64 = 6.0;
    const SWATCH: f64 = 22.0;
    const INSET: f64 = 8.0;
    let names: Vec<String> = series
        .iter()
        .map(|s| {
            let n = s.name.chars().count();
            if n > MAX_LEGEND_NAME {
                let mut t: String = s.name.chars().take(MAX_LEGEND_NAME - 1).collect();
                t.push('\u{2026}');
                t
            } else {
                s.name.clone()
            }
        })
        .collect();
    let max_rows = (((frame.height - 2.0 * INSET - 2.0 * PAD) / ROW).floor() as usize).max(1);
    let (shown, hidden) = if names.len() > max_rows {
        (
            max_rows.saturating_sub(1),
            names.len() - max_rows.saturating_sub(1),
        )
    } else {
        (names.len(), 0)
    };
    let rows = shown + usize::from(hidden > 0);
    let more = format!("and {hidden} more");
    let text_w = names[..shown]
        .iter()
        .map(|n| text_width(n, TICK_FONT))
        .chain((hidden > 0).then(|| text_width(&more, TICK_FONT)))
        .fold(0.0, f64::max);
    let w = (2.0 * PAD + SWATCH + 6.0 + text_w).min(frame.width - 2.0 * INSET);
    let h = 2.0 * PAD + ROW * rows as f64;

    let corners = [
        (frame.right() - INSET - w, frame.top + INSET),
        (frame.left + INSET, frame.top + INSET),
        (frame.right() - INSET - w, frame.bottom() - INSET - h),
        (frame.left + INSET, frame.bottom() - INSET - h),
    ];
    let cover = |(bx, by): (f64, f64)| {
        occupied
            .iter()
            .filter(|&&(x, y)| {
                x >= bx - 4.0 && x <= bx + w + 4.0 && y >= by - 4.0 && y <= by + h + 4.0
            })
            .count()
    };
    let mut best = corners[0];
    let mut best_cover = cover(best);
    for &c in &corners[1..] {
        let n = cover(c);
        if n < best_cover {
            best = c;
            best_cover = n;
        }
    }
    let (bx, by) = best;

    let _ = writeln!(out, "<g class=\"legend\">");
    let _ = writeln!(
        out,
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" rx=\"3\" fill=\"#ffffff\" \
         fill-opacity=\"0.9\" stroke=\"#bbbbbb\" stroke-width=\"1\"/>",
        num(bx),
        num(by),
        num(w),
        num(h)
    );
    for (i, (s, name)) in series.iter().zip(&names).take(shown).enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        let cy = by + PAD + ROW * (i as f64 + 0.5);
        let sx = bx + PAD;
        if s.band.is_some() {
            let _ = writeln!(
                out,
                "<rect x=\"{}\" y=\"{}\" width=\"{SWATCH}\" height=\"10\" fill=\"{colour}\" \
                 fill-opacity=\"0.2\"/>",
                num(sx),
                num(cy - 5.0)
            );
        }
        if s.line {
            let _ = writeln!(
                out,
                "<line x1=\"{}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" stroke=\"{colour}\" \
                 stroke-width=\"1.8\"/>",
                num(sx),
                num(sx + SWATCH),
                y = num(cy)
            );
        }
        if s.marker == Marker::Circle {
            let _ = writeln!(
                out,
                "<circle cx=\"{}\" cy=\"{}\" r=\"3\" fill=\"{colour}\"/>",
                num(sx + SWATCH / 2.0),
                num(cy)
            );
        }
        let _ = writeln!(
            out,
            "<text x=\"{}\" y=\"{}\">{}</text>",
            num(sx + SWATCH + 6.0),
            num(cy + TICK_FONT * 0.35),
            escape(name)
        );
    }
    if hidden > 0 {
        let cy = by + PAD + ROW * (shown as f64 + 0.5);
        let _ = writeln!(
            out,
            "<text x=\"{}\" y=\"{}\" fill=\"#666666\">{}</text>",
            num(bx + PAD + SWATCH + 6.0),
            num(cy + TICK_FONT * 0.35),
            escape(&more)
        );
    }
    let _ = writeln!(out, "</g>");
}

// ---------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------

/// Whether `v` lies in `[lo, hi]` up to half a pixel.
fn inside(v: f64, lo: f64, hi: f64) -> bool {
    v >= lo - 0.5 && v <= hi + 0.5
}

/// Points along a polyline, at most a few pixels apart, used to find an
/// empty corner for the legend.
fn densify(line: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(line.len() * 2);
    for pair in line.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        let len = (b.0 - a.0).hypot(b.1 - a.1);
        let steps = (len / 4.0).ceil().clamp(1.0, 200.0) as usize;
        for i in 0..steps {
            let f = i as f64 / steps as f64;
            out.push((a.0 + (b.0 - a.0) * f, a.1 + (b.1 - a.1) * f));
        }
    }
    if let Some(&last) = line.last() {
        out.push(last);
    }
    out
}

/// A number formatted for an SVG attribute: two decimals at most, never
/// `NaN` or infinite.
fn num(v: f64) -> String {
    if !v.is_finite() {
        return "0".to_owned();
    }
    let v = v.clamp(-1e7, 1e7);
    let s = format!("{v:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".to_owned()
    } else {
        s.to_owned()
    }
}

/// The `points` attribute of a polyline or polygon.
fn point_list(points: &[(f64, f64)]) -> String {
    let mut s = String::with_capacity(points.len() * 14);
    for (i, &(x, y)) in points.iter().enumerate() {
        if i > 0 {
            s.push(' ');
        }
        s.push_str(&num(x));
        s.push(',');
        s.push_str(&num(y));
    }
    s
}

/// Approximate rendered width of `text` in a sans-serif font of `size` px.
fn text_width(text: &str, size: f64) -> f64 {
    text.chars()
        .map(|c| match c {
            '.' | ',' | ':' | ';' | 'i' | 'l' | 'j' | '|' | '!' | '\'' => 0.3,
            ' ' => 0.32,
            '(' | ')' | '[' | ']' | 'f' | 't' | 'r' => 0.42,
            '\u{2070}'..='\u{207f}' | '\u{b2}' | '\u{b3}' | '\u{b9}' => 0.42,
            '0'..='9' => 0.64,
            '=' | '+' | '<' | '>' | '\u{2212}' => 0.84,
            'm' | 'w' | 'M' | 'W' => 0.95,
            c if c.is_uppercase() => 0.74,
            _ => 0.62,
        })
        .sum::<f64>()
        * size
}

/// Replaces a leading hyphen by a typographic minus sign.
fn with_minus(s: String) -> String {
    match s.strip_prefix('-') {
        Some(rest) => format!("\u{2212}{rest}"),
        None => s,
    }
}

/// Escapes text for use in SVG content and attribute values; characters
/// that XML 1.0 does not allow are dropped.
fn escape(text: &str) -> String {
    let mut s = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => s.push_str("&amp;"),
            '<' => s.push_str("&lt;"),
            '>' => s.push_str("&gt;"),
            '"' => s.push_str("&quot;"),
            '\'' => s.push_str("&apos;"),
            '\t' | '\n' | '\r' => s.push(' '),
            c if (c as u32) < 0x20 || c == '\u{fffe}' || c == '\u{ffff}' => {}
            c => s.push(c),
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal well-formedness check: balanced, properly nested tags,
    /// quoted attributes, no stray `<` or unknown entities, one root.
    fn check_xml(svg: &str) {
        assert!(svg.starts_with("<svg"), "document must start with <svg");
        let mut stack: Vec<String> = Vec::new();
        let mut roots = 0;
        let mut rest = svg;
        while let Some(open) = rest.find('<') {
            check_text(&rest[..open]);
            let after = &rest[open + 1..];
            let close = after.find('>').expect("unterminated tag");
            let tag = &after[..close];
            assert!(!tag.contains('<'), "'<' inside tag: {tag}");
            if let Some(name) = tag.strip_prefix('/') {
                let top = stack.pop().expect("closing tag without opening");
                assert_eq!(top, name.trim(), "mismatched closing tag");
            } else {
                let self_closing = tag.ends_with('/');
                let body = tag.trim_end_matches('/');
                let name = body.split_whitespace().next().expect("empty tag");
                check_attributes(&body[name.len()..]);
                if stack.is_empty() {
                    roots += 1;
                }
                if !self_closing {
                    stack.push(name.to_owned());
                }
            }
            rest = &after[close + 1..];
        }
        check_text(rest);
        assert!(rest.trim().is_empty(), "content after the root element");
        assert!(stack.is_empty(), "unclosed tags: {stack:?}");
        assert_eq!(roots, 1, "exactly one root element");
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
    }

    fn check_text(text: &str) {
        assert!(!text.contains('>'), "unescaped '>' in text: {text}");
        let mut rest = text;
        while let Some(i) = rest.find('&') {
            let entity = &rest[i..];
            assert!(
                ["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"]
                    .iter()
                    .any(|e| entity.starts_with(e)),
                "bad entity in {text}"
            );
            rest = &rest[i + 1..];
        }
    }

    fn check_attributes(attrs: &str) {
        let mut rest = attrs.trim();
        while !rest.is_empty() {
            let eq = rest.find('=').expect("attribute without value");
            let name = rest[..eq].trim();
            assert!(
                !name.is_empty()
                    && name
                        .chars()
                        .all(|c| c.is_alphanumeric() || "-:_".contains(c)),
                "bad attribute name {name:?}"
            );
            let value = rest[eq + 1..].strip_prefix('"').expect("unquoted value");
            let end = value.find('"').expect("unterminated value");
            check_text(&value[..end]);
            rest = value[end + 1..].trim_start();
        }
    }

    fn count(svg: &str, needle: &str) -> usize {
        svg.matches(needle).count()
    }

    fn values(ticks: &[Tick]) -> Vec<f64> {
        ticks.iter().map(|t| t.t).collect()
    }

    fn labels(ticks: &[Tick]) -> Vec<&str> {
        ticks.iter().map(|t| t.label.as_str()).collect()
    }

    fn sample_figure() -> Figure {
        let curve: Vec<(f64, f64)> = (0..=50).map(|i| (i as f64, 0.8f64.powi(i))).collect();
        let band = curve.iter().map(|&(x, y)| (x, y * 0.5, y * 2.0)).collect();
        Figure::new()
            .with_title("Two & more <panels>")
            .with_panel(
                Panel::new("Errors", "iteration", "error")
                    .with_scales(Scale::Linear, Scale::Log10)
                    .with_series(Series::line("median", curve).with_band(band))
                    .with_series(Series::line("other", vec![(0.0, 1.0), (50.0, 1e-3)])),
            )
            .with_panel(
                Panel::new("Agreement", "exact", "estimate")
                    .with_series(Series::scatter("points", vec![(0.0, 0.1), (1.0, 0.9)]))
                    .with_reference_line((0.0, 0.0), (1.0, 1.0)),
            )
    }

    #[test]
    fn svg_is_well_formed_and_has_legend() {
        let svg = sample_figure().to_svg();
        check_xml(&svg);
        assert!(svg.contains("xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.contains("version=\"1.1\""));
        for name in ["median", "other", "points"] {
            assert!(
                svg.contains(&format!(">{name}</text>")),
                "legend lists {name}"
            );
        }
        assert_eq!(count(&svg, "<svg"), 1);
        assert_eq!(count(&svg, "</svg>"), 1);
        assert_eq!(count(&svg, "<g"), count(&svg, "</g>"));
        assert_eq!(count(&svg, "<text"), count(&svg, "</text>"));
        assert!(svg.contains("fill-opacity=\"0.2\""), "band is drawn");
        assert!(svg.contains("<polygon"), "band polygon");
    }

    #[test]
    fn text_is_escaped() {
        let title = "a<b & \"c\" 'd' > e";
        let fig = Figure::new().with_title(title).with_panel(
            Panel::new(title, "x & y", "<y>")
                .with_series(Series::line("α<β & \"γ\"", vec![(0.0, 1.0), (1.0, 2.0)])),
        );
        let svg = fig.to_svg();
        check_xml(&svg);
        assert!(svg.contains("a&lt;b &amp; &quot;c&quot; &apos;d&apos; &gt; e"));
        assert!(svg.contains("x &amp; y"));
        assert!(svg.contains("&lt;y&gt;"));
        assert!(svg.contains("α&lt;β &amp; &quot;γ&quot;"));
        assert!(!svg.contains("a<b"));
    }

    #[test]
    fn control_characters_are_dropped() {
        assert_eq!(escape("a\u{0}b\u{1b}c\nd"), "abc d");
    }

    #[test]
    fn linear_ticks_zero_to_one() {
        let ticks = linear_ticks(0.0, 1.0, 6);
        assert_eq!(values(&ticks), vec![0.0, 0.2, 0.4, 0.6, 0.8, 1.0]);
        assert_eq!(
            labels(&ticks),
            vec!["0.0", "0.2", "0.4", "0.6", "0.8", "1.0"]
        );
    }

    #[test]
    fn linear_ticks_negative_to_positive() {
        let ticks = linear_ticks(-3.7, 12.1, 6);
        assert_eq!(
            values(&ticks),
            vec![-2.0, 0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0]
        );
        assert_eq!(labels(&ticks)[0], "\u{2212}2");
        assert_eq!(labels(&ticks)[1], "0");
        assert!(ticks.iter().all(|t| !t.label.starts_with('-')));
    }

    #[test]
    fn linear_ticks_various_ranges() {
        for (lo, hi) in [
            (0.0, 1e-9),
            (1e9, 1e9 + 3.0),
            (-1e6, 1e6),
            (123.4, 123.5),
            (-f64::MAX, f64::MAX),
            (1e-300, 2e-300),
            (-5.0, -4.0),
        ] {
            let ticks = linear_ticks(lo, hi, 6);
            assert!(ticks.len() >= 2, "{lo}..{hi}: {ticks:?}");
            let span = hi * 0.5 - lo * 0.5;
            for t in &ticks {
                assert!(t.t.is_finite() && !t.label.is_empty());
                assert!(
                    t.t >= lo - span * 1e-6 && t.t <= hi + span * 1e-6,
                    "{lo}..{hi}: {t:?}"
                );
            }
            let mut l = labels(&ticks);
            l.dedup();
            assert_eq!(
                l.len(),
                ticks.len(),
                "distinct labels for {lo}..{hi}: {l:?}"
            );
        }
        assert_eq!(labels(&linear_ticks(0.0, 2e6, 5))[1], "5e5");
        assert_eq!(labels(&linear_ticks(0.0, 1e-4, 5))[1], "2e-5");
    }

    #[test]
    fn linear_degenerate_range_is_widened() {
        let (lo, hi) = axis_extent(Scale::Linear, &[5.0, 5.0]);
        assert!(lo < 5.0 && hi > 5.0);
        assert!(linear_ticks(lo, hi, 6).len() >= 3);
        let (lo, hi) = axis_extent(Scale::Linear, &[0.0]);
        assert!(lo < 0.0 && hi > 0.0);
        assert_eq!(axis_extent(Scale::Linear, &[]), (0.0, 1.0));
        assert_eq!(axis_extent(Scale::Linear, &[f64::NAN]), (0.0, 1.0));
        let (lo, hi) = axis_extent(Scale::Linear, &[f64::MAX, -f64::MAX]);
        assert!(lo.is_finite() && hi.is_finite() && lo < hi);
    }

    #[test]
    fn log_ticks_many_decades() {
        let (ticks, minor) = log_ticks(-12.0, 0.0, 7);
        assert_eq!(
            values(&ticks),
            vec![-12.0, -10.0, -8.0, -6.0, -4.0, -2.0, 0.0]
        );
        assert_eq!(labels(&ticks)[0], "10\u{207b}\u{b9}\u{b2}");
        assert_eq!(labels(&ticks)[6], "10\u{2070}");
        assert_eq!(minor, vec![-11.0, -9.0, -7.0, -5.0, -3.0, -1.0]);

        let (ticks, minor) = log_ticks(-0.1, 3.1, 7);
        assert_eq!(labels(&ticks), vec!["10⁰", "10¹", "10²", "10³"]);
        assert_eq!(minor.len(), 3 * 8 + 2);
    }

    #[test]
    fn log_ticks_short_ranges() {
        // Less than a decade: at least two ticks, all inside the range.
        for (lo, hi) in [
            (0.3, 0.7),
            (0.9, 1.5),
            (5.0, 6.0),
            (1e-7, 3e-7),
            (1.0, 1.0001),
        ] {
            let (tl, th) = (f64::log10(lo), f64::log10(hi));
            let (ticks, _) = log_ticks(tl, th, 7);
            assert!(ticks.len() >= 2, "{lo}..{hi}: {ticks:?}");
            for t in &ticks {
                assert!(t.t >= tl - 1e-9 && t.t <= th + 1e-9, "{lo}..{hi}: {t:?}");
            }
        }
        let (ticks, _) = log_ticks(f64::log10(0.3), f64::log10(0.7), 7);
        assert_eq!(labels(&ticks), vec!["0.3", "0.4", "0.5", "0.6", "0.7"]);
        // About two decades: 1-2-5 ticks.
        let (ticks, _) = log_ticks(0.0, 2.0, 7);
        assert_eq!(labels(&ticks), vec!["1", "2", "5", "10", "20", "50", "100"]);
        let (ticks, _) = log_ticks(0.0, 2.0, 5);
        assert_eq!(labels(&ticks), vec!["1", "", "5", "10", "", "50", "100"]);
        let (ticks, _) = log_ticks(-7.0, -6.0, 7);
        assert_eq!(labels(&ticks), vec!["1e-7", "2e-7", "5e-7", "1e-6"]);
    }

    #[test]
    fn log_degenerate_range_shows_two_ticks() {
        let (lo, hi) = axis_extent(Scale::Log10, &[5.0, 5.0]);
        assert!(lo < 5f64.log10() && hi > 5f64.log10());
        let axis = Axis::new(Scale::Log10, lo, hi, 6);
        assert!(axis.ticks.len() >= 2, "{:?}", axis.ticks);
        assert_eq!(
            axis_extent(Scale::Log10, &[-1.0, 0.0, f64::NAN]),
            (0.0, 1.0)
        );
        let (lo, hi) = axis_extent(Scale::Log10, &[f64::MIN_POSITIVE / 1e10, f64::MAX]);
        let axis = Axis::new(Scale::Log10, lo, hi, 6);
        assert!(axis.ticks.len() >= 2 && axis.ticks.len() <= 8);
    }

    #[test]
    fn invalid_points_on_log_axis_are_skipped() {
        let points = vec![
            (1.0, 1.0),
            (2.0, 0.5),
            (3.0, f64::NAN),
            (4.0, -1.0),
            (5.0, 1e-3),
            (6.0, 0.0),
            (7.0, 1e-2),
            (8.0, 1e-2),
            (f64::INFINITY, 1.0),
        ];
        let fig = Figure::new().with_panel(
            Panel::new("log", "x", "y")
                .with_scales(Scale::Log10, Scale::Log10)
                .with_series(Series::line("broken", points.clone()))
                .with_series(Series::scatter("dots", points)),
        );
        let svg = fig.to_svg();
        check_xml(&svg);
        // Runs: [1, 2], [5] (single point, not drawn), [7, 8].
        assert_eq!(count(&svg, "<polyline"), 2);
        // Valid points: x = 1, 2, 5, 7, 8.
        assert_eq!(count(&svg, "<circle") - 1, 5);
        assert!(!svg.contains("no data"));
    }

    #[test]
    fn empty_inputs_render_no_data() {
        let empty_series = Figure::new().with_panel(
            Panel::new("empty", "x", "y")
                .with_scales(Scale::Log10, Scale::Log10)
                .with_series(Series::line("nothing", Vec::new()))
                .with_series(Series::scatter("only invalid", vec![(f64::NAN, 1.0)])),
        );
        let svg = empty_series.to_svg();
        check_xml(&svg);
        assert!(svg.contains("no data"));
        assert!(svg.contains(">nothing</text>"));
        assert_eq!(count(&svg, "<polyline"), 0);

        let no_series = Figure::new().with_panel(Panel::new("", "", ""));
        let svg = no_series.to_svg();
        check_xml(&svg);
        assert!(svg.contains("no data"));

        let no_panels = Figure::new().to_svg();
        check_xml(&no_panels);
        assert!(no_panels.contains("no data"));
    }

    #[test]
    fn single_point_and_identical_values() {
        for scale in [Scale::Linear, Scale::Log10] {
            let fig = Figure::new().with_panel(
                Panel::new("one", "x", "y")
                    .with_scales(scale, scale)
                    .with_series(Series::scatter("p", vec![(5.0, 5.0)]))
                    .with_series(Series::line("flat", vec![(5.0, 5.0), (5.0, 5.0)])),
            );
            let svg = fig.to_svg();
            check_xml(&svg);
            assert!(!svg.contains("no data"));
        }
    }

    #[test]
    fn extreme_values_do_not_break_output() {
        let fig = Figure::new().with_panel(
            Panel::new("extreme", "x", "y")
                .with_series(Series::line(
                    "big",
                    vec![(-f64::MAX, f64::MAX), (f64::MAX, -f64::MAX), (0.0, 1e-320)],
                ))
                .with_series(
                    Series::line("band", vec![(0.0, 0.0)])
                        .with_band(vec![(0.0, f64::NAN, 1.0), (1.0, -1.0, f64::MAX)]),
                )
                .with_reference_line((0.0, 0.0), (f64::MAX, f64::MAX)),
        );
        check_xml(&fig.to_svg());
    }

    #[test]
    fn scatter_with_reference_line() {
        let points: Vec<(f64, f64)> = (1..=20)
            .map(|i| (f64::from(i), f64::from(i) * 1.1 - 0.5))
            .collect();
        for scale in [Scale::Linear, Scale::Log10] {
            let fig = Figure::new().with_panel(
                Panel::new("scatter", "exact", "estimate")
                    .with_scales(scale, scale)
                    .with_series(Series::scatter("estimates", points.clone()))
                    .with_reference_line((0.0, 0.0), (1.0, 1.0)),
            );
            let svg = fig.to_svg();
            check_xml(&svg);
            // 20 markers plus one legend marker.
            assert_eq!(count(&svg, "<circle"), 21);
            assert_eq!(count(&svg, "stroke-dasharray"), 1, "{scale:?}");
        }
    }

    #[test]
    fn reference_line_is_clipped() {
        let seg = clip_line((0.0, 0.0), (1.0, 1.0), (2.0, 4.0), (0.0, 3.0));
        assert_eq!(seg, Some(((2.0, 2.0), (3.0, 3.0))));
        assert_eq!(
            clip_line((0.0, 0.0), (1.0, 1.0), (2.0, 4.0), (-3.0, -1.0)),
            None
        );
        assert_eq!(
            clip_line((1.0, 1.0), (1.0, 1.0), (0.0, 2.0), (0.0, 2.0)),
            None
        );
        let vertical = clip_line((1.0, 5.0), (1.0, 6.0), (0.0, 2.0), (0.0, 2.0));
        assert_eq!(vertical, Some(((1.0, 0.0), (1.0, 2.0))));
    }

    #[test]
    fn two_panels_have_two_titles() {
        let svg = sample_figure().to_svg();
        assert!(svg.contains(">Errors</text>"));
        assert!(svg.contains(">Agreement</text>"));
        assert!(svg.contains("width=\"960\""));
        assert_eq!(count(&svg, "class=\"panel\""), 2);
        assert_eq!(count(&svg, "<clipPath id=\"plot-area-0\""), 1);
        assert_eq!(count(&svg, "<clipPath id=\"plot-area-1\""), 1);
    }

    #[test]
    fn many_series_cycle_colours_and_fit_legend() {
        let mut panel = Panel::new("many", "x", "y");
        for i in 0..30 {
            panel = panel.with_series(Series::line(
                format!("series {i} with a rather long name that keeps going on"),
                vec![(0.0, f64::from(i)), (1.0, f64::from(i) + 1.0)],
            ));
        }
        let svg = Figure::new().with_panel(panel).to_svg();
        check_xml(&svg);
        assert_eq!(count(&svg, PALETTE[0]), count(&svg, PALETTE[1]));
        assert!(svg.contains("more</text>"));
    }

    #[test]
    fn arbitrary_values_never_break_output() {
        const SPECIAL: [f64; 14] = [
            0.0,
            -0.0,
            1.0,
            -1.0,
            5.0,
            1e-300,
            -1e-300,
            1e300,
            f64::MAX,
            -f64::MAX,
            f64::MIN_POSITIVE / 4.0,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ];
        fn next(state: &mut u64) -> u64 {
            *state ^= *state << 13;
            *state ^= *state >> 7;
            *state ^= *state << 17;
            *state
        }
        fn value(state: &mut u64) -> f64 {
            let r = next(state);
            if r.is_multiple_of(3) {
                SPECIAL[(r >> 8) as usize % SPECIAL.len()]
            } else {
                let unit = (r >> 11) as f64 / (1u64 << 53) as f64;
                (unit - 0.3) * 10f64.powi((r % 13) as i32 - 6)
            }
        }
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let st = &mut state;
        for _ in 0..300 {
            let n = (next(st) % 6) as usize;
            let points: Vec<(f64, f64)> = (0..n).map(|_| (value(st), value(st))).collect();
            let band: Vec<(f64, f64, f64)> =
                (0..n).map(|_| (value(st), value(st), value(st))).collect();
            let reference = ((value(st), value(st)), (value(st), value(st)));
            let scale = |r: u64| {
                if r.is_multiple_of(2) {
                    Scale::Linear
                } else {
                    Scale::Log10
                }
            };
            let panel = Panel::new("fuzz", "x", "y")
                .with_scales(scale(next(st)), scale(next(st)))
                .with_series(Series::line("l", points.clone()).with_band(band))
                .with_series(Series::scatter("s", points))
                .with_reference_line(reference.0, reference.1);
            check_xml(&Figure::new().with_panel(panel).to_svg());
        }
    }

    #[test]
    fn write_creates_the_file() {
        let dir = std::env::temp_dir().join(format!("plot-test-{}", std::process::id()));
        let path = dir.join("nested").join("figure.svg");
        sample_figure().write(&path).expect("write svg");
        let text = std::fs::read_to_string(&path).expect("read back");
        assert!(text.starts_with("<svg"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn number_formatting() {
        assert_eq!(num(-0.001), "0");
        assert_eq!(num(12.5), "12.5");
        assert_eq!(num(f64::NAN), "0");
        assert_eq!(trim_exponential("1.50e6"), "1.5e6");
        assert_eq!(trim_exponential("2.00e-7"), "2e-7");
        assert_eq!(mantissa_label(5, -3), "0.005");
        assert_eq!(mantissa_label(2, 3), "2000");
        assert_eq!(decade_label(-6), "10⁻⁶");
        assert_eq!(format_general(0.25), "0.25");
        assert_eq!(format_general(1.5e9), "1.5e9");
        assert_eq!(format_general(-2e-9), "\u{2212}2e-9");
        assert_eq!(with_minus("-0.5".to_owned()), "\u{2212}0.5");
    }
}
