// The seed's types (platform-v2 PR #33, commit 0de05278, crates/wasm-runtime-interface/src/sandbox.rs),
// encoded by bincode 1.3's `bincode::serialize` and decoded by `bincode::deserialize`, as the seed calls
// them. Prints JSON: golden encodings, and mutated requests with what bincode made of each.
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

// The seed's `env` is a HashMap; a map encodes the same whatever its kind (u64 count, then the pairs in
// iteration order). BTreeMap gives the vectors one order.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct SandboxExecRequest {
    command: String,
    args: Vec<String>,
    env: BTreeMap<String, String>,
    stdin: Option<Vec<u8>>,
    working_directory: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct SandboxExecResponse {
    exit_code: i32,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    duration_ms: u64,
}

#[derive(Debug, Serialize, Deserialize)]
enum SandboxError {
    SandboxDisabled,
    CommandNotAllowed(String),
    Timeout(u64),
    OutputTooLarge(usize),
    ExecutionFailed(String),
    PolicyViolation(String),
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{:02x}", x)).collect()
}

fn js(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn opt_hex(b: &Option<Vec<u8>>) -> String {
    b.as_ref().map(|v| js(&hex(v))).unwrap_or_else(|| "null".into())
}

fn req_json(r: &SandboxExecRequest) -> String {
    let args: Vec<String> = r.args.iter().map(|a| js(a)).collect();
    let env: Vec<String> = r.env.iter().map(|(k, v)| format!("[{},{}]", js(k), js(v))).collect();
    format!(
        "{{\"command\":{},\"args\":[{}],\"env\":[{}],\"stdin\":{},\"working_directory\":{}}}",
        js(&r.command),
        args.join(","),
        env.join(","),
        opt_hex(&r.stdin),
        r.working_directory.as_ref().map(|w| js(w)).unwrap_or_else(|| "null".into())
    )
}

fn result_json(r: &Result<SandboxExecResponse, SandboxError>) -> String {
    match r {
        Ok(o) => format!(
            "{{\"ok\":{{\"exit_code\":{},\"stdout\":{},\"stderr\":{},\"duration_ms\":\"{}\"}}}}",
            o.exit_code,
            js(&hex(&o.stdout)),
            js(&hex(&o.stderr)),
            o.duration_ms
        ),
        Err(e) => {
            let (kind, value) = match e {
                SandboxError::SandboxDisabled => ("SandboxDisabled", "null".to_string()),
                SandboxError::CommandNotAllowed(s) => ("CommandNotAllowed", js(s)),
                SandboxError::Timeout(n) => ("Timeout", format!("\"{}\"", n)),
                SandboxError::OutputTooLarge(n) => ("OutputTooLarge", format!("\"{}\"", n)),
                SandboxError::ExecutionFailed(s) => ("ExecutionFailed", js(s)),
                SandboxError::PolicyViolation(s) => ("PolicyViolation", js(s)),
            };
            format!("{{\"err\":{{\"kind\":{},\"value\":{}}}}}", js(kind), value)
        }
    }
}

/// xorshift64*: the same mutations on every run.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545F4914F6CDD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn req(command: &str, args: &[&str], env: &[(&str, &str)], stdin: Option<&[u8]>, wd: Option<&str>) -> SandboxExecRequest {
    SandboxExecRequest {
        command: command.into(),
        args: args.iter().map(|s| s.to_string()).collect(),
        env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        stdin: stdin.map(|s| s.to_vec()),
        working_directory: wd.map(|s| s.into()),
    }
}

