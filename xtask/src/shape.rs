//! `cargo xtask shape`: the measures of the code's shape that ARCHITECTURE.md holds it to, read
//! from the sources as text: lines per crate, files over [`LONG_FILE`] lines, import circles
//! between the files of one crate (from their `use` statements), and functions over
//! [`LONG_FN`] lines. The tidy tests (`tidy.rs`) check the same measures, so the report and the
//! checks never disagree.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// A file longer than this is reported: it likely holds more than one seam.
pub(crate) const LONG_FILE: usize = 600;

/// No library source file (`crates/*/src`) may be longer than this; the tidy test
/// `no_library_source_file_is_over_700_lines` fails on one.
pub(crate) const MAX_SRC_FILE: usize = 700;

/// A function longer than this needs a reason, in a comment starting `// Long:` just above it.
pub(crate) const LONG_FN: usize = 80;

/// The folders that hold the workspace's crates, relative to the root.
const CRATE_PARENTS: [&str; 1] = ["crates"];
/// Crates at the root of the workspace.
const ROOT_CRATES: [&str; 3] = ["tests", "xtask", "fuzz"];

/// Every crate folder of the workspace (a folder with a `Cargo.toml`), sorted.
pub(crate) fn crate_dirs(root: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = ROOT_CRATES.iter().map(|c| root.join(c)).collect();
    for parent in CRATE_PARENTS {
        if let Ok(entries) = fs::read_dir(root.join(parent)) {
            out.extend(entries.flatten().map(|e| e.path()));
        }
    }
    out.retain(|d| d.join("Cargo.toml").is_file());
    out.sort();
    out
}

/// The `.rs` files below `dir`, skipping build output, sorted.
pub(crate) fn rust_files(dir: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = fs::read_dir(dir) else { return };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                if !path.ends_with("target") {
                    walk(&path, out);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, &mut out);
    out.sort();
    out
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_default()
}

/// Lines of Rust in one crate: its library and binaries (`src/`), and its tests, benchmarks,
/// examples and fuzz targets (everything else).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CrateLines {
    pub(crate) src: usize,
    pub(crate) other: usize,
}

pub(crate) fn crate_lines(dir: &Path) -> CrateLines {
    let mut lines = CrateLines::default();
    for file in rust_files(dir) {
        let n = read(&file).lines().count();
        if file.starts_with(dir.join("src")) { lines.src += n } else { lines.other += n }
    }
    lines
}

