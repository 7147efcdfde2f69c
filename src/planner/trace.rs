//! The whole `plan` command as one library call: read a trace, plan it
//! within a wall-clock budget, validate, write, with each phase timed.
//!
//! [`plan_trace`] takes the moment the command started and its budget; the
//! deadline covers everything from there: reading and parsing the file,
//! liveness (graphs), the bound and time sections, the constructive passes,
//! the decision search, the local search, validation, and writing the
//! solution ([`TracePlan::write_csv`]). The searches get what the fixed
//! phases leave, less a reserve for validation and output: the validator's
//! time orders are built (and timed) before the passes, and the reserve is
//! a multiple of that time, since its check is the same kind of work (a
//! graph keeps twice the bound's time). Two thirds of the rest go to the
//! decision search, the rest to the local search. The first
//! constructive pass always completes (the online best fit above 32 768
//! buffers, else the skyline, hurried), so a budget below the fixed
//! phases' cost is overrun by that much and no more; every other pass is
//! skipped or cut, and the JSON's `"passes"` says which ran.

use std::fmt;
use std::path::Path;
use std::time::{Duration, Instant};

use super::budget::Budget;
use super::csv::{parse_csv, write_csv, CsvError};
use super::graph::{PlanError, ValueId};
use super::interval::Buffer;
use super::json::{parse_graph_json, JsonError};
use super::pack::{finish, local, search, start, Problem, Solution, SolveOptions};
use super::plan::{graph_slots, validate};
use super::validate::{check as check_placement, TimeOrders, ValidateError};

/// Why [`plan_trace`] failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum TraceError {
    /// The file could not be read or written.
    Io(std::io::Error),
    /// A malformed CSV trace.
    Csv(CsvError),
    /// A malformed JSON graph.
    Json(JsonError),
    /// A graph or trace the planner refuses (bad alignment, overflow...).
    Plan(PlanError),
    /// Some values of the graph have symbolic sizes: nothing to plan yet.
    Deferred {
        /// Their names.
        names: Vec<String>,
    },
    /// The plan failed validation (a planner bug; never expected).
    Invalid(ValidateError),
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TraceError::Io(e) => write!(f, "{e}"),
            TraceError::Csv(e) => write!(f, "{e}"),
            TraceError::Json(e) => write!(f, "{e}"),
            TraceError::Plan(e) => write!(f, "{e}"),
            TraceError::Deferred { names } => {
                write!(f, "deferred: symbolic sizes for {}", names.join(", "))
            }
            TraceError::Invalid(e) => write!(f, "invalid plan: {e}"),
        }
    }
}

impl std::error::Error for TraceError {}

/// Wall time of each phase of [`plan_trace`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PhaseTimes {
    /// Reading the file.
    pub read: Duration,
    /// Parsing it (and, for a graph, liveness and in-place slots).
    pub parse: Duration,
    /// Checking the buffers, the lower bound and the time sections.
    pub bound: Duration,
    /// The constructive passes (skyline, first fit, best fit).
    pub constructive: Duration,
    /// The decision search.
    pub search: Duration,
    /// The local search over skyline orders.
    pub local: Duration,
    /// Validating the result.
    pub validate: Duration,
    /// Writing the solution ([`TracePlan::write_csv`]).
    pub write: Duration,
}

/// A planned trace: one row per buffer (a CSV line, or a slot of a graph).
#[derive(Clone, Debug)]
pub struct TracePlan {
    /// Each buffer's id (a graph's slot is named by its values, `+`-joined).
    pub ids: Vec<String>,
    /// The buffers that were planned.
    pub buffers: Vec<Buffer>,
    /// Offsets, height, bound, greedy-by-size's height and the like.
    pub solution: Solution,
    /// Where the time went.
    pub phases: PhaseTimes,
}

/// The deadline of one command.
struct Clock {
    deadline: Instant,
}

