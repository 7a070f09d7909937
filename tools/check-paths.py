#!/usr/bin/env python3
"""Every repository path a comment or a doc names must exist.

Reads the tracked files of ROOT (git ls-files, so never a build folder): the
comments of the C, C++, HIP, CMake, shell and Python sources (docstrings
count as comments) and the whole text of the Markdown files, and judges what
looks like a path in them:

- a path that starts with a top-level folder (src/ kernels/ docs/ ...) must
  name a tracked file or folder; a glob (kernels/*.hip) must match one;
- another relative path must end a tracked path (gpu/host.hip); when it
  does not, it is stale if its first folder is one of the tree's, else it
  is another project's (llama.cpp/src/llama-arch.cpp) and must be allowed;
  ./ and ../ paths are read from the file's folder, then from the top;
- a bare file name with one of the project's extensions (st_gpu.h) or a
  bare folder name (formats/) must be the name of a tracked file or
  folder, of a file the CMake files generate (configure_file,
  file(CONFIGURE ...)), or be allowed.

Allowed names are those of tools/check-paths.allow: files of other projects
and files the tools write at run time. That list is checked too: an entry
that names a tracked file, or that nothing names, is reported. Not paths of
this repository: names with placeholders (strata-<model>.table, DIR/...,
$OUT/gen, MODEL.gguf), machine paths (/usr/include/...), paths in folders
git ignores (build/, .device/), URLs.

Prints one line per stale reference, "FILE:LINE: names PATH, which does not
exist", and exits 1; else one summary line and exit 0; exit 2 when the tree
or the allowlist cannot be read.

usage: tools/check-paths.py [--list] [ROOT]
  ROOT    the work tree to check (default: this script's)
  --list  also print every reference read, with its verdict
"""
import ast
import io
import os
import re
import subprocess
import sys
import tokenize

TOP = ("src", "include", "kernels", "tools", "tests", "docs", "cmake", "examples", "tables", "integrations", ".ci")
EXTS = ("c", "h", "cpp", "hip", "cmake", "sh", "py", "md", "json", "txt", "gguf", "stqv", "table")
ALLOW = "tools/check-paths.allow"

# A candidate: word characters, dots, dashes, slashes, globs, placeholders,
# and brace groups ({contract,runtime}); everything else separates.
TOKEN = re.compile(r"(?:[\w.\-/*?<>+~$@]|\{[^{}\s]*\})+")
URL = re.compile(r"[A-Za-z][\w+.-]*://\S+")
BARE_FILE = re.compile(r"^[\w.+*?-]+\.(?:%s)$" % "|".join(EXTS))
# Placeholders of usage lines (MODEL.gguf, FILE.autotune.json, DIR/NAME.json):
# a path with one of them is no repository path.
PLACEHOLDERS = ("BENCH", "DIR", "F", "FILE", "MODEL", "NAME", "PEER")


def fail(msg):
    sys.stderr.write("check-paths: %s\n" % msg)
    sys.exit(2)


# ---- comments, per language: lists of (line number, text) ----------------

def c_comments(text):
    out, i, n, line = [], 0, len(text), 1
    state = None  # None, '"', "'", '//', '/*'
    buf, start = [], 1
    while i < n:
        ch = text[i]
        nx = text[i + 1] if i + 1 < n else ""
        if state is None:
            if ch == "/" and nx == "/":
                state, buf, start = "//", [], line
                i += 2
                continue
            if ch == "/" and nx == "*":
                state, buf, start = "/*", [], line
                i += 2
                continue
            if ch in "\"'":
                state = ch
        elif state in "\"'":
            if ch == "\\" and nx:
                if nx == "\n":
                    line += 1
                i += 2
                continue
            if ch == state or ch == "\n":  # literals end at the line's end
                state = None
        elif state == "//":
            if ch == "\n":
                out.append((start, "".join(buf)))
                state = None
            else:
                buf.append(ch)
        elif state == "/*":
            if ch == "*" and nx == "/":
                for k, part in enumerate("".join(buf).split("\n")):
                    out.append((start + k, part))
                state = None
                i += 2
                continue
            buf.append(ch)
        if ch == "\n":
            line += 1
        i += 1
    if state in ("//", "/*"):
        for k, part in enumerate("".join(buf).split("\n")):
            out.append((start + k, part))
    return out


