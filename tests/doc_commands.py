"""The `servetune` command lines of README.md and docs/*.md, found the way tests/test_doc_commands.py runs them.

Why a reader of its own: a documented command that fails is the first thing a new user meets, and the docs
change more often than anyone reruns them by hand. This module only finds the lines and their markers; running
them is the test's.

Which lines count:
- **Fenced code blocks** whose info string is `bash`, `sh`, `shell`, `console` or empty: every line whose command
  (after a `$ ` prompt; each part of `a && b`) is `servetune` or `.venv/bin/servetune` and a command's name
  (`servetune serve: ...`, a line of output, is not). A line ending in `\\` continues on the next; a `# ...`
  comment ends it.
- **Inline code spans** that start with `servetune `: in a table column headed `command` (README.md's Commands
  table: what a user types) every such span; elsewhere a span that is a whole command, i.e. the command's name
  followed by a word that is not an option (`servetune report DIR`, `servetune tune FILE --check`,
  `servetune experiment-schema > FILE`). A bare name (`servetune bench`) names the command and a name followed by
  an option (`servetune bench --save-result`, `servetune bench --ray ADDRESS`) names that option: neither is run.

A line that cannot run here carries a marker right beside it, with the reason: in markdown an HTML comment after
the span on the same line, `<!-- doc-test: gpu-only (needs a CUDA GPU) -->`; for a code block, the same comment
alone on the line just above its opening fence (it marks every command line of the block; rendered docs do not
show it), or a shell comment at the end of a code line or on the line above it,
`# doc-test: skip (needs a cluster of GPU nodes)`. Kinds: `gpu-only` and `skip`. A marker without a reason, of
another kind, or beside no command line is a problem the test reports.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path

FENCE_LANGS = frozenset({"", "bash", "sh", "shell", "console"})
MARKER_KINDS = frozenset({"gpu-only", "skip"})
PROGRAM = re.compile(r"^(?:\.venv/bin/)?servetune\s+(?:[a-z][a-z-]*|[A-Z]+)(?:\s|$)")
"""The program, then a command's name or a placeholder for one (`servetune serve: ...` is output, not a command)."""
SPAN = re.compile(r"`([^`\n]+)`")
HTML_MARKER = re.compile(r"<!--\s*doc-test:(?P<body>.*?)-->")
SHELL_MARKER = re.compile(r"^\s*doc-test:(?P<body>.*)$")
MARKER_BODY = re.compile(r"^\s*(?P<kind>[\w-]+)\s*(?:\((?P<reason>.*)\))?\s*$")


@dataclass(frozen=True)
class Marker:
    """A doc line's `doc-test:` marker: why it is not run here."""

    kind: str
    reason: str


@dataclass
class DocLine:
    """One line of a doc (a code line with its continuations, or a markdown line's spans) and its commands, in the
    order they are written: the commands of one table row share their placeholders (`import FILES --into DIR`,
    `report DIR` name one folder)."""

    path: str
    lineno: int
    commands: list[str]
    where: str
    """`code`, `table` or `prose`."""
    marker: Marker | None = None

    @property
    def id(self) -> str:
        return f"{self.path}:{self.lineno}"


@dataclass
class Found:
    """Every counted line of the docs, and the problems with their markers (`file:line: what`)."""

    lines: list[DocLine] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def doc_files(repo: Path) -> list[Path]:
    """README.md and docs/*.md, in a fixed order (the ids must not depend on the file system's)."""
    return [repo / "README.md", *sorted((repo / "docs").glob("*.md"))]


def find_lines(repo: Path) -> Found:
    """The counted lines of every doc file, ids relative to `repo`."""
    found = Found()
    for path in doc_files(repo):
        scan(path.read_text(encoding="utf-8"), path.relative_to(repo).as_posix(), found)
    return found


def _marker(body: str, where: str, found: Found) -> Marker | None:
    """A marker's `KIND (REASON)`; a problem (and no marker) when the kind is unknown or the reason is missing."""
    m = MARKER_BODY.match(body)
    kind, reason = (m["kind"], (m["reason"] or "").strip()) if m else (body.strip(), "")
    if kind not in MARKER_KINDS:
        found.problems.append(f"{where}: doc-test marker of unknown kind {kind!r} (use {' or '.join(MARKER_KINDS)})")
        return None
    if not reason:
        found.problems.append(f"{where}: doc-test marker without a reason: write `{kind} (why it cannot run here)`")
        return None
    return Marker(kind, reason)


def split_comment(text: str) -> tuple[str, str | None]:
    """(the command, its `#` comment or None): a `#` that starts a word outside quotes begins a shell comment."""
    quote: str | None = None
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or text[i - 1].isspace()):
            return text[:i].rstrip(), text[i + 1 :]
    return text.rstrip(), None


def _commands_of_code(text: str) -> list[str]:
    """The servetune commands of one shell line: each `&&` part that starts with the program."""
    parts = [p.strip() for p in text.split("&&")]
    return [p for p in parts if PROGRAM.match(p)]


