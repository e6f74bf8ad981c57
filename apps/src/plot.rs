//! Figures of the experiments, drawn with `plotters` into standalone SVG files.
//!
//! A [`Figure`] is a title above a row of [`Panel`]s and one legend column at the right, off the
//! data: a series name has the same colour in every panel. Axes are linear or base-10
//! logarithmic ([`Scale`]); series are lines, scatter markers and shaded bands (e.g. the
//! 10–90 % percentiles around a mean curve); a panel may carry a dashed reference line (e.g.
//! `y = x`) with its own legend entry. With [`Figure::shared_y`] all panels use one y range,
//! so panels compare at a glance.
//!
//! Drawing never panics on data: non-finite points, and non-positive ones on a log axis, are
//! dropped before plotting (lines break there), degenerate ranges are widened and a panel
//! without data shows empty axes.

use std::ops::Range;
use std::path::Path;

use anyhow::Result;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Width of one panel in pixels.
const PANEL_W: u32 = 440;
/// Height of one panel in pixels.
const PANEL_H: u32 = 340;
/// Height of the figure title.
const TITLE_H: u32 = 36;
/// Margin left of a panel's y labels, in pixels.
const MARGIN_LEFT: i32 = 8;
/// Margin right of a panel's plotting area, in pixels.
const MARGIN_RIGHT: i32 = 16;
/// Width of a panel's y tick labels and y axis label, in pixels.
const Y_LABELS: i32 = 62;
/// Font family of all text (the viewer's sans-serif face).
const FONT: &str = "sans-serif";
/// Qualitative palette (Tableau 10), assigned to series names in order of appearance.
const PALETTE: [RGBColor; 10] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x7f, 0x7f, 0x7f),
    RGBColor(0xbc, 0xbd, 0x22),
    RGBColor(0x17, 0xbe, 0xcf),
];
/// Colour of the reference line.
const REFERENCE: RGBColor = RGBColor(0x70, 0x70, 0x70);
/// Colour of text and axes.
const INK: RGBColor = RGBColor(0x22, 0x22, 0x22);

/// How data values are placed on an axis.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Scale {
    /// Proportionally to the value.
    #[default]
    Linear,
    /// Proportionally to the base-10 logarithm; non-positive values are not shown.
    Log10,
}

impl Scale {
    /// Whether `v` can be placed on an axis of this scale.
    fn accepts(self, v: f64) -> bool {
        v.is_finite() && (self == Scale::Linear || v > 0.0)
    }
}

/// One named data series of a [`Panel`].
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Name in the legend; equal names share a colour across panels.
    pub name: String,
    /// Points `(x, y)` in drawing order.
    pub points: Vec<(f64, f64)>,
    /// Whether points are drawn as markers (scatter) rather than joined by a line.
    pub scatter: bool,
    /// Optional shaded band of `(x, lo, hi)` drawn behind the series.
    pub band: Option<Vec<(f64, f64, f64)>>,
}

impl Series {
    /// A line through the points.
    pub fn line(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Self {
            name: name.into(),
            points,
            scatter: false,
            band: None,
        }
    }

    /// Circle markers at the points, not joined.
    pub fn scatter(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Self {
            scatter: true,
            ..Self::line(name, points)
        }
    }

    /// Adds a shaded band of `(x, lo, hi)` triples behind the series.
    pub fn with_band(mut self, band: Vec<(f64, f64, f64)>) -> Self {
        self.band = Some(band);
        self
    }
}

/// A dashed reference line through two points, shown across the whole panel.
#[derive(Clone, Debug, PartialEq)]
pub struct Reference {
    /// Legend entry, e.g. `y = x`.
    pub name: String,
    /// A point of the line.
    pub a: (f64, f64),
    /// Another point of the line.
    pub b: (f64, f64),
    /// Whether the panel's range includes the line (a level the reader compares the data
    /// with, such as a target accuracy, is always drawn; a direction such as y = x is not).
    pub widens: bool,
}

