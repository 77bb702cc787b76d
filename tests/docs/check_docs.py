#!/usr/bin/env python3
"""Checks of the user guide (README.md and docs/*.md), standard library only.

  check_docs.py links ROOT                   every relative link (and its #anchor) and every
                                             repository path named in code exists, the
                                             layer table of docs/architecture.md is
                                             cmake/TupeLayers.cmake's, and every pointer into a
                                             section from code (docs/x.md#anchor or
                                             docs/x.md "Heading") names a heading that exists
  check_docs.py commands ROOT TUPE           every `tupe <subcommand> ...` of a bash block parses:
                                             run as shown with --help appended (the options
                                             are checked, nothing runs), or as shown when it
                                             asks for --help, --version or help itself
  check_docs.py config-reference ROOT TUPE   docs/config-reference.md is exactly the output of
                                             `tupe help --config-reference`
  check_docs.py write-config-reference ROOT TUPE   writes that file (the `config_reference` target)
  check_docs.py claims ROOT                  README.md and bench/RESULTS.md quote the paper's 30%
                                             in its own measure: no sentence sets a loss-based
                                             step fraction ("steps to ... loss", "final loss")
                                             beside the paper's 30%, and none of the old
                                             phrasings that did is back

A repository path is a word in inline code or in a bash block that starts with a top-level
folder or file of the checkout and holds a '/' (`common/crc32c.h`, `launch/test.sh`,
`tests/checkpoint/`); `../shared/data/...` is looked up in $TUPE_SHARED_DATA. Words with
placeholders (<...>, $VAR, {a,b}) are skipped, and so is a code span holding <...> or "..."
(a quoted error line); a word with '*' must match a file. Prints one
line per problem ("FILE:LINE: ...") and exits 1 when there is any.
"""
import concurrent.futures
import difflib
import functools
import glob
import os
import re
import shlex
import subprocess
import sys

FENCE = re.compile(r"^\s*(```|~~~)\s*([\w+-]*)")
LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_LINK = re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
SHELL_OPERATORS = set("|&;<>()")


def guide_files(root):
    files = [os.path.join(root, "README.md")]
    files += sorted(glob.glob(os.path.join(root, "docs", "**", "*.md"), recursive=True))
    return [f for f in files if os.path.isfile(f)]


def blocks(text):
    """Yields (kind, lang, first_line_no, lines): kind 'prose' or 'code'."""
    lines = text.split("\n")
    start, lang, buf, in_code = 1, "", [], False
    for n, line in enumerate(lines, 1):
        m = FENCE.match(line)
        if m and not in_code:
            if buf:
                yield "prose", "", start, buf
            in_code, lang, buf, start = True, m.group(2).lower(), [], n + 1
        elif m and in_code and line.strip().startswith(m.group(1)) and not m.group(2):
            yield "code", lang, start, buf
            in_code, lang, buf, start = False, "", [], n + 1
        else:
            buf.append(line)
    if buf:
        yield ("code" if in_code else "prose"), lang, start, buf


def slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as '-'."""
    h = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


@functools.lru_cache(maxsize=None)
def anchors(path):
    """The anchors of every heading of a Markdown file (a repeated one gets -1, -2, ...)."""
    seen, out = {}, set()
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for kind, _, _, lines in blocks(text):
        if kind != "prose":
            continue
        for line in lines:
            m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m:
                s = slug(m.group(1))
                k = seen.get(s, 0)
                seen[s] = k + 1
                out.add(s if k == 0 else f"{s}-{k}")
    return frozenset(out)


def top_level_names(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files"], capture_output=True, text=True, check=True).stdout
        names = {p.split("/", 1)[0] for p in out.split("\n") if p}
        if names:
            return names
    except (OSError, subprocess.CalledProcessError):
        pass
    return {n for n in os.listdir(root) if not n.startswith(".") and n not in ("build", "runs")}


def path_words(text):
    for word in re.split(r"[\s,;]+", text):
        word = word.strip("'\"()[]")
        word = re.sub(r"[.:]+$", "", word)  # sentence punctuation
        word = re.sub(r":\d+(-\d+)?$", "", word)  # file:line
        if word:
            yield word


def check_path(root, shared, top, word):
    """None when `word` is no repository path or exists, else the problem."""
    if word.startswith("../shared/data/") or word == "../shared/data":
        target = os.path.join(shared, word[len("../shared/data/"):]) if shared else None
        if target is None or os.path.exists(target) or not os.path.isdir(shared):
            return None
        return f"{word}: no such file in TUPE_SHARED_DATA ({shared})"
    if "/" not in word or word.startswith(("/", "http", "./")):
        return None
    if re.search(r"[<>$`{}=]|\.\.\.", word):
        return None
    if word.split("/", 1)[0] not in top:
        return None
    target = os.path.join(root, word)
    if "*" in word or "?" in word:
        return None if glob.glob(target) else f"{word}: matches no file"
    return None if os.path.exists(target) else f"{word}: no such file or folder in the repository"


def check_links(root):
    problems = []
    shared = os.environ.get("TUPE_SHARED_DATA") or os.path.join(root, "..", "shared", "data")
    top = top_level_names(root)
    for path in guide_files(root):
        rel = os.path.relpath(path, root)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for kind, lang, start, lines in blocks(text):
            for n, line in enumerate(lines, start):
                where = f"{rel}:{n}"
                if kind == "code":
                    if lang in ("bash", "sh", "shell", "console"):
                        for word in path_words(line.split(" #", 1)[0]):
                            p = check_path(root, shared, top, word)
                            if p:
                                problems.append(f"{where}: {p}")
                    continue
                targets = LINK.findall(line) + REF_LINK.findall(line)
                for target in targets:
                    if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                        continue
                    file_part, _, anchor = target.partition("#")
                    dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
                    if file_part and not os.path.exists(dest):
                        problems.append(f"{where}: link '{target}': {os.path.relpath(dest, root)} does not exist")
                        continue
                    if anchor and dest.endswith(".md") and anchor not in anchors(dest):
                        problems.append(f"{where}: link '{target}': no heading with anchor #{anchor} in "
                                        f"{os.path.relpath(dest, root)}")
                for _, span in CODE_SPAN.findall(re.sub(r"\]\([^)]*\)", "]", line)):
                    if re.search(r"<[^>]*>|\.\.\.", span):  # a quoted message with placeholders
                        continue
                    for word in path_words(span):
                        p = check_path(root, shared, top, word)
                        if p:
                            problems.append(f"{where}: {p}")
    return problems


@functools.lru_cache(maxsize=None)
def headings(path):
    """The text of every heading of a Markdown file and of every named paragraph or list item
    (one that starts in bold), inline code marks and links dropped."""
    out = []
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for kind, _, _, lines in blocks(text):
        if kind != "prose":
            continue
        for line in lines:
            m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line) or re.match(r"^\s*(?:[-*]\s+)?\*\*(.+?)\*\*", line)
            if m:  # a heading, or a named paragraph or list item ("**Saved configs.** ...")
                out.append(re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", m.group(1)).replace("`", ""))
    return out


POINTER = re.compile(r"docs/([a-z0-9-]+\.md)(?:#([a-z0-9-]+)| \"([^\"\n]+(?:\n\s*(?://+|#+|\*)[^\"\n]*)?)\")")
CODE_SUFFIXES = (".cpp", ".h", ".py", ".sh", ".cmake", ".ini", ".txt", ".sbatch")


def check_section_pointers(root):
    """Every pointer into a section of the guide from code, comments and presets --
    docs/<page>.md#<anchor> or docs/<page>.md "<Heading>" -- names a page that exists and a
    heading it has (the quoted text: the start of a heading, code marks dropped)."""
    problems = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        if rel_dir.split(os.sep)[0] in (".git", "runs") or rel_dir.split(os.sep)[0].startswith("build"):
            dirnames[:] = []
            continue
        for name in filenames:
            if not (name.endswith(CODE_SUFFIXES) or "." not in name) or name == "check_docs.py":
                continue
            path = os.path.join(dirpath, name)
            try:
                text = open(path, encoding="utf-8").read()
            except (UnicodeDecodeError, OSError):
                continue
            for m in POINTER.finditer(text):
                page = os.path.join(root, "docs", m.group(1))
                # A quoted heading may run on over a comment's line break.
                section = re.sub(r"\s*\n\s*(//+|#+|\*)?\s*", " ", m.group(3) or "").replace("`", "")
                where = f"{os.path.relpath(path, root)}:{text[:m.start()].count(chr(10)) + 1}"
                if not os.path.exists(page):
                    problems.append(f"{where}: docs/{m.group(1)}: no such page")
                elif m.group(2) and m.group(2) not in anchors(page):
                    problems.append(f"{where}: docs/{m.group(1)}#{m.group(2)}: no such heading")
                elif m.group(3) and not any(h.startswith(section) for h in headings(page)):
                    problems.append(f"{where}: docs/{m.group(1)} \"{m.group(3)}\": no heading starts so")
    return problems


def check_layers(root):
    """docs/architecture.md's layer table (folder, library, may use) against TUPE_LAYERS of
    cmake/TupeLayers.cmake: the same libraries, folders and allowed uses."""
    cmake = open(os.path.join(root, "cmake", "TupeLayers.cmake"), encoding="utf-8").read()
    block = re.search(r"set\(TUPE_LAYERS(.*?)\)", cmake, re.S)
    if not block:
        return ["cmake/TupeLayers.cmake: no set(TUPE_LAYERS ...) found"]
    want = {}
    for lib, folder, uses in re.findall(r'"([^"|]*)\|([^"|]*)\|([^"|]*)"', block.group(1)):
        short = sorted(u.replace("tupe_", "") for u in uses.split(",") if u)
        want[f"{folder}/"] = (lib, "everything" if uses == "*" else ", ".join(short) or "-")
    have = {}
    doc = os.path.join(root, "docs", "architecture.md")
    if not os.path.exists(doc):
        return ["docs/architecture.md: missing (it holds the layer table)"]
    for n, line in enumerate(open(doc, encoding="utf-8"), 1):
        m = re.match(r"^\|\s*`([\w/]+/)`\s*\|\s*`(\w+)`[^|]*\|[^|]*\|\s*([^|]*?)\s*\|\s*$", line)
        if m:
            uses = m.group(3).strip()
            uses = "everything" if uses == "everything" else ", ".join(sorted(
                u.strip() for u in uses.split(",") if u.strip() not in ("", "—", "-"))) or "-"
            have[m.group(1)] = (m.group(2), uses, n)
    problems = []
    for folder, (lib, uses) in want.items():
        if folder not in have:
            problems.append(f"docs/architecture.md: the layer table has no row for `{folder}` ({lib})")
        elif have[folder][:2] != (lib, uses):
            problems.append(f"docs/architecture.md:{have[folder][2]}: `{folder}` is {have[folder][0]} using "
                            f"'{have[folder][1]}', cmake/TupeLayers.cmake says {lib} using '{uses}'")
    for folder in have.keys() - want.keys():
        problems.append(f"docs/architecture.md:{have[folder][2]}: `{folder}` is no layer of cmake/TupeLayers.cmake")
    return problems


def logical_lines(lines, start):
    """Joins backslash continuations; yields (line_no, text)."""
    buf, first = "", None
    for n, line in enumerate(lines, start):
        if first is None:
            first = n
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        yield first, buf + line
        buf, first = "", None
    if buf:
        yield first, buf


def tupe_commands(tokens):
    """The tupe argument lists of one shell line: after a word named `tupe` (build/cli/tupe,
    tupe), or after `--` of launch/tupe-mpirun, up to the next shell operator."""
    out = []
    i = 0
    while i < len(tokens):
        t = tokens[i]
        start = None
        if os.path.basename(t) == "tupe":
            start = i + 1
        elif os.path.basename(t) == "tupe-mpirun" and "--" in tokens[i:]:
            start = tokens.index("--", i) + 1
        if start is None:
            i += 1
            continue
        j = start
        while j < len(tokens) and not set(tokens[j]) <= SHELL_OPERATORS:
            j += 1
        if j > start or start < len(tokens):
            out.append(tokens[start:j])
        i = j
    return out


def parse_check(tupe, root, args):
    asks = {"--help", "-h", "--version"}
    run = list(args) if (not args or args[0] in ("help", "--version", "--help") or asks & set(args)) \
        else list(args) + ["--help"]
    try:
        p = subprocess.run([tupe] + run, cwd=root, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return "timed out"
    if p.returncode != 0:
        err = (p.stderr or p.stdout).strip().splitlines()
        return f"exit {p.returncode}: {err[-1] if err else ''}"
    return None


def check_commands(root, tupe):
    problems, commands = [], {}
    for path in guide_files(root):
        rel = os.path.relpath(path, root)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for kind, lang, start, lines in blocks(text):
            if kind != "code" or lang not in ("bash", "sh", "shell"):
                continue
            for n, line in logical_lines(lines, start):
                lex = shlex.shlex(line, posix=True, punctuation_chars=True)
                lex.whitespace_split = True
                lex.commenters = "#"
                try:
                    tokens = list(lex)
                except ValueError as e:
                    problems.append(f"{rel}:{n}: cannot split the shell line ({e})")
                    continue
                for args in tupe_commands(tokens):
                    commands.setdefault(tuple(args), []).append(f"{rel}:{n}")
    # One run per subcommand with the union of its options (each once, with the values of its
    # first use) parses them all at the cost of one start-up; only when that fails is each
    # command line run alone, to name the one that does not parse.
    merged, alone = {}, []
    for args in commands:
        if not args or args[0] in ("help", "--version", "--help") or not all(
                a.startswith("-") for a in args[1:2]):
            alone.append(args)
            continue
        options = merged.setdefault(args[0], {})
        name, first = None, False
        for a in args[1:]:
            if a.startswith("-"):
                name, first = a, a not in options
                options.setdefault(name, [])
            elif first:
                options[name].append(a)
    runs = {sub: [sub] + [t for name, values in opts.items() for t in [name] + values] for sub, opts in merged.items()}
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        merged_results = dict(zip(runs, pool.map(lambda sub: parse_check(tupe, root, runs[sub]), runs)))
        for sub, result in merged_results.items():
            if result:
                alone += [a for a in commands if a and a[0] == sub]
        results = dict(zip(alone, pool.map(lambda a: parse_check(tupe, root, a), alone)))
    for args in alone:
        if results[args]:
            problems.append(f"{commands[args][0]}: `tupe {' '.join(args)}` does not parse: {results[args]}")
    for sub, result in merged_results.items():
        if result and not any(results[a] for a in alone if a[0] == sub):
            problems.append(f"tupe {sub}: the options of every documented command line together do not parse "
                            f"({result}): two pages give one option different kinds of values?")
    print(f"{len(commands)} distinct tupe command lines in bash blocks checked in {len(runs) + len(alone)} runs")
    return problems


def reference_text(tupe, root):
    p = subprocess.run([tupe, "help", "--config-reference"], cwd=root, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        sys.exit(f"FAILED: tupe help --config-reference exited {p.returncode}: {p.stderr.strip()}")
    return p.stdout


def check_reference(root, tupe):
    want = reference_text(tupe, root)
    path = os.path.join(root, "docs", "config-reference.md")
    have = open(path, encoding="utf-8").read() if os.path.exists(path) else ""
    if have == want:
        print(f"docs/config-reference.md is the binary's reference ({want.count(chr(10))} lines)")
        return []
    diff = list(difflib.unified_diff(have.splitlines(), want.splitlines(), "docs/config-reference.md",
                                     "tupe help --config-reference", lineterm="", n=1))
    print("\n".join(diff[:60]))
    return ["docs/config-reference.md differs from `tupe help --config-reference` (regenerate: "
            "cmake --build build --target config_reference)"]


# Phrasings that once set a loss-based step fraction beside the paper's GLUE-based 30%, or gave a
# cause that was not measured.
OLD_CLAIMS = ["the paper: about 30%)", "(the paper's claim, here at d 128)",
              "is what holds the model there"]


def check_claims(root):
    """The paper's 30% (TUPE's GLUE average at 30% of the baselines' steps) is quoted in its own
    measure: a sentence that names 30% as the paper's and also a loss-based step count is one
    problem, and so is any of OLD_CLAIMS."""
    problems = []
    for rel in ("README.md", os.path.join("bench", "RESULTS.md")):
        text = open(os.path.join(root, rel), encoding="utf-8").read()
        for old in OLD_CLAIMS:
            if old in text:
                problems.append(f"{rel}:{text[:text.index(old)].count(chr(10)) + 1}: an old claim is back: '{old}'")
        flat = re.sub(r"\s+", " ", text)
        for sentence in re.split(r"(?<=[.;])\s", flat):
            paper_30 = re.search(r"paper[^.]{0,40}30\s?%|30\s?%[^.]{0,40}paper", sentence)
            loss_steps = re.search(r"(final|fixed|its) loss|to (BERT-A's|the reference's|its) (final )?loss", sentence)
            negated = re.search(r"not (comparable|the paper|reproduced)|not the paper's", sentence)
            if paper_30 and loss_steps and not negated:
                problems.append(f"{rel}: a loss-based step fraction beside the paper's 30%: '{sentence.strip()[:160]}'")
    return problems


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    what, root = sys.argv[1], os.path.abspath(sys.argv[2])
    if what == "links":
        problems = check_links(root) + check_layers(root) + check_section_pointers(root)
    elif what == "claims":
        problems = check_claims(root)
    elif what in ("commands", "config-reference", "write-config-reference") and len(sys.argv) == 4:
        tupe = os.path.abspath(sys.argv[3])
        if what == "commands":
            problems = check_commands(root, tupe)
        elif what == "config-reference":
            problems = check_reference(root, tupe)
        else:
            with open(os.path.join(root, "docs", "config-reference.md"), "w", encoding="utf-8") as f:
                f.write(reference_text(tupe, root))
            return
    else:
        sys.exit(__doc__)
    for p in problems:
        print(f"FAILED: {p}")
    if problems:
        sys.exit(1)
    print(f"{what}: OK ({len(guide_files(root))} files)")


if __name__ == "__main__":
    main()
