//! Static activation planner (placeholder; see issue 6).
