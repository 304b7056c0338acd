//! The quota-costs.toml a test writes, built up fluently: the test names only the
//! numbers its scenario turns on, and every file has the one layout the loader's
//! line numbers in the configuration tests count on.

/// A quota-costs.toml: the budget, its costs, what each call does while the limiter
/// is down, more buckets and narrower limits, rendered in that order by
/// [`Costs::to_toml`].
#[derive(Debug, Clone)]
pub struct Costs {
    key: String,
    quota: u64,
    ceiling: u64,
    window: String,
    costs: Vec<(String, u64)>,
    when_limiter_down: Vec<(String, String)>,
    buckets: Vec<Bucket>,
    limits: Vec<Limit>,
}

impl Costs {
    /// The shipped budget (quota 10 000, ceiling 9 500 over 24h) under the key
    /// `test`, with nothing costed yet.
    pub fn new() -> Costs {
        Costs {
            key: "test".to_owned(),
            quota: 10_000,
            ceiling: 9_500,
            window: "24h".to_owned(),
            costs: Vec::new(),
            when_limiter_down: Vec::new(),
            buckets: Vec::new(),
            limits: Vec::new(),
        }
    }

    /// [`Costs::new`] with the four calls a run makes at YouTube's costs
    /// (search.list 100, the others 1), and search.list denied while the limiter is
    /// down, the chart's calls allowed.
    pub fn youtube() -> Costs {
        Costs::new()
            .cost("videos.list", 1)
            .cost("search.list", 100)
            .cost("channels.list", 1)
            .cost("videoCategories.list", 1)
            .when_limiter_down("videos.list", "allow")
            .when_limiter_down("videoCategories.list", "allow")
            .when_limiter_down("search.list", "deny")
    }

    /// [`Costs::youtube`] with every call at 1 unit, searches included: scenarios that
    /// count calls and units as one.
    pub fn one_unit_each() -> Costs {
        Costs::youtube().cost("search.list", 1)
    }

    /// `budget.key`: the shared pool's name, so that scenarios on one Redis keep
    /// apart.
    pub fn key(mut self, key: impl Into<String>) -> Costs {
        self.key = key.into();
        self
    }

    pub fn quota(mut self, units: u64) -> Costs {
        self.quota = units;
        self
    }

    pub fn ceiling(mut self, units: u64) -> Costs {
        self.ceiling = units;
        self
    }

    pub fn window(mut self, window: &str) -> Costs {
        window.clone_into(&mut self.window);
        self
    }

    /// A call of `method` costs `units` of the budget: a new line of `[costs]`, or
    /// the method's line changed in place.
    pub fn cost(mut self, method: &str, units: u64) -> Costs {
        set(&mut self.costs, method, units);
        self
    }

    /// What a call of `method` does while the limiter is down: `"allow"` or `"deny"`
    /// (or any word, for a test of the refusal).
    pub fn when_limiter_down(mut self, method: &str, policy: &str) -> Costs {
        set(&mut self.when_limiter_down, method, policy.to_owned());
        self
    }

    /// A `[[bucket]]` after the ones already added.
    pub fn bucket(mut self, bucket: Bucket) -> Costs {
        self.buckets.push(bucket);
        self
    }

    /// A `[[limit]]` after the ones already added.
    pub fn limit(mut self, limit: Limit) -> Costs {
        self.limits.push(limit);
        self
    }

    /// The file's text.
    pub fn to_toml(&self) -> String {
        let mut text = format!(
            "[budget]\nkey = \"{}\"\nquota = {}\nceiling = {}\nwindow = \"{}\"\n\n[costs]\n",
            self.key, self.quota, self.ceiling, self.window
        );
        for (method, units) in &self.costs {
            text += &format!("\"{method}\" = {units}\n");
        }
        if !self.when_limiter_down.is_empty() {
            text += "\n[when_limiter_down]\n";
            for (method, policy) in &self.when_limiter_down {
                text += &format!("\"{method}\" = \"{policy}\"\n");
            }
        }
        for bucket in &self.buckets {
            text += &bucket.to_toml();
        }
        for limit in &self.limits {
            text += &limit.to_toml();
        }
        text
    }
}

