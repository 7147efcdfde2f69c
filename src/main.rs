//! The `warmarena` binary: `report` (the default) shows what a warm run costs
//! on warmarena and its peers; `plan` packs a trace or graph into one block.

const USAGE: &str =
    "usage: warmarena [report [--runs N] [--trace FILE.csv] [--batch K] [--scale F]]
       warmarena plan FILE [--budget-ms N] [--out solution.csv] [--json]";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (cmd, rest) = match args.first().map(String::as_str) {
        None => ("report", &args[..]),
        Some(c) if c.starts_with("--") => ("report", &args[..]),
        Some(c) => (c, &args[1..]),
    };
    let result = match cmd {
        "report" => warmarena::cli::report::main(rest),
        "plan" => warmarena::cli::plan::main(rest),
        "help" | "-h" => {
            println!("{USAGE}");
            Ok(())
        }
        other => Err(format!("unknown command `{other}`\n{USAGE}")),
    };
    if let Err(e) = result {
        eprintln!("warmarena: {e}");
        std::process::exit(2);
    }
}