fn main() {
    let requests = vec![
        ("echo hi, env A=1, stdin \"in\"", req("echo", &["hi"], &[("A", "1")], Some(b"in"), None)),
        ("empty everything", req("", &[], &[], None, None)),
        ("stdin present but empty", req("cat", &[], &[], Some(b""), None)),
        ("working directory", req("ls", &["-l", "/"], &[], None, Some("/tmp/work"))),
        ("two env entries", req("sh", &["-c", "echo $A$B"], &[("A", "x"), ("B", "y")], None, None)),
        ("non-ASCII text", req("printf", &["h\u{e9}llo \u{1f600}", "\n\t\""], &[("LANG", "C.UTF-8")], None, Some("/d\u{e9}j\u{e0}"))),
        ("binary stdin", req("od", &["-An"], &[], Some(&[0, 1, 2, 255, 254, 0x80]), None)),
    ];
    let results: Vec<(&str, Result<SandboxExecResponse, SandboxError>)> = vec![
        ("ok hi", Ok(SandboxExecResponse { exit_code: 0, stdout: b"hi\n".to_vec(), stderr: vec![], duration_ms: 7 })),
        ("ok signaled -1", Ok(SandboxExecResponse { exit_code: -1, stdout: vec![], stderr: b"killed".to_vec(), duration_ms: 30000 })),
        ("ok large duration", Ok(SandboxExecResponse { exit_code: 2147483647, stdout: vec![0, 255], stderr: vec![], duration_ms: u64::MAX })),
        ("SandboxDisabled", Err(SandboxError::SandboxDisabled)),
        ("CommandNotAllowed", Err(SandboxError::CommandNotAllowed("rm".into()))),
        ("Timeout", Err(SandboxError::Timeout(30000))),
        ("OutputTooLarge", Err(SandboxError::OutputTooLarge(1048576))),
        ("ExecutionFailed", Err(SandboxError::ExecutionFailed("invalid sandbox exec payload: io error".into()))),
        ("PolicyViolation", Err(SandboxError::PolicyViolation("exec quota: 3 execs".into()))),
    ];

    println!("{{");
    println!("  \"generator\": \"test/wasm/vectors/bincode-gen (bincode {})\",", "1.3.3");
    println!("  \"requests\": [");
    let mut first = true;
    for (name, r) in &requests {
        let bytes = bincode::serialize(r).unwrap();
        let back: SandboxExecRequest = bincode::deserialize(&bytes).unwrap();
        assert_eq!(bincode::serialize(&back).unwrap(), bytes);
        if !first { println!(","); }
        first = false;
        print!("    {{\"name\":{},\"value\":{},\"hex\":{}}}", js(name), req_json(r), js(&hex(&bytes)));
    }
    println!("\n  ],");
    println!("  \"results\": [");
    first = true;
    for (name, r) in &results {
        let bytes = bincode::serialize(r).unwrap();
        if !first { println!(","); }
        first = false;
        print!("    {{\"name\":{},\"value\":{},\"hex\":{}}}", js(name), result_json(r), js(&hex(&bytes)));
    }
    println!("\n  ],");

    // Mutated requests: truncated, bytes flipped, bytes appended. `decoded` is bincode's canonical
    // re-encoding of what it decoded (null: it refused the bytes).
    let mut rng = Rng(0x9E3779B97F4A7C15);
    println!("  \"mutations\": [");
    first = true;
    for i in 0..400 {
        let (_, base) = &requests[i % requests.len()];
        let mut bytes = bincode::serialize(base).unwrap();
        match rng.below(4) {
            0 => { let n = rng.below(bytes.len() + 1); bytes.truncate(n); }
            1 => { for _ in 0..(1 + rng.below(3)) { let at = rng.below(bytes.len()); bytes[at] = rng.next() as u8; } }
            2 => { let at = rng.below(bytes.len()); bytes[at] ^= 1 << rng.below(8); }
            _ => { for _ in 0..(1 + rng.below(8)) { bytes.push(rng.next() as u8); } }
        }
        let decoded = match bincode::deserialize::<SandboxExecRequest>(&bytes) {
            Ok(r) => js(&hex(&bincode::serialize(&r).unwrap())),
            Err(_) => "null".to_string(),
        };
        if !first { println!(","); }
        first = false;
        print!("    {{\"hex\":{},\"decoded\":{}}}", js(&hex(&bytes)), decoded);
    }
    println!("\n  ]");
    println!("}}");
}