/// One set of axes and its series.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Panel {
    /// Title above the axes.
    pub title: String,
    /// Label of the horizontal axis.
    pub x_label: String,
    /// Label of the vertical axis.
    pub y_label: String,
    /// Scale of the horizontal axis.
    pub x_scale: Scale,
    /// Scale of the vertical axis.
    pub y_scale: Scale,
    /// Series in drawing order.
    pub series: Vec<Series>,
    /// Optional reference line; it does not widen the data range.
    pub reference: Option<Reference>,
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

    /// Sets the reference line through `a` and `b`, named `name` in the legend.
    pub fn with_reference_line(
        mut self,
        name: impl Into<String>,
        a: (f64, f64),
        b: (f64, f64),
    ) -> Self {
        self.reference = Some(Reference {
            name: name.into(),
            a,
            b,
            widens: false,
        });
        self
    }

    /// Sets a horizontal reference line at `y`, named `name` in the legend, which the
    /// panel's y range always includes (so a legend never lists a line that is not drawn).
    pub fn with_level(mut self, name: impl Into<String>, y: f64) -> Self {
        self.reference = Some(Reference {
            name: name.into(),
            a: (0.0, y),
            b: (1.0, y),
            widens: true,
        });
        self
    }

    /// The x values and y values the panel must show, on its scales.
    fn extent(&self) -> (Vec<f64>, Vec<f64>) {
        let (mut xs, mut ys) = (Vec::new(), Vec::new());
        for s in &self.series {
            for &(x, y) in &s.points {
                if self.x_scale.accepts(x) && self.y_scale.accepts(y) {
                    xs.push(x);
                    ys.push(y);
                }
            }
            for &(x, lo, hi) in s.band.iter().flatten() {
                if self.x_scale.accepts(x) {
                    xs.push(x);
                    ys.extend([lo, hi].into_iter().filter(|&v| self.y_scale.accepts(v)));
                }
            }
        }
        if let Some(r) = self.reference.as_ref().filter(|r| r.widens) {
            ys.extend(
                [r.a.1, r.b.1]
                    .into_iter()
                    .filter(|&v| self.y_scale.accepts(v)),
            );
        }
        (xs, ys)
    }
}

/// A figure: a title above a row of panels, and a legend column.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Figure {
    /// Title above all panels.
    pub title: Option<String>,
    /// Panels side by side.
    pub panels: Vec<Panel>,
    /// Whether all panels share one y range.
    pub shared_y: bool,
}

/// One entry of the legend column.
struct Entry {
    name: String,
    colour: RGBColor,
    scatter: bool,
    band: bool,
    dashed: bool,
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

    /// Appends a panel to the right.
    pub fn with_panel(mut self, panel: Panel) -> Self {
        self.panels.push(panel);
        self
    }

    /// Makes all panels share one y range.
    pub fn shared_y(mut self) -> Self {
        self.shared_y = true;
        self
    }

    /// Legend entries: every series name once, in order of appearance, then reference lines.
    fn legend(&self) -> Vec<Entry> {
        let mut entries: Vec<Entry> = Vec::new();
        for s in self.panels.iter().flat_map(|p| &p.series) {
            match entries.iter_mut().find(|e| e.name == s.name) {
                Some(e) => e.band |= s.band.is_some(),
                // Past the palette, its colours again, dashed: no two lines look alike.
                None => entries.push(Entry {
                    name: s.name.clone(),
                    colour: PALETTE[entries.len() % PALETTE.len()],
                    scatter: s.scatter,
                    band: s.band.is_some(),
                    dashed: entries.len() >= PALETTE.len(),
                }),
            }
        }
        for r in self.panels.iter().filter_map(|p| p.reference.as_ref()) {
            if !entries.iter().any(|e| e.name == r.name) {
                entries.push(Entry {
                    name: r.name.clone(),
                    colour: REFERENCE,
                    scatter: false,
                    band: false,
                    dashed: true,
                });
            }
        }
        entries
    }