/// The code of `text` with comments, string and character literals blanked out (replaced by
/// spaces, newlines kept), so that braces, `fn` and `use` are found only where they are code.
pub(crate) fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0usize;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
        } else if c == 'r' && matches!(next, Some('#' | '"')) && !ident_before(&chars, i) {
            // A raw string: r"..." or r#"..."#, any number of hashes.
            let hashes = chars[i + 1..].iter().take_while(|&&h| h == '#').count();
            if chars.get(i + 1 + hashes) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            let close: String = std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
            let body_start = i + 2 + hashes;
            let rest: String = chars[body_start..].iter().collect();
            let body_len = rest.find(&close).map_or(rest.chars().count(), |at| rest[..at].chars().count());
            let end = (body_start + body_len + close.chars().count()).min(chars.len());
            out.extend(chars[i..end].iter().map(|&c| blank(c)));
            i = end;
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < chars.len() {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' && is_char_literal(&chars, i) {
            let len = if next == Some('\\') {
                chars[i + 2..].iter().position(|&c| c == '\'').map_or(2, |p| p + 3)
            } else {
                3
            };
            out.extend(std::iter::repeat_n(' ', len.min(chars.len() - i)));
            i += len;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn ident_before(chars: &[char], i: usize) -> bool {
    i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')
}

/// `'x'` or `'\n'` at `i`, as opposed to a lifetime or label (`'a`, `'static`).
fn is_char_literal(chars: &[char], i: usize) -> bool {
    match chars.get(i + 1) {
        Some('\\') => true,
        Some(_) => chars.get(i + 2) == Some(&'\''),
        None => false,
    }
}

/// A function longer than [`LONG_FN`] lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LongFn {
    pub(crate) file: PathBuf,
    pub(crate) line: usize,
    pub(crate) name: String,
    pub(crate) lines: usize,
    /// The reason given in a `// Long:` comment above it, if any.
    pub(crate) reason: Option<String>,
}

/// The functions of `text` (file `file`) longer than [`LONG_FN`] lines, from the `fn` line to
/// the line of its closing brace.
pub(crate) fn long_functions(file: &Path, text: &str) -> Vec<LongFn> {
    let code = code_only(text);
    let lines: Vec<&str> = code.lines().collect();
    let original: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (at, line) in lines.iter().enumerate() {
        let Some(name) = fn_name(line) else { continue };
        let Some(end) = closing_line(&lines, at) else { continue };
        let len = end - at + 1;
        if len > LONG_FN {
            out.push(LongFn {
                file: file.to_path_buf(),
                line: at + 1,
                name,
                lines: len,
                reason: reason(&original, at),
            });
        }
    }
    out
}

/// The name of the function a line declares, if it declares one.
fn fn_name(line: &str) -> Option<String> {
    let qualifier = |w: &str| {
        ["pub", "async", "const", "unsafe", "extern", "default", "\"C\""].contains(&w) || w.starts_with("pub(")
    };
    let mut words = line.split_whitespace();
    let word = words.find(|w| !qualifier(w))?;
    if word != "fn" {
        return None;
    }
    let name: String = words.next()?.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
    (!name.is_empty()).then_some(name)
}

/// The line that closes the body opened at or after line `start`; `None` for a declaration
/// without a body (a trait method ending in `;`).
fn closing_line(lines: &[&str], start: usize) -> Option<usize> {
    let mut depth = 0i64;
    let mut opened = false;
    for (at, line) in lines.iter().enumerate().skip(start) {
        for c in line.chars() {
            match c {
                '{' => {
                    depth += 1;
                    opened = true;
                }
                '}' => depth -= 1,
                ';' if !opened && depth == 0 => return None,
                _ => {}
            }
            if opened && depth == 0 {
                return Some(at);
            }
        }
    }
    None
}

/// The reason of a `// Long:` comment in the block of comments and attributes just above line
/// `at`.
fn reason(lines: &[&str], at: usize) -> Option<String> {
    for line in lines[..at].iter().rev() {
        let line = line.trim();
        if let Some(reason) = line.strip_prefix("// Long:") {
            return Some(reason.trim().to_owned());
        }
        if !(line.starts_with("//") || line.starts_with("#[")) {
            return None;
        }
    }
    None
}

/// The module path of a source file of a crate's `src/` (`lib.rs` and `main.rs` are the root,
/// `a/mod.rs` and `a.rs` are `a`), or `None` for a file of another target (`src/bin/...`).
fn module_of(src: &Path, file: &Path) -> Option<Vec<String>> {
    let rel = file.strip_prefix(src).ok()?;
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if parts.first().is_some_and(|p| p == "bin") {
        return None;
    }
    let last = parts.pop()?;
    let stem = last.trim_end_matches(".rs");
    if !(stem == "mod" || (parts.is_empty() && (stem == "lib" || stem == "main"))) {
        parts.push(stem.to_owned());
    }
    Some(parts)
}

/// One path a `use` statement names, as a module path from the crate root (`crate::a::B` and
/// `super::B` resolved; grouped imports expanded).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Use {
    path: Vec<String>,
    /// A path that may name another crate instead (`a::B`) counts only if its first
    /// `must_exist` segments are a module of this crate; 0 when it names this crate for sure.
    must_exist: usize,
    /// A `pub` (or `pub(crate)`) re-export: it gives a name to others and is no dependency.
    public: bool,
}