impl Clock {
    /// A callback that says "stop" from `when` on.
    fn until(when: Instant) -> impl Fn() -> bool {
        move || Instant::now() >= when
    }
}

/// Plans the trace at `path` (MiniMalloc's CSV, or the JSON graph format
/// when the name ends in `.json` or the text starts with `{`) so that the
/// whole command, begun at `started`, takes about `budget` (see the module
/// docs).
///
/// ```
/// use std::time::{Duration, Instant};
/// use warmarena::planner::plan_trace;
/// let path = std::env::temp_dir().join(format!("warmarena-doc-{}.csv", std::process::id()));
/// std::fs::write(&path, "id,lower,upper,size\na,0,2,8\nb,1,3,8\nc,2,4,8\n").unwrap();
/// let plan = plan_trace(&path, Instant::now(), Duration::from_millis(100)).unwrap();
/// assert_eq!(plan.solution.placement.height, 16);
/// assert!(plan.solution.optimal);
/// assert!(plan.json("t.csv", Instant::now()).contains("\"height\": 16"));
/// std::fs::remove_file(&path).unwrap();
/// ```
pub fn plan_trace(
    path: &Path,
    started: Instant,
    budget: Duration,
) -> Result<TracePlan, TraceError> {
    let t = Instant::now();
    let text = std::fs::read_to_string(path).map_err(TraceError::Io)?;
    let read = t.elapsed();
    let json = path.extension().is_some_and(|e| e == "json");
    let mut plan = plan_trace_text(&text, json, started, budget)?;
    plan.phases.read = read;
    Ok(plan)
}

/// [`plan_trace`] on text already read: a JSON graph when `json` or when
/// it starts with `{`, else MiniMalloc's CSV.
///
/// ```
/// use std::time::{Duration, Instant};
/// use warmarena::planner::plan_trace_text;
/// let text = "id,lower,upper,size\na,0,2,8\nb,1,3,8\n";
/// let plan = plan_trace_text(text, false, Instant::now(), Duration::from_millis(50)).unwrap();
/// assert_eq!(plan.solution.placement.height, 16);
/// assert_eq!(plan.ids, ["a", "b"]);
/// ```
pub fn plan_trace_text(
    text: &str,
    json: bool,
    started: Instant,
    budget: Duration,
) -> Result<TracePlan, TraceError> {
    let clock = Clock {
        deadline: started + budget,
    };
    let mut phases = PhaseTimes::default();
    let t = Instant::now();
    if json || text.trim_start().starts_with('{') {
        let g = parse_graph_json(text).map_err(TraceError::Json)?;
        let size = |v: ValueId| g.sizes.get(v.index()).copied().flatten();
        let align = g.alignment.unwrap_or(64);
        let slots = match graph_slots(&g.graph, &g.views, &g.hints, &size, align)
            .map_err(TraceError::Plan)?
        {
            Ok(slots) => slots,
            Err(unknown) => {
                let names = unknown.iter().map(|v| g.names[v.index()].clone()).collect();
                return Err(TraceError::Deferred { names });
            }
        };
        phases.parse = t.elapsed();
        let solution = pack(&slots.bufs, &clock, &mut phases, false)?;
        let buffers = slots.bufs.clone();
        let t = Instant::now();
        let plan = slots.into_plan(&solution);
        validate(&g.graph, &g.views, &plan, size).map_err(TraceError::Invalid)?;
        phases.validate += t.elapsed();
        // One row per slot, named by the values it backs.
        let mut ids = vec![String::new(); plan.slots.len()];
        for (v, s) in plan.slot_of.iter().enumerate() {
            if let (Some(s), true) = (s, g.views.source_of(ValueId(v as u32)).is_none()) {
                let id = &mut ids[s.0 as usize];
                if !id.is_empty() {
                    id.push('+');
                }
                id.push_str(&g.names[v]);
            }
        }
        Ok(TracePlan {
            ids,
            buffers,
            solution,
            phases,
        })
    } else {
        let inst = parse_csv(text).map_err(TraceError::Csv)?;
        phases.parse = t.elapsed();
        let solution = pack(&inst.buffers, &clock, &mut phases, true)?;
        Ok(TracePlan {
            ids: inst.ids,
            buffers: inst.buffers,
            solution,
            phases,
        })
    }
}

