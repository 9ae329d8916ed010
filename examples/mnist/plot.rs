//! The training curve as CSV and as a PNG chart drawn with `plotters`:
//! train loss on the left, train and test accuracy on the right, with
//! axes, labels and a legend.

use plotters::prelude::*;
use std::path::Path;

/// One row of the curve.
#[derive(Clone, Copy, Debug)]
pub struct EpochStats {
    pub epoch: u64,
    pub train_loss: f64,
    pub train_accuracy: f64,
    pub test_accuracy: f64,
    pub seconds: f64,
}

/// Writes `epoch,train_loss,train_accuracy,test_accuracy,seconds`.
pub fn write_csv(path: &Path, rows: &[EpochStats]) -> std::io::Result<()> {
    let mut s = String::from("epoch,train_loss,train_accuracy,test_accuracy,seconds\n");
    for r in rows {
        s += &format!(
            "{},{:.6},{:.6},{:.6},{:.3}\n",
            r.epoch, r.train_loss, r.train_accuracy, r.test_accuracy, r.seconds
        );
    }
    std::fs::write(path, s)
}

/// The system's DejaVu Sans (Debian's fonts-dejavu-core), registered with
/// plotters' pure-Rust text renderer once.
fn register_font() -> Result<(), Box<dyn std::error::Error>> {
    static FONT: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    FONT.get_or_init(|| {
        let path = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
        let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
        plotters::style::register_font("sans-serif", FontStyle::Normal, Box::leak(bytes.into()))
            .map_err(|_| format!("{path}: not a font"))
    })
    .clone()
    .map_err(Into::into)
}

/// Epoch ticks: whole numbers only.
fn epoch_label(x: &f64) -> String {
    if (x - x.round()).abs() < 1e-9 {
        format!("{x:.0}")
    } else {
        String::new()
    }
}

/// Draws train loss (left) and train/test accuracy (right) per epoch.
pub fn write_png(path: &Path, rows: &[EpochStats]) -> Result<(), Box<dyn std::error::Error>> {
    register_font()?;
    let root = BitMapBackend::new(path, (900, 380)).into_drawing_area();
    root.fill(&WHITE)?;
    let (left, right) = root.split_horizontally(450);
    let epochs = (
        rows.first().map_or(1, |r| r.epoch),
        rows.last().map_or(1, |r| r.epoch),
    );
    let x_range = epochs.0 as f64 - 0.5..epochs.1 as f64 + 0.5;
    let series = |f: fn(&EpochStats) -> f64| -> Vec<(f64, f64)> {
        rows.iter().map(|r| (r.epoch as f64, f(r))).collect()
    };

    let loss = series(|r| r.train_loss);
    let max_loss = loss.iter().map(|p| p.1).fold(0.0, f64::max) * 1.1;
    let mut chart = ChartBuilder::on(&left)
        .caption("train loss", ("sans-serif", 20))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(50)
        .build_cartesian_2d(x_range.clone(), 0.0..max_loss.max(1e-3))?;
    chart
        .configure_mesh()
        .light_line_style(WHITE)
        .x_label_formatter(&epoch_label)
        .x_desc("epoch")
        .y_desc("cross-entropy")
        .draw()?;
    chart
        .draw_series(LineSeries::new(loss.clone(), BLUE.stroke_width(2)).point_size(3))?
        .label("train loss")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLUE.stroke_width(2)));
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .draw()?;

    let (train, test) = (series(|r| r.train_accuracy), series(|r| r.test_accuracy));
    let low = train.iter().chain(&test).map(|p| p.1).fold(1.0, f64::min);
    let mut chart = ChartBuilder::on(&right)
        .caption("accuracy", ("sans-serif", 20))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(50)
        .build_cartesian_2d(x_range, (low - 0.02).max(0.0)..1.0)?;
    chart
        .configure_mesh()
        .light_line_style(WHITE)
        .x_label_formatter(&epoch_label)
        .x_desc("epoch")
        .y_desc("accuracy")
        .draw()?;
    chart
        .draw_series(LineSeries::new(train, BLUE.stroke_width(2)).point_size(3))?
        .label("train")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLUE.stroke_width(2)));
    chart
        .draw_series(LineSeries::new(test, RED.stroke_width(2)).point_size(3))?
        .label("test")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], RED.stroke_width(2)));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .draw()?;
    root.present()?;
    Ok(())
}