def cmake_comments(text):
    """# comments outside quoted arguments, and #[[ ]] bracket comments."""
    out, in_str, bracket = [], False, None
    for no, ln in enumerate(text.split("\n"), 1):
        if bracket:
            end = ln.find(bracket)
            out.append((no, ln if end < 0 else ln[:end]))
            if end < 0:
                continue
            ln, bracket = ln[end + len(bracket):], None
        i = 0
        while i < len(ln):
            ch = ln[i]
            if in_str:
                if ch == "\\":
                    i += 1
                elif ch == '"':
                    in_str = False
            elif ch == '"':
                in_str = True
            elif ch == "#":
                m = re.match(r"#\[(=*)\[", ln[i:])
                if m:
                    bracket = "]" + m.group(1) + "]"
                    rest = ln[i + m.end():]
                    end = rest.find(bracket)
                    out.append((no, rest if end < 0 else rest[:end]))
                    if end >= 0:
                        bracket = None
                        i += m.end() + end + len(m.group(1)) + 2
                        continue
                else:
                    out.append((no, ln[i + 1:]))
                break
            i += 1
    return out


def shell_comments(text):
    """# starting a word, outside quotes and here-documents."""
    out, quote, heredoc = [], None, None
    for no, ln in enumerate(text.split("\n"), 1):
        if heredoc:
            if (ln.lstrip("\t") if heredoc[1] else ln) == heredoc[0]:
                heredoc = None
            continue
        i, pending = 0, None
        while i < len(ln):
            ch = ln[i]
            if quote == "'":
                if ch == "'":
                    quote = None
            elif quote == '"':
                if ch == "\\":
                    i += 1
                elif ch == '"':
                    quote = None
            elif ch == "\\":
                i += 1
            elif ch in "'\"":
                quote = ch
            elif ch == "<" and ln.startswith("<<", i) and not ln.startswith("<<<", i):
                m = re.match(r"<<(-?)\s*(['\"]?)([A-Za-z_][\w.-]*)\2", ln[i:])
                if m:
                    pending = (m.group(3), m.group(1) == "-")
                    i += m.end()
                    continue
            elif ch == "#" and (i == 0 or ln[i - 1] in " \t;&|()"):
                out.append((no, ln[i + 1:]))
                break
            i += 1
        if pending:
            heredoc = pending
    return out


def python_comments(text):
    out = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                out.append((tok.start[0], tok.string[1:]))
        tree = ast.parse(text)
    except (tokenize.TokenError, SyntaxError, ValueError):
        return shell_comments(text)  # not parseable: at least its # lines
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                for k, part in enumerate(body[0].value.value.split("\n")):
                    out.append((body[0].lineno + k, part))
    return out


def markdown_text(text):
    return list(enumerate(text.split("\n"), 1))


def reader_for(path, text):
    name = os.path.basename(path)
    inner = name[:-3] if name.endswith(".in") else name
    ext = inner.rsplit(".", 1)[-1] if "." in inner else ""
    if ext in ("c", "h", "cpp", "hip"):
        return c_comments
    if ext in ("cmake", "pc") or inner == "CMakeLists.txt":
        return cmake_comments
    if ext == "sh":
        return shell_comments
    if ext == "py":
        return python_comments
    if ext == "md":
        return markdown_text
    first = text.split("\n", 1)[0]
    if not ext and first.startswith("#!") and re.search(r"\b(ba|da)?sh\b", first):
        return shell_comments
    if not ext and first.startswith("#!") and "python" in first:
        return python_comments
    return None


# ---- the tree --------------------------------------------------------------

def tracked(root):
    try:
        r = subprocess.run(["git", "-C", root, "ls-files", "-z"], capture_output=True, check=False)
    except OSError as e:
        fail("cannot run git: %s" % e)
    if r.returncode != 0:
        fail("%s: git ls-files failed (the check reads the tracked files of a work tree)" % root)
    files = [f for f in r.stdout.decode("utf-8", "replace").split("\0") if f]
    # a tracked file deleted in the work tree is not there to name
    return [f for f in files if os.path.isfile(os.path.join(root, f))]