/// The paths a file names in its `use` statements.
fn used_paths(file_module: &[String], code: &str) -> Vec<Use> {
    let blocks = inline_modules(code);
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("use ") {
        let head = &rest[..at];
        let offset = code.len() - rest.len() + at;
        // Inside `mod tests { ... }` of `a.rs`, `super` is `a`.
        let module: Vec<String> = file_module
            .iter()
            .cloned()
            .chain(
                blocks
                    .iter()
                    .filter(|(start, end, _)| (*start..*end).contains(&offset))
                    .map(|(_, _, name)| name.clone()),
            )
            .collect();
        let module = module.as_slice();
        rest = &rest[at + 4..];
        if head.chars().last().is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let last_word =
            head.rsplit(|c: char| c.is_whitespace() || c == ';' || c == '{' || c == '}').find(|w| !w.is_empty());
        let public = last_word.is_some_and(|w| w == "pub" || w.starts_with("pub("));
        let Some(end) = rest.find(';') else { break };
        // `X as Y` names X.
        let mut words = rest[..end].split_whitespace().peekable();
        let mut tree = String::new();
        while let Some(word) = words.next() {
            if word == "as" {
                let alias = words.next().unwrap_or_default();
                tree.extend(alias.chars().skip_while(|c| c.is_alphanumeric() || *c == '_'));
            } else {
                tree.push_str(word);
            }
        }
        rest = &rest[end..];
        for path in expand(&tree) {
            let mut parts: Vec<String> = path.split("::").map(str::to_owned).collect();
            let (path, must_exist) = match parts.first().map(String::as_str) {
                Some("crate") => (parts.split_off(1), 0),
                Some("super") => {
                    let mut base = module.to_vec();
                    while parts.first().is_some_and(|p| p == "super") {
                        parts.remove(0);
                        base.pop();
                    }
                    base.extend(parts);
                    (base, 0)
                }
                Some("self") => (module.iter().cloned().chain(parts.into_iter().skip(1)).collect(), 0),
                // A child module of this one (`mod a; use a::B;`), or another crate.
                _ => (module.iter().cloned().chain(parts).collect(), module.len() + 1),
            };
            out.push(Use { path, must_exist, public });
        }
    }
    out.extend(inline_paths(code));
    out
}

/// The paths a file's code names inline, outside `use` statements and comments
/// (`Arc<crate::a::B>`): a dependency as much as an import is, and one a `use`-only reading
/// would miss.
fn inline_paths(code: &str) -> Vec<Use> {
    let mut out = Vec::new();
    for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
        let line = line.split("//").next().unwrap_or_default();
        let statement = line.trim_start();
        let statement =
            if statement.starts_with("pub") { statement.split_once(' ').map_or("", |(_, r)| r) } else { statement };
        if statement.starts_with("use ") {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            let before = rest[..at].chars().last();
            rest = &rest[at + "crate::".len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
                continue;
            }
            let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')).unwrap_or(rest.len());
            let path: Vec<String> = rest[..end].split("::").filter(|p| !p.is_empty()).map(str::to_owned).collect();
            if !path.is_empty() {
                out.push(Use { path, must_exist: 0, public: false });
            }
        }
    }
    out
}

/// The inline modules of a file's code (`mod name { ... }`): where each body starts and ends,
/// and its name, outermost first.
fn inline_modules(code: &str) -> Vec<(usize, usize, String)> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let mut from = 0;
    while let Some(at) = code[from..].find("mod ").map(|i| from + i) {
        from = at + 4;
        if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_') {
            continue;
        }
        let name: String = code[from..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        let after = code[from + name.len()..].trim_start();
        if name.is_empty() || !after.starts_with('{') {
            continue;
        }
        let open = code.len() - after.len();
        let mut depth = 0usize;
        let end = code[open..]
            .char_indices()
            .find_map(|(i, c)| {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    _ => return None,
                }
                (depth == 0).then_some(open + i)
            })
            .unwrap_or(code.len());
        out.push((open, end, name));
    }
    out
}

/// `a::{b, c::{d, e}}` as `a::b`, `a::c::d`, `a::c::e`.
fn expand(tree: &str) -> Vec<String> {
    let Some(open) = tree.find('{') else {
        return vec![tree.split(" as ").next().unwrap_or(tree).trim_end_matches("::*").to_owned()];
    };
    let prefix = &tree[..open];
    let inner = tree[open + 1..].strip_suffix('}').unwrap_or(&tree[open + 1..]);
    let mut items = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&inner[start..]);
    items
        .into_iter()
        .filter(|i| !i.is_empty())
        .flat_map(|item| {
            expand(item).into_iter().map(move |p| {
                if p == "self" { prefix.trim_end_matches("::").to_owned() } else { format!("{prefix}{p}") }
            })
        })
        .collect()
}

/// The file a module path names: its longest prefix that is a module of the crate, after
/// following re-exports (`pub use a::B;` in `lib.rs` makes `crate::B` name `a`'s file). A name
/// re-exported from another crate names no file of this one.
fn file_of(
    modules: &BTreeMap<Vec<String>, PathBuf>,
    reexports: &BTreeMap<Vec<String>, Use>,
    path: &[String],
) -> Option<PathBuf> {
    let mut path = path.to_vec();
    // Bounded: a re-export of a re-export, a few deep at most.
    for _ in 0..8 {
        let Some((n, origin)) = (1..=path.len()).rev().find_map(|n| Some((n, reexports.get(&path[..n])?))) else {
            break;
        };
        if origin.must_exist > 0 && !modules.contains_key(&origin.path[..origin.must_exist.min(origin.path.len())]) {
            return None;
        }
        path = origin.path.iter().cloned().chain(path[n..].iter().cloned()).collect();
    }
    (0..=path.len()).rev().find_map(|n| modules.get(&path[..n]).cloned())
}