/// The packing phases against the clock, then validation when `check`.
fn pack(
    bufs: &[Buffer],
    clock: &Clock,
    phases: &mut PhaseTimes,
    check: bool,
) -> Result<Solution, TraceError> {
    let t = Instant::now();
    let p = Problem::new(bufs).map_err(|e| TraceError::Plan(e.into()))?;
    phases.bound = t.elapsed();
    // The validator's time orders do not depend on the placement: built
    // now, they also measure what its check will cost.
    let t = Instant::now();
    let orders = check.then(|| TimeOrders::new(bufs));
    let prepared = t.elapsed();
    let reserve = match orders {
        Some(_) => reserve(prepared, phases.parse),
        None => phases.bound * 2 + phases.parse / 4,
    };
    let end = clock
        .deadline
        .checked_sub(reserve)
        .unwrap_or(clock.deadline);
    let work_stop = Clock::until(end);
    let t = Instant::now();
    let mut st = start(&p, Some(&work_stop));
    phases.constructive = t.elapsed();
    let now = Instant::now();
    let search_stop = Clock::until(now + end.saturating_duration_since(now) * 2 / 3);
    let budget = Budget {
        max_nodes: u64::MAX,
        stop: Some(&search_stop),
    };
    search(&p, &mut st, &SolveOptions::default(), u64::MAX, &budget);
    phases.search = now.elapsed();
    let t = Instant::now();
    let budget = Budget {
        max_nodes: u64::MAX,
        stop: Some(&work_stop),
    };
    local(&p, &mut st, u64::MAX, &budget);
    phases.local = t.elapsed();
    let sol = finish(&p, st);
    if let Some(orders) = orders {
        let t = Instant::now();
        check_placement(
            bufs,
            &orders,
            &sol.placement.offsets,
            sol.placement.height,
            1,
            |i| i,
        )
        .map_err(TraceError::Invalid)?;
        phases.validate = prepared + t.elapsed();
    }
    Ok(sol)
}

/// Time kept after the search for validation and output, sized from the
/// same kind of work measured before it: `prepared`, what the validator's
/// two time sorts took (its check is one more such sort, a few gathers
/// and a linear sweep: at most `CHECK_PER_PREPARED` times that), and
/// `parse` (writing the CSV back costs a fraction of reading it).
fn reserve(prepared: Duration, parse: Duration) -> Duration {
    prepared * CHECK_PER_PREPARED + parse / 4
}

/// See [`reserve`]: the check's cost over the time sorts' was 1.3 to 3.4
/// over the scaling series of docs/benchmarks.md (train and held-out, two
/// runs each, load 4); rounded up.
const CHECK_PER_PREPARED: u32 = 4;

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

impl TracePlan {
    /// Writes the solution to `path` as CSV with an `offset` column,
    /// counting the time in [`PhaseTimes::write`].
    pub fn write_csv(&mut self, path: &Path) -> Result<(), TraceError> {
        let t = Instant::now();
        let text = write_csv(&self.ids, &self.buffers, &self.solution.placement.offsets);
        std::fs::write(path, text).map_err(TraceError::Io)?;
        self.phases.write = t.elapsed();
        Ok(())
    }

    /// Height over the lower bound (1 when the bound is 0).
    pub fn ratio(&self, height: usize) -> f64 {
        match self.solution.lower_bound {
            0 => 1.0,
            lb => height as f64 / lb as f64,
        }
    }