def generated_names(root, files):
    """Outputs of configure_file / file(CONFIGURE|WRITE|GENERATE) as name
    patterns: a variable a literal foreach list sets gives its items, any
    other variable a '*'."""
    pats = set()
    for f in files:
        if not (f.endswith(".cmake") or os.path.basename(f) == "CMakeLists.txt"):
            continue
        with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        loops = {}
        for m in re.finditer(r"foreach\s*\(\s*(\w+)((?:\s+[\w.-]+)+)\s*\)", text):
            items = m.group(2).split()
            if items[0] not in ("IN", "RANGE"):
                loops[m.group(1)] = items
        outs = [m.group(1) for m in re.finditer(r"configure_file\s*\(\s*\S+\s+([^\s)]+)", text)]
        outs += [m.group(1) for m in re.finditer(r"configure_package_config_file\s*\(\s*\S+\s+([^\s)]+)", text)]
        outs += [m.group(1) for m in re.finditer(r"write_basic_package_version_file\s*\(\s*([^\s)]+)", text)]
        outs += [m.group(1) for m in re.finditer(r"file\s*\(\s*(?:CONFIGURE\s+OUTPUT|WRITE|GENERATE\s+OUTPUT)\s+([^\s)]+)", text)]
        for o in outs:
            base = o.strip('"').rsplit("/", 1)[-1]
            names = [base]
            for var in re.findall(r"\$\{(\w+)\}", base):
                names = [x.replace("${%s}" % var, v) for x in names for v in loops.get(var, ["*"])]
            pats.update(names)
    return pats


def read_allow(root):
    entries = []
    path = os.path.join(root, ALLOW)
    if not os.path.isfile(path):
        fail("%s: no such file" % ALLOW)
    with open(path, encoding="utf-8") as fh:
        for no, ln in enumerate(fh, 1):
            name = ln.split("#", 1)[0].strip()
            if name:
                entries.append((no, name))
    return entries


def glob_re(pat):
    """A glob as the shell reads it: * and ? stay within one folder; ** (the
    allowlist's) crosses folders."""
    out, i = "", 0
    while i < len(pat):
        if pat.startswith("**", i):
            out, i = out + ".*", i + 2
            continue
        ch = pat[i]
        out += "[^/]*" if ch == "*" else "[^/]" if ch == "?" else re.escape(ch)
        i += 1
    return re.compile(out + r"\Z")


def expand_braces(tok):
    m = re.search(r"\{([^{}]*)\}", tok)
    if not m:
        return [tok]
    return [x for alt in m.group(1).split(",") for x in expand_braces(tok[:m.start()] + alt + tok[m.end():])]


# ---- the check -------------------------------------------------------------