/// The import circles among the files of the crate in `dir`: every set of two or more files
/// each of which reaches the others through `use` statements (the strongly connected
/// components of the import graph), each sorted, as paths relative to `dir`. Re-exports
/// (`pub use`) are followed to the file a name comes from and are no edge of their own, so a
/// `lib.rs` that only re-exports is in no circle.
pub(crate) fn import_circles(dir: &Path) -> Vec<Vec<String>> {
    let src = dir.join("src");
    let mut modules = BTreeMap::new();
    for file in rust_files(&src) {
        if let Some(module) = module_of(&src, &file) {
            modules.insert(module, file);
        }
    }
    let uses: BTreeMap<&Vec<String>, Vec<Use>> =
        modules.iter().map(|(m, f)| (m, used_paths(m, &code_only(&read(f))))).collect();
    let mut reexports = BTreeMap::new();
    for (module, list) in &uses {
        for u in list.iter().filter(|u| u.public) {
            if let Some(name) = u.path.last() {
                let item: Vec<String> = module.iter().cloned().chain([name.clone()]).collect();
                if item != u.path {
                    reexports.insert(item, u.clone());
                }
            }
        }
    }
    let mut edges: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
    for (module, list) in &uses {
        let file = &modules[*module];
        let targets = edges.entry(file.clone()).or_default();
        for u in list.iter().filter(|u| !u.public) {
            if u.must_exist > 0 && !(u.path.len() >= u.must_exist && modules.contains_key(&u.path[..u.must_exist])) {
                continue;
            }
            if let Some(to) = file_of(&modules, &reexports, &u.path)
                && &to != file
            {
                targets.insert(to);
            }
        }
    }
    strongly_connected(&edges)
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|c| {
            let mut names: Vec<String> =
                c.iter().map(|f| f.strip_prefix(dir).unwrap_or(f).display().to_string()).collect();
            names.sort();
            names
        })
        .collect()
}

/// The strongly connected components of a graph (Tarjan's algorithm, iterative depth by
/// recursion: the graphs are a crate's files, a few dozen at most).
fn strongly_connected(edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<PathBuf>> {
    struct State<'a> {
        edges: &'a BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        index: BTreeMap<&'a PathBuf, usize>,
        low: BTreeMap<&'a PathBuf, usize>,
        stack: Vec<&'a PathBuf>,
        on_stack: BTreeSet<&'a PathBuf>,
        out: Vec<Vec<PathBuf>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a PathBuf) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.edges.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.clone());
                if w == v {
                    break;
                }
            }
            s.out.push(component);
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out
}