    /// Renders the figure as an SVG document.
    pub fn to_svg(&self) -> Result<String> {
        let legend = self.legend();
        let longest = legend
            .iter()
            .map(|e| e.name.chars().count())
            .max()
            .unwrap_or(0);
        let legend_w = if legend.is_empty() {
            0
        } else {
            (44 + 8 * longest).min(260) as u32
        };
        let columns = self.panels.len().max(1) as u32;
        let title_h = if self.title.is_some() { TITLE_H } else { 0 };
        // Wide enough for the title too (17 px bold: about 9.5 px a character), the extra
        // width going to the legend column, so a long title is never cut at the edges.
        let title_w = self
            .title
            .as_ref()
            .map_or(0, |t| (9.5 * t.chars().count() as f64) as u32 + 40);
        let size = (
            (PANEL_W * columns + legend_w).max(title_w),
            PANEL_H + title_h,
        );
        let shared = self.shared_y.then(|| {
            let ys: Vec<f64> = self.panels.iter().flat_map(|p| p.extent().1).collect();
            let scale = self.panels.first().map_or(Scale::Linear, |p| p.y_scale);
            axis_range(scale, &ys)
        });

        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
            root.fill(&WHITE).map_err(plot_error)?;
            let body = match &self.title {
                Some(title) => {
                    let (top, body) = root.split_vertically(title_h);
                    top.draw(&Text::new(
                        title.clone(),
                        (size.0 as i32 / 2, 10),
                        (FONT, 17)
                            .into_font()
                            .style(FontStyle::Bold)
                            .color(&INK)
                            .pos(Pos::new(HPos::Center, VPos::Top)),
                    ))
                    .map_err(plot_error)?;
                    body
                }
                None => root.clone(),
            };
            let (plots, key) = body.split_horizontally(PANEL_W * columns);
            let areas = plots.split_evenly((1, columns as usize));
            for (panel, area) in self.panels.iter().zip(&areas) {
                draw_panel(area, panel, &legend, shared.clone())?;
            }
            draw_legend(&key, &legend)?;
            root.present().map_err(plot_error)?;
        }
        Ok(svg)
    }

    /// Writes the SVG document to `path`.
    pub fn write(&self, path: &Path) -> Result<()> {
        let svg = self.to_svg()?;
        crate::report::write_whole(path, svg.as_bytes())
    }
}

/// A drawing error as an `anyhow` error.
fn plot_error<E: std::error::Error + Send + Sync + 'static>(
    e: DrawingAreaErrorKind<E>,
) -> anyhow::Error {
    anyhow::anyhow!("cannot draw the figure: {e}")
}

/// The range of an axis showing `values` (already filtered for the scale), padded by 5 % (of
/// the decades on a log axis) and widened when degenerate.
fn axis_range(scale: Scale, values: &[f64]) -> Range<f64> {
    let to = |v: f64| if scale == Scale::Log10 { v.log10() } else { v };
    let from = |t: f64| {
        if scale == Scale::Log10 {
            10f64.powf(t)
        } else {
            t
        }
    };
    let (mut lo, mut hi) = values
        .iter()
        .map(|&v| to(v))
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), t| {
            (l.min(t), h.max(t))
        });
    if lo > hi {
        (lo, hi) = (0.0, 1.0);
    }
    let span = hi - lo;
    if span <= 1e-12 * lo.abs().max(hi.abs()).max(1e-300) {
        let d = if scale == Scale::Log10 || lo.abs() < 1e-300 {
            1.0
        } else {
            0.1 * lo.abs()
        };
        (lo, hi) = (lo - d, hi + d);
    }
    let pad = 0.05 * (hi - lo);
    from(lo - pad)..from(hi + pad)
}

/// How an axis writes its ticks, decided once for the whole axis so that its labels share
/// one style.
#[derive(Clone, Copy, Debug, PartialEq)]
struct TickStyle {
    /// Every tick as m×10ⁿ (10ⁿ for m = 1): the axis reaches below 10⁻³ or to 10⁵ and more.
    scientific: bool,
    /// Ticks this close to 0 are 0 (a linear axis's key points carry rounding, −1e−17 for 0).
    zero_below: f64,
    /// Whole numbers only (an axis of counts: rounds, steps, terms): no tick between them.
    integer: bool,
}

