//! Static activation planner (issue 6).

mod csv;
mod greedy;
mod interval;
mod pack;
mod search;
mod validate;

pub use csv::{parse_csv, write_csv, CsvError, CsvInstance};
pub use greedy::greedy_by_size;
pub use interval::{check_buffers, lower_bound, Buffer, IntervalError, Placement};
pub use pack::{solve, Solution, SolveOptions};
pub use search::Budget;
pub use validate::{validate_placement, ValidateError};