/// Prints the report of `cargo xtask shape`.
pub(crate) fn report(root: &Path) {
    let rel = |p: &Path| p.strip_prefix(root).unwrap_or(p).display().to_string();
    println!("lines of Rust per crate (src = library and binaries; other = tests, benches, examples)");
    println!("{:<28} {:>7} {:>7} {:>7}", "crate", "src", "other", "total");
    let (mut src, mut other) = (0, 0);
    for dir in crate_dirs(root) {
        let l = crate_lines(&dir);
        src += l.src;
        other += l.other;
        println!("{:<28} {:>7} {:>7} {:>7}", rel(&dir), l.src, l.other, l.src + l.other);
    }
    println!("{:<28} {:>7} {:>7} {:>7}", "all", src, other, src + other);
    println!("\nfiles over {LONG_FILE} lines (a library file over {MAX_SRC_FILE} fails tidy)");
    for dir in crate_dirs(root) {
        for file in rust_files(&dir) {
            let n = read(&file).lines().count();
            if n > LONG_FILE {
                println!("  {:>5}  {}", n, rel(&file));
            }
        }
    }
    println!("\nimport circles between the files of one crate (from `use` statements and paths named inline)");
    for dir in crate_dirs(root) {
        for circle in import_circles(&dir) {
            println!("  {}: {}", rel(&dir), circle.join(" <-> "));
        }
    }
    println!("\nfunctions over {LONG_FN} lines (src/ of every crate; tests and benches after)");
    let mut all: Vec<LongFn> = Vec::new();
    for dir in crate_dirs(root) {
        for file in rust_files(&dir) {
            all.extend(long_functions(&file, &read(&file)));
        }
    }
    all.sort_by_key(|f| (!f.file.components().any(|c| c.as_os_str() == "src"), std::cmp::Reverse(f.lines)));
    for f in all {
        let why = f.reason.as_deref().map(|r| format!("  (Long: {r})")).unwrap_or_default();
        println!("  {:>4}  {}:{} {}{}", f.lines, rel(&f.file), f.line, f.name, why);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    #[test]
    fn code_only_blanks_comments_strings_and_chars_but_keeps_lifetimes() {
        let text = "fn a<'x>(s: &'x str) { let c = '{'; let s = \"}\"; let r = r#\"}\"#; } // }\n/* { */";
        let code = code_only(text);
        assert_eq!(code.matches('{').count(), 1, "{code}");
        assert_eq!(code.matches('}').count(), 1, "{code}");
        assert!(code.contains("'x"), "{code}");
        assert_eq!(code.len(), text.len());
    }

    #[test]
    fn long_functions_are_measured_from_fn_to_closing_brace_and_keep_their_reason() {
        let body = |n: usize| (0..n).map(|i| format!("    let _x{i} = {{ 1 }};\n")).collect::<String>();
        let text = format!(
            "// Long: one table.\nfn long() {{\n{}}}\n\nfn short() {{\n{}}}\ntrait T {{ fn decl(&self); }}\npub(crate) async fn other() {{\n{}}}\n",
            body(85),
            body(10),
            body(79)
        );
        let found = long_functions(Path::new("x.rs"), &text);
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!((found[0].name.as_str(), found[0].lines, found[0].line), ("long", 87, 2));
        assert_eq!(found[0].reason.as_deref(), Some("one table."));
        assert_eq!((found[1].name.as_str(), found[1].lines, found[1].reason.as_deref()), ("other", 81, None));
    }

    #[test]
    fn a_path_named_inline_is_a_dependency_and_a_comment_is_not() {
        let code = "struct A { b: Arc<crate::soak_owners::Kept> }\n/// [`x`](crate::doc::Link)\nlet f = crate::m::g(); // crate::no::Way\n";
        let paths: Vec<Vec<String>> = used_paths(&[], code).into_iter().map(|u| u.path).collect();
        let named = |p: &[&str]| p.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(paths, vec![named(&["soak_owners", "Kept"]), named(&["m", "g"])]);
    }

    #[test]
    fn grouped_and_relative_imports_resolve_to_module_paths() {
        let module = vec!["a".to_owned(), "b".to_owned()];
        let code = "use crate::{x::Y, z::{self, W}};\nuse super::c::D;\nuse std::fs;\nfn f() { let reuse = 1; }\nmod tests { use super::E; }";
        let code = format!("{code}\npub(crate) use crate::q::R as S;");
        let paths = used_paths(&module, &code);
        let names: Vec<(String, usize, bool)> =
            paths.iter().map(|u| (u.path.join("::"), u.must_exist, u.public)).collect();
        let expected = [
            ("x::Y", 0, false),
            ("z", 0, false),
            ("z::W", 0, false),
            ("a::c::D", 0, false),
            ("a::b::std::fs", 3, false),
            ("a::b::E", 0, false),
            ("q::R", 0, true),
        ];
        assert_eq!(names, expected.map(|(p, n, public)| (p.to_owned(), n, public)));
    }

    #[test]
    fn a_circle_through_a_root_reexport_is_found() {
        let dir = std::env::temp_dir().join(format!("xtask-shape-{}", std::process::id()));
        let src = dir.join("src");
        fs::create_dir_all(src.join("m")).unwrap();
        fs::write(src.join("lib.rs"), "mod a;\nmod m;\npub use a::A;\n").unwrap();
        fs::write(src.join("a.rs"), "use crate::m::leaf::L;\npub struct A;\n").unwrap();
        fs::write(src.join("m/mod.rs"), "pub mod leaf;\n").unwrap();
        fs::write(src.join("m/leaf.rs"), "use crate::A;\npub struct L;\n").unwrap();
        let circles = import_circles(&dir);
        fs::remove_dir_all(&dir).unwrap();
        assert_eq!(circles, vec![vec!["src/a.rs".to_owned(), "src/m/leaf.rs".to_owned()]]);
    }
}