    /// One JSON object: counts, heights, the whole command's time
    /// (`time_ms`, from `started` to now) and each phase's (`phases_ms`).
    /// `greedy_height` is `null` when its pass did not run (another pass
    /// reached the bound first, or the budget ran out).
    pub fn json(&self, file: &str, started: Instant) -> String {
        let s = &self.solution;
        let p = &self.phases;
        let greedy = s
            .greedy_height
            .map_or("null".to_string(), |h| h.to_string());
        let passes: Vec<String> = s
            .passes
            .iter()
            .map(|p| {
                let h = p.height.map_or("null".to_string(), |h| h.to_string());
                format!("{{\"name\": \"{}\", \"height\": {h}}}", p.name)
            })
            .collect();
        format!(
            "{{\"file\": {}, \"buffers\": {}, \"lower_bound\": {}, \"height\": {}, \"height_over_lb\": {:.6}, \"naive_bytes\": {}, \"greedy_height\": {greedy}, \"time_ms\": {:.3}, \"optimal\": {}, \"nodes\": {}, \"phases_ms\": {{\"read\": {:.3}, \"parse\": {:.3}, \"bound\": {:.3}, \"constructive\": {:.3}, \"search\": {:.3}, \"local\": {:.3}, \"validate\": {:.3}, \"write\": {:.3}}}, \"passes\": [{}]}}",
            json_string(file),
            self.buffers.len(),
            s.lower_bound,
            s.placement.height,
            self.ratio(s.placement.height),
            s.naive_bytes,
            ms(started.elapsed()),
            s.optimal,
            s.nodes,
            ms(p.read),
            ms(p.parse),
            ms(p.bound),
            ms(p.constructive),
            ms(p.search),
            ms(p.local),
            ms(p.validate),
            ms(p.write),
            passes.join(", "),
        )
    }
}

/// `s` as a JSON string literal.
fn json_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graphs_and_traces_plan_and_name_their_rows() {
        let graph = r#"{"values": [{"name": "x", "size": 64}, {"name": "h", "size": 64},
            {"name": "y", "size": 64}], "nodes": [{"inputs": ["x"], "outputs": ["h"]},
            {"inputs": ["h"], "outputs": ["y"], "in_place": [{"output": 0, "input": 0}]}],
            "inputs": ["x"], "outputs": ["y"]}"#;
        let p = plan_trace_text(graph, false, Instant::now(), Duration::from_millis(20)).unwrap();
        assert_eq!(p.ids, ["h+y"]);
        assert_eq!(p.solution.placement.height, 64);
        let j = p.json("g\"1", Instant::now());
        assert!(j.starts_with("{\"file\": \"g\\\"1\""), "{j}");
        let deferred = r#"{"values": [{"name": "x", "size": 8}, {"name": "z", "size": null}],
            "nodes": [{"inputs": ["x"], "outputs": ["z"]}], "inputs": ["x"], "outputs": ["z"]}"#;
        match plan_trace_text(deferred, true, Instant::now(), Duration::ZERO) {
            Err(TraceError::Deferred { names }) => assert_eq!(names, ["z"]),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            plan_trace_text(
                "id,lower,upper,size\na,3,1,8\n",
                false,
                Instant::now(),
                Duration::ZERO
            ),
            Err(TraceError::Csv(_))
        ));
    }

    #[test]
    fn the_reserve_scales_with_the_measured_sorts_and_the_parse() {
        let ms = Duration::from_millis;
        assert_eq!(reserve(ms(0), ms(0)), ms(0));
        // The check is one more time sort, gathers and a sweep: at most
        // four times the two sorts (the 1M trace: 55 ms of sorts, a check
        // of 100-140 ms, 220 ms kept); writing the CSV back a quarter of
        // the parse.
        assert_eq!(reserve(ms(55), ms(0)), ms(220));
        assert_eq!(reserve(ms(55), ms(200)), ms(270));
        let us = Duration::from_micros;
        assert_eq!(reserve(us(400), ms(2)), us(2100));
        assert!(reserve(ms(10), ms(10)) < reserve(ms(20), ms(10)));
    }
}
