//! The classic Prometheus text exposition (0.0.4) the metrics file is written in
//! (docs/metrics.md): families with their `# HELP` and `# TYPE` once, their samples
//! together, labels and help escaped, values spelled as Prometheus spells them. Apart
//! from the picture, since the format knows nothing of runs.

use std::fmt::Write as _;

/// The `# TYPE` of a family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricType {
    Gauge,
    Counter,
}

impl MetricType {
    fn as_str(self) -> &'static str {
        match self {
            MetricType::Gauge => "gauge",
            MetricType::Counter => "counter",
        }
    }
}

/// One metric family: a name, its help and type, and its samples.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    name: String,
    help: String,
    kind: MetricType,
    samples: Vec<Sample>,
}

#[derive(Debug, Clone, PartialEq)]
struct Sample {
    labels: Vec<(String, String)>,
    value: f64,
}

impl Family {
    /// Adds one sample with `labels` (name, value).
    pub fn sample(&mut self, labels: &[(&str, &str)], value: f64) -> &mut Family {
        debug_assert!(
            labels.iter().all(|(name, _)| valid_label_name(name)),
            "bad label name in {labels:?}"
        );
        self.samples.push(Sample {
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            value,
        });
        self
    }
}

/// Metric families in the order they were first named.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Exposition {
    families: Vec<Family>,
}

impl Exposition {
    pub fn new() -> Exposition {
        Exposition::default()
    }

    /// The family `name`, created with `kind` and `help` the first time it is named;
    /// naming it again adds to the same family, so its samples stay together under
    /// one `# HELP` and `# TYPE`.
    pub fn family(&mut self, name: &str, kind: MetricType, help: &str) -> &mut Family {
        debug_assert!(valid_metric_name(name), "bad metric name {name:?}");
        let at = match self.families.iter().position(|f| f.name == name) {
            Some(at) => at,
            None => {
                self.families.push(Family {
                    name: name.to_owned(),
                    help: help.to_owned(),
                    kind,
                    samples: Vec::new(),
                });
                self.families.len() - 1
            }
        };
        &mut self.families[at]
    }

    pub fn gauge(&mut self, name: &str, help: &str) -> &mut Family {
        self.family(name, MetricType::Gauge, help)
    }

    /// The text exposition. Families without samples are left out.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for family in self.families.iter().filter(|f| !f.samples.is_empty()) {
            // Writing to a String cannot fail.
            let _ = writeln!(out, "# HELP {} {}", family.name, escape_help(&family.help));
            let _ = writeln!(out, "# TYPE {} {}", family.name, family.kind.as_str());
            for sample in &family.samples {
                out.push_str(&family.name);
                if !sample.labels.is_empty() {
                    out.push('{');
                    for (i, (name, value)) in sample.labels.iter().enumerate() {
                        if i > 0 {
                            out.push(',');
                        }
                        let _ = write!(out, "{name}=\"{}\"", escape_label_value(value));
                    }
                    out.push('}');
                }
                let _ = writeln!(out, " {}", format_value(sample.value));
            }
        }
        out
    }
}

/// Label values escape backslash, double quote and newline.
pub fn escape_label_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// Help text escapes backslash and newline (a double quote is fine there).
fn escape_help(help: &str) -> String {
    help.replace('\\', "\\\\").replace('\n', "\\n")
}

/// Whole numbers without a fraction, the special values as Prometheus spells them.
pub(super) fn format_value(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_owned()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.to_owned()
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

pub(super) fn valid_metric_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

pub(super) fn valid_label_name(name: &str) -> bool {
    let mut chars = name.chars();
    !name.starts_with("__")
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}