def _scan_code(lines: list[str], start: int, lang: str, path: str, found: Found, block: Marker | None) -> int:
    """Reads a fenced block from `start` (the line after the fence), `block` marking each of its command lines that
    has no marker of its own; returns the index of its closing fence."""
    counted = len(found.lines)
    pending: Marker | None = None
    pending_at = ""
    i = start
    while i < len(lines) and not lines[i].lstrip().startswith("```"):
        lineno, raw = i + 1, lines[i].strip()
        while raw.endswith("\\") and i + 1 < len(lines):
            i += 1
            raw = raw[:-1].rstrip() + " " + lines[i].strip()
        i += 1
        if lang == "console":
            if not raw.startswith("$ "):
                continue
            raw = raw[2:]
        command, comment = split_comment(raw)
        marker = None
        if comment is not None and (m := SHELL_MARKER.match(comment)):
            marker = _marker(m["body"], f"{path}:{lineno}", found)
            if not command:  # a marker line of its own: for the command below it
                if pending_at:
                    found.problems.append(f"{pending_at}: doc-test marker beside no command line")
                pending, pending_at = marker, f"{path}:{lineno}"
                continue
        commands = _commands_of_code(command)
        if not commands:
            continue
        if pending_at:
            if marker is not None:
                found.problems.append(f"{path}:{lineno}: two doc-test markers for one line")
            marker, pending, pending_at = marker or pending, None, ""
        found.lines.append(DocLine(path, lineno, commands, "code", marker))
    if pending_at:
        found.problems.append(f"{pending_at}: doc-test marker beside no command line")
    if block is not None:
        if len(found.lines) == counted:
            found.problems.append(f"{path}:{start - 1}: doc-test marker above a code block with no command line")
        for line in found.lines[counted:]:
            line.marker = line.marker or block
    return i


def _cells(line: str) -> list[tuple[int, int]]:
    """The (start, end) of each cell of a table row (a `\\|` is a pipe inside a cell)."""
    bounds = [i for i, ch in enumerate(line) if ch == "|" and (i == 0 or line[i - 1] != "\\")]
    return list(itertools.pairwise(bounds))


def is_whole_command(span: str) -> bool:
    """`servetune NAME` followed by a word that is not an option, or a placeholder for the name itself
    (`servetune COMMAND --help`): see the module docstring."""
    words = span.split()
    return len(words) > 2 and (not words[2].startswith("-") or words[1].isupper())


def _scan_markdown(line: str, lineno: int, header: list[str] | None, path: str, found: Found) -> None:
    """The counted spans of one markdown line, and the marker beside them."""
    names = header or []
    cells = _cells(line) if header is not None else []
    commands: list[tuple[int, str]] = []
    for m in SPAN.finditer(line):
        span = m[1].replace("\\|", "|").strip()
        if not PROGRAM.match(span) or not span.startswith("servetune "):
            continue
        column = next((names[k] for k, (a, b) in enumerate(cells) if a < m.start() < b and k < len(names)), "")
        if column == "command" or is_whole_command(span):
            commands.append((m.end(), span))
    markers = list(HTML_MARKER.finditer(line))
    where = f"{path}:{lineno}"
    if len(markers) > 1:
        found.problems.append(f"{where}: more than one doc-test marker on a line")
    marker = None
    for m in markers[:1]:
        marker = _marker(m["body"], where, found)
        if not any(end <= m.start() for end, _ in commands):
            found.problems.append(f"{where}: doc-test marker beside no command line")
    if commands:
        found.lines.append(DocLine(path, lineno, [c for _, c in commands], "table" if cells else "prose", marker))


def scan(text: str, path: str, found: Found) -> None:
    """Adds the counted lines of one markdown text (named `path` in the ids) to `found`."""
    lines = text.splitlines()
    header: list[str] | None = None
    block: Marker | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        above = HTML_MARKER.fullmatch(stripped)
        if above and i + 1 < len(lines) and lines[i + 1].strip().startswith("```"):
            block = _marker(above["body"], f"{path}:{i + 1}", found)
            i += 1
            continue
        if stripped.startswith("```"):
            lang = stripped[3:].strip().split()[0].lower() if stripped[3:].strip() else ""
            if lang in FENCE_LANGS:
                i = _scan_code(lines, i + 1, lang, path, found, block) + 1
            else:
                if block is not None:
                    found.problems.append(f"{path}:{i}: doc-test marker above a {lang} block, which is not run")
                i += 1
                while i < len(lines) and not lines[i].strip().startswith("```"):
                    i += 1
                i += 1
            header, block = None, None
            continue
        if stripped.startswith("|"):
            if header is None:  # the first row of a table is its header
                header = [line[a + 1 : b].strip().lower() for a, b in _cells(line)]
        else:
            header = None
        _scan_markdown(line, i + 1, header, path, found)
        i += 1


def expand(command: str) -> list[str]:
    """The forms one documented command stands for, the plain one first: `[...]` parts are optional (the line
    without them, then with each one, its own optional parts expanded the same way) and `A|B` in a word of
    placeholders is either one. Brackets inside a word (`servetune[ray]`) or quotes are not optional parts."""
    for word in command.split():
        if "|" in word and re.fullmatch(r"[A-Z][\w.]*(\|[A-Z][\w.]*)+", word):
            return [f for alt in word.split("|") for f in expand(command.replace(word, alt, 1))]
    groups = _groups(command)
    if not groups:
        return [" ".join(command.split())]

    def without(keep: int | None, inner: str = "") -> str:
        out, last = [], 0
        for k, (a, b) in enumerate(groups):
            out.append(command[last:a])
            if k == keep:
                out.append(inner)
            last = b
        out.append(command[last:])
        return " ".join("".join(out).split())

    forms = [without(None)]
    for k, (a, b) in enumerate(groups):
        forms += [without(k, inner) for inner in expand(command[a + 1 : b - 1])]
    return forms


def _groups(text: str) -> list[tuple[int, int]]:
    """(start, end) of each top-level `[...]` that starts a word, outside quotes."""
    out: list[tuple[int, int]] = []
    depth, start, quote = 0, 0, None
    for i, ch in enumerate(text):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "[" and (depth or i == 0 or text[i - 1].isspace()):
            if depth == 0:
                start = i
            depth += 1
        elif ch == "]" and depth:
            depth -= 1
            if depth == 0:
                out.append((start, i + 1))
    return out
