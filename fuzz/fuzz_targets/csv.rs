//! MiniMalloc CSV reader on arbitrary text: an error or an instance, never a
//! panic; an instance written back with `write_csv` reads back the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use warmarena::planner::{parse_csv, write_csv};

warmarena_fuzz::op_counts!(
    COUNTS,
    "csv",
    ["inputs", "utf8", "parsed", "with_offsets", "errors"]
);

fuzz_target!(|data: &[u8]| {
    COUNTS.bump(0);
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    COUNTS.bump(1);
    match parse_csv(text) {
        Ok(inst) => {
            COUNTS.bump(2);
            assert_eq!(inst.ids.len(), inst.buffers.len());
            assert!(inst.buffers.iter().all(|b| b.lower <= b.upper));
            if let Some(off) = &inst.offsets {
                COUNTS.bump(3);
                assert_eq!(off.len(), inst.buffers.len());
                let text2 = write_csv(&inst.ids, &inst.buffers, off);
                let back = parse_csv(&text2).expect("written CSV reads back");
                assert_eq!(back, inst, "round trip");
            }
        }
        Err(e) => {
            COUNTS.bump(4);
            assert!(e.line >= 1);
        }
    }
});