impl TickStyle {
    /// The style of an axis of `scale` over `range`.
    fn of(scale: Scale, range: &Range<f64>) -> Self {
        let (lo, hi) = (range.start.min(range.end), range.start.max(range.end));
        let largest = lo.abs().max(hi.abs());
        let scientific = match scale {
            Scale::Log10 => lo < 1e-3 * (1.0 - 1e-9) || hi >= 1e5,
            Scale::Linear => largest > 0.0 && !(1e-3..1e5).contains(&largest),
        };
        let zero_below = match scale {
            Scale::Log10 => 0.0,
            Scale::Linear => 1e-9 * (hi - lo),
        };
        Self {
            scientific,
            zero_below,
            integer: false,
        }
    }

    /// The style of a linear axis whose values are all whole numbers: ticks only at them.
    fn counting(self, values: &[f64], scale: Scale) -> Self {
        Self {
            integer: scale == Scale::Linear
                && !values.is_empty()
                && values.iter().all(|v| v.fract() == 0.0),
            ..self
        }
    }

    /// How many labels to ask for on an axis spanning `span`: at most 6, and on a counting
    /// axis no more than one per whole number (so the step is at least 1).
    fn labels(self, span: f64) -> usize {
        if self.integer {
            (span.floor() as usize + 1).clamp(2, 6)
        } else {
            6
        }
    }
}

/// A power of ten's exponent in superscript digits (10⁻⁶).
fn superscript(e: i64) -> String {
    e.to_string()
        .chars()
        .map(|c| match c {
            '-' => '⁻',
            d => ['⁰', '¹', '²', '³', '⁴', '⁵', '⁶', '⁷', '⁸', '⁹'][d as usize - '0' as usize],
        })
        .collect()
}

/// The shortest of a few fixed precisions that writes `v` to within 1e-9 of it (ticks are
/// round numbers).
fn compact(v: f64) -> String {
    (0..=4)
        .map(|p| format!("{v:.p$}"))
        .find(|s| {
            s.parse::<f64>()
                .is_ok_and(|x| (x - v).abs() <= 1e-9 * v.abs())
        })
        .unwrap_or_else(|| format!("{v:.4}"))
}

/// Tick label of `v` on an axis of `style`: decimals (0.01, 2, 500), or on an axis that needs
/// them powers of ten, every tick alike (5×10⁻⁹, 10⁻⁹).
fn tick_label(v: f64, style: TickStyle) -> String {
    if v == 0.0 || v.abs() <= style.zero_below {
        return "0".into();
    }
    if style.integer && (v - v.round()).abs() > 1e-9 * v.abs().max(1.0) {
        return String::new();
    }
    let sign = if v < 0.0 { "−" } else { "" };
    if style.scientific {
        let mut e = v.abs().log10().floor() as i64;
        let mut m = v.abs() / 10f64.powi(e as i32);
        // 9.9999… and 10 are 10: the mantissa stays in [1, 10).
        if (m - 10.0).abs() < 1e-9 {
            m = 1.0;
            e += 1;
        }
        if (m - 1.0).abs() < 1e-9 {
            return format!("{sign}10{}", superscript(e));
        }
        return format!("{sign}{}×10{}", compact(m), superscript(e));
    }
    format!("{sign}{}", compact(v.abs()))
}

/// A log axis over `r` with [`log_ticks`].
fn log(r: Range<f64>) -> impl AsRangedCoord<Value = f64, CoordDescType: ValueFormatter<f64>> {
    let ticks = log_ticks(&r);
    r.log_scale().with_key_points(ticks)
}