impl From<Costs> for String {
    fn from(costs: Costs) -> String {
        costs.to_toml()
    }
}

/// A `[[bucket]]` of a quota-costs.toml: a budget of its own for its methods.
#[derive(Debug, Clone)]
pub struct Bucket {
    name: String,
    quota: u64,
    ceiling: u64,
    window: String,
    costs: Vec<(String, u64)>,
}

impl Bucket {
    /// A bucket named `name`, with the budget's defaults of [`Costs::new`] and no
    /// methods yet.
    pub fn new(name: &str) -> Bucket {
        Bucket {
            name: name.to_owned(),
            quota: 10_000,
            ceiling: 9_500,
            window: "24h".to_owned(),
            costs: Vec::new(),
        }
    }

    pub fn quota(mut self, units: u64) -> Bucket {
        self.quota = units;
        self
    }

    pub fn ceiling(mut self, units: u64) -> Bucket {
        self.ceiling = units;
        self
    }

    pub fn window(mut self, window: &str) -> Bucket {
        window.clone_into(&mut self.window);
        self
    }

    /// A call of `method` costs `units` of this bucket.
    pub fn cost(mut self, method: &str, units: u64) -> Bucket {
        set(&mut self.costs, method, units);
        self
    }

    fn to_toml(&self) -> String {
        let costs: Vec<String> = self
            .costs
            .iter()
            .map(|(method, units)| format!("\"{method}\" = {units}"))
            .collect();
        format!(
            "\n[[bucket]]\nname = \"{}\"\nquota = {}\nceiling = {}\nwindow = \"{}\"\ncosts = {{ {} }}\n",
            self.name,
            self.quota,
            self.ceiling,
            self.window,
            costs.join(", ")
        )
    }
}

/// A `[[limit]]` of a quota-costs.toml: a narrower policy on some methods.
#[derive(Debug, Clone)]
pub struct Limit {
    name: String,
    methods: Vec<String>,
    max: u64,
    window: String,
    per: Option<String>,
}

impl Limit {
    /// A limit named `name` of at most `max` over `window`, on no methods yet, per
    /// unit (the loader's default when `per` is not written).
    pub fn new(name: &str, max: u64, window: &str) -> Limit {
        Limit {
            name: name.to_owned(),
            methods: Vec::new(),
            max,
            window: window.to_owned(),
            per: None,
        }
    }

    /// The limit counts calls of `method` too.
    pub fn method(mut self, method: &str) -> Limit {
        self.methods.push(method.to_owned());
        self
    }

    /// `per = "call"` or `"unit"`, written out.
    pub fn per(mut self, per: &str) -> Limit {
        self.per = Some(per.to_owned());
        self
    }

    fn to_toml(&self) -> String {
        let methods: Vec<String> = self.methods.iter().map(|m| format!("\"{m}\"")).collect();
        let mut text = format!(
            "\n[[limit]]\nname = \"{}\"\nmethods = [{}]\nmax = {}\nwindow = \"{}\"\n",
            self.name,
            methods.join(", "),
            self.max,
            self.window
        );
        if let Some(per) = &self.per {
            text += &format!("per = \"{per}\"\n");
        }
        text
    }
}

/// Sets `key` to `value` in an ordered table: in place when it is there, else last.
fn set<V>(table: &mut Vec<(String, V)>, key: &str, value: V) {
    match table.iter_mut().find(|(k, _)| k == key) {
        Some((_, v)) => *v = value,
        None => table.push((key.to_owned(), value)),
    }
}

/// The builder writes the one layout the configuration tests count lines in.
#[test]
fn the_youtube_costs_keep_their_layout() {
    assert_eq!(
        Costs::youtube().quota(200).ceiling(120).to_toml(),
        r#"[budget]
key = "test"
quota = 200
ceiling = 120
window = "24h"

[costs]
"videos.list" = 1
"search.list" = 100
"channels.list" = 1
"videoCategories.list" = 1

[when_limiter_down]
"videos.list" = "allow"
"videoCategories.list" = "allow"
"search.list" = "deny"
"#
    );
}