def main():
    args = sys.argv[1:]
    if any(a in ("-h", "--help") for a in args):
        print(__doc__.strip())
        return
    listing = "--list" in args
    args = [a for a in args if a != "--list"]
    if len(args) > 1 or any(a.startswith("-") for a in args):
        fail("usage: check-paths [--list] [ROOT]")
    root = os.path.abspath(args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    files = tracked(root)
    fileset = set(files)
    dirs = {f.rsplit("/", k)[0] for f in files for k in range(1, f.count("/") + 1)}
    paths = fileset | dirs
    basenames = {f.rsplit("/", 1)[-1] for f in files}
    dirnames = {d.rsplit("/", 1)[-1] for d in dirs}
    suffixes = {p.split("/", k)[-1] for p in paths for k in range(p.count("/") + 1)}
    generated = generated_names(root, files)
    allow = read_allow(root)
    used = set()

    def listed(key):
        """Whether KEY (a name, a folder name with its slash, or a path) is
        generated or allowed; marks the allowlist entry used."""
        if "/" not in key.rstrip("/") and any(glob_re(g).match(key) for g in generated):
            return True
        for no, a in allow:
            if glob_re(a).match(key):
                used.add(no)
                return True
        return False

    def tracked_name(name, folder):
        pool = dirnames if folder else basenames
        if any(ch in name for ch in "*?"):
            rx = glob_re(name)
            return any(rx.match(b) for b in pool)
        return name in pool

    def exists(rel):
        rel = rel.rstrip("/")
        if any(ch in rel for ch in "*?"):
            rx = glob_re(rel)
            return any(rx.match(p) for p in paths)
        return rel in paths

    def ends_tracked(rel):
        rel = rel.rstrip("/")
        if any(ch in rel for ch in "*?"):
            rx = glob_re(rel)
            return any(rx.match(x) for x in suffixes)
        return rel in suffixes

    ignored = set()

    def git_ignored(first):
        """Whether folder FIRST is one git ignores (build/, .device/): what
        lies there is never a repository path."""
        return first in ignored

    def judge(tok, src):
        """None when TOK is no repository path, else whether it exists."""
        m = re.fullmatch(r"<([\w./+-]+\.\w+)>", tok)  # <strata/limits.h>, <stdint.h>
        if m:
            tok = m.group(1)
        if any(ch in tok for ch in "<>$~@") or "..." in tok or tok.startswith("-"):
            return None
        tok = tok.rstrip(".")
        if any(p.split(".", 1)[0] in PLACEHOLDERS for p in tok.split("/")):
            return None
        verdicts = [judge_one(t, src) for t in expand_braces(tok)]
        if False in verdicts:
            return False
        return True if True in verdicts else None

    def judge_one(tok, src):
        folder = tok.endswith("/")
        parts = [p for p in tok.split("/") if p]
        if not parts or tok.startswith("/"):  # a machine path (/usr/include/..., /tmp/...)
            return None
        last = parts[-1]
        names_file = bool(BARE_FILE.match(last)) or last == "CMakeLists.txt"
        if len(parts) == 1:  # a bare name: somewhere in the tree, generated or allowed
            if folder:
                if not re.fullmatch(r"[A-Za-z_][\w.-]*", last) or git_ignored(last):
                    return None
                return tracked_name(last, True) or listed(last + "/")
            if not names_file or last.startswith("."):
                return None
            # a name with a dot may also be a folder's (integrations/llama.cpp)
            return tracked_name(last, False) or tracked_name(last, True) or listed(last)
        if parts[0] in TOP:
            return exists(tok) or listed(tok.rstrip("/"))
        if parts[0] in (".", ".."):  # relative to the file, or else to the top
            for base in (os.path.dirname(src), ""):
                rel = os.path.normpath(os.path.join(base, tok))
                if not rel.startswith("..") and exists(rel):
                    return True
            rel = os.path.normpath(tok)
            return None if rel.startswith("..") else False
        if git_ignored(parts[0]):
            return None
        if ends_tracked(tok):  # gpu/host.hip, strata/limits.h
            return True
        if parts[0] in dirnames:
            if listed(tok.rstrip("/")):  # another project's, by a folder name we share (llama.cpp/...)
                return True
            if names_file or folder:
                return False  # inside the project, but it ends no tracked path
            return None  # cpu/gpu: prose
        if not (names_file or folder):
            return None  # and/or, gate/up: prose
        # another project's path (llama.cpp/src/llama-arch.cpp) or a file
        # written at build or run time: its name must be generated or
        # allowed; that a tracked file has its name does not do, as the
        # folder is none of ours
        return listed(tok.rstrip("/")) or (listed(last) if names_file else listed(parts[0] + "/"))

    refs, scanned = [], 0  # (file, line, token)
    for f in files:
        if "/" in f and f.split("/", 1)[0].startswith("build"):
            continue  # never a build folder, even a file forced into the index
        try:
            with open(os.path.join(root, f), encoding="utf-8") as fh:
                text = fh.read()
        except (UnicodeDecodeError, OSError):
            continue  # binary: no comments to read
        reader = reader_for(f, text)
        if not reader:
            continue
        scanned += 1
        for no, line in reader(text):
            for m in TOKEN.finditer(URL.sub(" ", line)):
                if "/" in m.group(0) or "." in m.group(0):
                    refs.append((f, no, m.group(0)))

    # the first folders git ignores, asked once for all (a git per folder
    # took seconds)
    firsts = sorted({t.split("/", 1)[0] for _, _, t in refs if "/" in t} - {"", ".", ".."})
    r = subprocess.run(["git", "-C", root, "check-ignore", "--no-index", "-z", "--stdin"],
                       input="".join(x + "/x\0" for x in firsts).encode(), capture_output=True, check=False)
    ignored.update(p[:-2] for p in r.stdout.decode("utf-8", "replace").split("\0") if p.endswith("/x"))

    stale, checked = [], 0
    for f, no, tok in refs:
        verdict = judge(tok, f)
        if verdict is not None:
            checked += 1
            if listing:
                print("%s:%d: %s %s" % (f, no, "ok" if verdict else "STALE", tok.rstrip(".")))
        if verdict is False:
            stale.append("%s:%d: names %s, which does not exist" % (f, no, tok.rstrip(".")))

    for no, a in allow:
        rx = glob_re(a.rstrip("/"))
        if any(rx.match(x) for x in (paths if "/" in a.rstrip("/") else basenames | dirnames)):
            stale.append("%s:%d: allows %s, which names a file of this tree: remove or narrow the entry"
                         % (ALLOW, no, a))
        elif no not in used:
            stale.append("%s:%d: allows %s, which nothing names: remove the entry" % (ALLOW, no, a))

    for s in stale:
        print(s)
    if stale:
        sys.exit(1)
    print("check-paths: %d references to repository paths in %d files checked, all exist"
          % (checked, scanned))


if __name__ == "__main__":
    main()