/// Ticks of a log axis over `r`: 1, 2 and 5 per decade over at most 2.5 decades, else
/// powers of ten, every k-th one so that at most 7 remain.
fn log_ticks(r: &Range<f64>) -> Vec<f64> {
    let (lo, hi) = (r.start.log10(), r.end.log10());
    let (first, last) = (lo.floor() as i32, hi.ceil() as i32);
    let inside = |v: f64| v >= r.start * (1.0 - 1e-12) && v <= r.end * (1.0 + 1e-12);
    if hi - lo <= 2.5 {
        return (first..=last)
            .flat_map(|e| [1.0, 2.0, 5.0].map(|m| m * 10f64.powi(e)))
            .filter(|&v| inside(v))
            .collect();
    }
    let step = ((last - first) as f64 / 7.0).ceil().max(1.0) as i32;
    (first..=last)
        .filter(|e| e.rem_euclid(step) == 0)
        .map(|e| 10f64.powi(e))
        .filter(|&v| inside(v))
        .collect()
}

/// Draws one panel into `area`.
fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    panel: &Panel,
    legend: &[Entry],
    shared_y: Option<Range<f64>>,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let (xs, ys) = panel.extent();
    let xr = axis_range(panel.x_scale, &xs);
    let yr = shared_y.unwrap_or_else(|| axis_range(panel.y_scale, &ys));
    let styles = (
        TickStyle::of(panel.x_scale, &xr).counting(&xs, panel.x_scale),
        TickStyle::of(panel.y_scale, &yr),
    );
    match (panel.x_scale, panel.y_scale) {
        (Scale::Linear, Scale::Linear) => draw_axes(area, (panel, legend, styles), xr, yr),
        (Scale::Linear, Scale::Log10) => draw_axes(area, (panel, legend, styles), xr, log(yr)),
        (Scale::Log10, Scale::Linear) => draw_axes(area, (panel, legend, styles), log(xr), yr),
        (Scale::Log10, Scale::Log10) => draw_axes(area, (panel, legend, styles), log(xr), log(yr)),
    }
}

/// Draws the axes, bands, series and reference line of a panel on coordinates `xr` × `yr`.
fn draw_axes<DB, X, Y>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    (panel, legend, (x_style, y_style)): (&Panel, &[Entry], (TickStyle, TickStyle)),
    xr: X,
    yr: Y,
) -> Result<()>
where
    DB: DrawingBackend,
    DB::ErrorType: 'static,
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    // The caption is drawn with an SVG text anchor rather than plotters' caption, whose
    // centring relies on an estimated text width that is wrong for λ, ² or −.
    let (head, area) = area.split_vertically(28);
    // Centred over the plotting area, which starts after the left margin and the y labels.
    // Labels such as 5×10⁻¹⁰ need more room than 0.5 beside the axis description.
    let y_labels = if y_style.scientific {
        Y_LABELS + 22
    } else {
        Y_LABELS
    };
    let centre = (head.dim_in_pixel().0 as i32 + MARGIN_LEFT + y_labels - MARGIN_RIGHT) / 2;
    head.draw(&Text::new(
        panel.title.clone(),
        (centre, 8),
        (FONT, 16)
            .into_font()
            .style(FontStyle::Bold)
            .color(&INK)
            .pos(Pos::new(HPos::Center, VPos::Top)),
    ))
    .map_err(plot_error)?;
    let x_span = panel
        .extent()
        .0
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &x| {
            (l.min(x), h.max(x))
        });
    let x_span = (x_span.1 - x_span.0).max(0.0);
    let mut chart = ChartBuilder::on(&area)
        .margin_top(4)
        .margin_left(MARGIN_LEFT)
        .margin_right(MARGIN_RIGHT)
        .margin_bottom(6)
        .x_label_area_size(42)
        .y_label_area_size(y_labels)
        .build_cartesian_2d(xr, yr)
        .map_err(plot_error)?;
    chart
        .configure_mesh()
        .x_desc(&panel.x_label)
        .y_desc(&panel.y_label)
        .x_labels(x_style.labels(x_span))
        .y_labels(7)
        .x_label_formatter(&|v| tick_label(*v, x_style))
        .y_label_formatter(&|v| tick_label(*v, y_style))
        .axis_desc_style((FONT, 15))
        .label_style((FONT, 14))
        .bold_line_style(RGBColor(0xe3, 0xe3, 0xe3))
        .light_line_style(TRANSPARENT)
        .axis_style(INK)
        .draw()
        .map_err(plot_error)?;

    let (x0, x1) = (chart.x_range().start, chart.x_range().end);
    let (y0, y1) = (chart.y_range().start, chart.y_range().end);
    let inside = |x: f64, y: f64| {
        panel.x_scale.accepts(x)
            && panel.y_scale.accepts(y)
            && (x0..=x1).contains(&x)
            && (y0..=y1).contains(&y)
    };
    let colour = |name: &str| {
        legend
            .iter()
            .find(|e| e.name == name)
            .map_or(INK, |e| e.colour)
    };
    let dashed = |name: &str| legend.iter().any(|e| e.name == name && e.dashed);

    for s in &panel.series {
        let Some(band) = &s.band else { continue };
        // Bands are clamped into the visible range (a lower percentile of 0 on a log axis
        // shows at the bottom edge) and broken where x or both bounds are missing.
        let clamp = |v: f64| {
            if panel.y_scale.accepts(v) {
                v.clamp(y0, y1)
            } else if v.is_finite() || v == f64::NEG_INFINITY {
                y0
            } else {
                y1
            }
        };
        for run in runs(band, |&(x, lo, hi)| {
            panel.x_scale.accepts(x) && !(lo.is_nan() && hi.is_nan())
        }) {
            let mut outline: Vec<(f64, f64)> =
                run.iter().map(|&(x, _, hi)| (x, clamp(hi))).collect();
            outline.extend(run.iter().rev().map(|&(x, lo, _)| (x, clamp(lo))));
            chart
                .draw_series(std::iter::once(Polygon::new(
                    outline,
                    colour(&s.name).mix(0.18).filled(),
                )))
                .map_err(plot_error)?;
        }
    }
    for s in &panel.series {
        let c = colour(&s.name);
        if s.scatter {
            chart
                .draw_series(
                    s.points
                        .iter()
                        .filter(|&&(x, y)| inside(x, y))
                        .map(|&p| Circle::new(p, 3, c.mix(0.85).filled())),
                )
                .map_err(plot_error)?;
        } else {
            for run in runs(&s.points, |&(x, y)| inside(x, y)) {
                // A run of one point joins nothing: it is drawn as a marker, or a series of
                // one value (one outer step, a point between gaps) would not show at all.
                if let [p] = run[..] {
                    chart
                        .draw_series(std::iter::once(Circle::new(p, 3, c.filled())))
                        .map_err(plot_error)?;
                    continue;
                }
                if dashed(&s.name) {
                    chart
                        .draw_series(DashedLineSeries::new(
                            run.iter().copied(),
                            8,
                            4,
                            c.stroke_width(2),
                        ))
                        .map_err(plot_error)?;
                } else {
                    chart
                        .draw_series(LineSeries::new(run.iter().copied(), c.stroke_width(2)))
                        .map_err(plot_error)?;
                }
            }
        }
    }
    if let Some(r) = &panel.reference {
        let (dx, dy) = (r.b.0 - r.a.0, r.b.1 - r.a.1);
        if dx != 0.0 && dx.is_finite() && dy.is_finite() {
            // Sampled across the x range (evenly on the axis's own scale) and cut to the
            // y range, so the line spans the panel whatever the scales.
            let samples: Vec<(f64, f64)> = (0..=400)
                .map(|i| {
                    let t = i as f64 / 400.0;
                    let x = match panel.x_scale {
                        Scale::Linear => x0 + t * (x1 - x0),
                        Scale::Log10 => x0 * (x1 / x0).powf(t),
                    };
                    (x, r.a.1 + (x - r.a.0) * dy / dx)
                })
                .collect();
            for run in runs(&samples, |&(x, y)| inside(x, y)) {
                chart
                    .draw_series(DashedLineSeries::new(
                        run.iter().copied(),
                        6,
                        4,
                        REFERENCE.stroke_width(1),
                    ))
                    .map_err(plot_error)?;
            }
        }
    }
    Ok(())
}

/// Maximal runs of consecutive items that satisfy `keep` (a line breaks at the others).
fn runs<T>(items: &[T], keep: impl Fn(&T) -> bool) -> impl Iterator<Item = &[T]> {
    items.split(move |t| !keep(t)).filter(|r| !r.is_empty())
}

/// Draws the legend column.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    legend: &[Entry],
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    for (i, e) in legend.iter().enumerate() {
        let y = 40 + 24 * i as i32;
        let (a, b) = ((6, y), (34, y));
        if e.band {
            area.draw(&Rectangle::new(
                [(6, y - 7), (34, y + 7)],
                e.colour.mix(0.18).filled(),
            ))
            .map_err(plot_error)?;
        }
        if e.scatter {
            area.draw(&Circle::new((20, y), 3, e.colour.mix(0.85).filled()))
                .map_err(plot_error)?;
        } else if e.dashed {
            // A reference line is thin, a series as thick as the solid ones.
            let width = if e.colour == REFERENCE { 1 } else { 2 };
            area.draw(&PathElement::new(
                vec![a, (16, y)],
                e.colour.stroke_width(width),
            ))
            .map_err(plot_error)?;
            area.draw(&PathElement::new(
                vec![(24, y), b],
                e.colour.stroke_width(width),
            ))
            .map_err(plot_error)?;
        } else {
            area.draw(&PathElement::new(vec![a, b], e.colour.stroke_width(2)))
                .map_err(plot_error)?;
        }
        area.draw(&Text::new(
            e.name.clone(),
            (40, y),
            (FONT, 15)
                .into_font()
                .color(&INK)
                .pos(Pos::new(HPos::Left, VPos::Center)),
        ))
        .map_err(plot_error)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_points_are_dropped_not_drawn() {
        let panel = Panel::new("p", "x", "y")
            .with_scales(Scale::Linear, Scale::Log10)
            .with_series(
                Series::line(
                    "a",
                    vec![(0.0, 1.0), (1.0, f64::NAN), (2.0, -1.0), (3.0, 1e-3)],
                )
                .with_band(vec![(0.0, 0.0, 2.0), (3.0, f64::NAN, f64::INFINITY)]),
            );
        let svg = Figure::new()
            .with_title("t")
            .with_panel(panel)
            .with_panel(Panel::new("empty", "x", "y"))
            .shared_y()
            .to_svg()
            .unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
    }

    /// A line of one point (or a point between gaps) is drawn as a marker, not nothing.
    #[test]
    fn lonely_points_of_a_line_are_drawn() {
        let svg = |points: Vec<(f64, f64)>| {
            Figure::new()
                .with_title("t")
                .with_panel(Panel::new("p", "x", "y").with_series(Series::line("a", points)))
                .to_svg()
                .unwrap()
        };
        let circles = |s: &str| s.matches("<circle").count();
        // The legend has one circle-free entry for a line; the point adds one circle.
        let base = circles(&svg(vec![(0.0, 1.0), (1.0, 2.0)]));
        assert_eq!(circles(&svg(vec![(1.0, 0.5)])), base + 1);
        assert_eq!(
            circles(&svg(vec![(0.0, 1.0), (1.0, f64::NAN), (2.0, 2.0)])),
            base + 2
        );
    }

    #[test]
    fn one_colour_per_name_across_panels() {
        let p = |names: &[&str]| {
            names.iter().fold(Panel::new("p", "x", "y"), |p, n| {
                p.with_series(Series::line(*n, vec![(0.0, 0.0), (1.0, 1.0)]))
            })
        };
        let fig = Figure::new()
            .with_panel(p(&["a", "b"]))
            .with_panel(p(&["b", "c"]).with_reference_line("y = x", (0.0, 0.0), (1.0, 1.0)));
        let legend = fig.legend();
        let names: Vec<&str> = legend.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c", "y = x"]);
        assert!(legend[3].dashed && legend[0].colour != legend[1].colour);
        // More series than colours: the palette again, dashed, so no two entries look alike.
        let names: Vec<String> = (0..13).map(|k| format!("s{k}")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let legend = Figure::new().with_panel(p(&refs)).legend();
        for (i, a) in legend.iter().enumerate() {
            assert_eq!(a.dashed, i >= PALETTE.len(), "{}", a.name);
            for b in &legend[i + 1..] {
                assert!(
                    (a.colour, a.dashed) != (b.colour, b.dashed),
                    "{} {}",
                    a.name,
                    b.name
                );
            }
        }
    }

    #[test]
    fn ticks_read_as_numbers() {
        let wide_log = TickStyle::of(Scale::Log10, &(1e-10..1.0));
        assert!(wide_log.scientific);
        // One style per axis: 10⁻⁶ and 5×10⁻⁹ together, never 5e−9 beside 10⁻⁹.
        assert_eq!(tick_label(1e-6, wide_log), "10⁻⁶");
        assert_eq!(tick_label(5e-9, wide_log), "5×10⁻⁹");
        assert_eq!(tick_label(1.0, wide_log), "10⁰");
        assert_eq!(tick_label(0.01, wide_log), "10⁻²");
        let big = TickStyle::of(Scale::Log10, &(1.0..2e5));
        assert_eq!(tick_label(1000.0, big), "10³");
        let plain_log = TickStyle::of(Scale::Log10, &(0.01..10.0));
        assert!(!plain_log.scientific);
        assert_eq!(tick_label(0.5, plain_log), "0.5");
        assert_eq!(tick_label(0.01, plain_log), "0.01");
        let linear = TickStyle::of(Scale::Linear, &(-0.002..1000.0));
        assert_eq!(tick_label(1000.0, linear), "1000");
        assert_eq!(tick_label(-0.001, linear), "−0.001");
        assert_eq!(tick_label(20.0, linear), "20");
        // A key point at 0 with rounding in it is 0.
        let tiny = TickStyle::of(Scale::Linear, &(-4e-5..6e-5));
        assert_eq!(tick_label(-1e-17, tiny), "0");
        assert_eq!(tick_label(2e-5, tiny), "2×10⁻⁵");
        assert_eq!(tick_label(-4e-5, tiny), "−4×10⁻⁵");
        // An axis of counts (outer steps 0..3) has no tick at 0.5.
        let steps = TickStyle::of(Scale::Linear, &(-0.15..3.15))
            .counting(&[0.0, 1.0, 2.0, 3.0], Scale::Linear);
        assert_eq!(tick_label(0.5, steps), "");
        assert_eq!(tick_label(2.0, steps), "2");
        assert_eq!(steps.labels(3.0), 4);
        let rates = TickStyle::of(Scale::Linear, &(0.0..1.0)).counting(&[0.0, 0.5], Scale::Linear);
        assert_eq!(tick_label(0.5, rates), "0.5");
        assert_eq!(log_ticks(&(0.03..3.0)), [0.05, 0.1, 0.2, 0.5, 1.0, 2.0]);
        assert_eq!(log_ticks(&(1e-3..20.0)), [1e-3, 1e-2, 1e-1, 1.0, 10.0]);
        let many = log_ticks(&(1e-16..10.0));
        assert!(many.len() <= 7 && many.contains(&1.0), "{many:?}");
    }

    #[test]
    fn ranges_are_padded_and_never_empty() {
        let r = axis_range(Scale::Linear, &[]);
        assert!(r.start < r.end);
        let r = axis_range(Scale::Log10, &[5.0]);
        assert!(r.start > 0.0 && r.start < 5.0 && r.end > 5.0);
        let r = axis_range(Scale::Linear, &[0.0, 10.0]);
        assert!((r.start + 0.5).abs() < 1e-12 && (r.end - 10.5).abs() < 1e-12);
    }
}
