#!/usr/bin/env python3
"""Writes the man page pytrace-sample.1 from the text of `pytrace-sample --help`.

usage: tools/gen-man.py BINARY [OUTPUT]   (OUTPUT: written whole or not at all; default
stdout). `make man` runs it into docs/pytrace-sample.1, the page `make install` installs.

The help is read as it is laid out: the usage lines (SYNOPSIS, and each form's purpose
in DESCRIPTION), the paragraph after them (DESCRIPTION), blocks headed "name:" whose
lines are options (OPTIONS, one .TP each, a subsection per heading), paragraphs opened
by a label ("Files: ...", "Exit status: ...") that become their own section or a
subsection of DESCRIPTION, and unlabelled paragraphs (among the options: OPTIONS'
introduction; elsewhere: DESCRIPTION). EXAMPLES, ENVIRONMENT and SEE ALSO are kept
below, by hand. Only Python 3's standard library; exit status 1 with a message when
the binary can't be run or its help doesn't have that layout.
"""
import os
import re
import subprocess
import sys
import tempfile
import textwrap

PROG = "pytrace-sample"
SUMMARY = "sampling profiler for Python process trees"

# Labelled paragraphs that are a section of their own (lower-cased label); the others are
# subsections of DESCRIPTION.
OWN_SECTIONS = ("exit status", "environment", "files")

# The hand-written tail: (what it shows, the command).
EXAMPLES = [
    ("Launch a Python program, follow every process it starts and write a flame chart "
     "to open at https://ui.perfetto.dev:",
     "pytrace-sample -o train.json -- python3 train.py"),
    ("The same with the C frames around the Python ones, as a gzip'd trace:",
     "pytrace-sample --native -o train.json.gz -- python3 train.py"),
    ("Attach to two running process trees and their descendants for 30 seconds "
     "(root: another user's processes, and exact stacks with the eBPF reader):",
     "sudo pytrace-sample -p 1234,5678 -d 30 -o server.json"),
    ("Print every thread's Python stack of a running process once:",
     "sudo pytrace-sample dump -p 1234"),
    ("Print the report of a written trace again, or its findings as JSON for scripts:",
     "pytrace-sample report train.json\npytrace-sample report --json train.json"),
]
ENVIRONMENT = [
    ("PATH", "Searched for CMD when it names no folder, as execvp(3) does."),
    ("SUDO_UID, SUDO_GID, SUDO_USER",
     "Set by sudo(8): when running as root, CMD runs as this user and the trace file "
     "belongs to them."),
]
SEE_ALSO = [("perf", "1"), ("py-spy", "1")]


class HelpError(Exception):
    pass


def run(binary, arg):
    try:
        p = subprocess.run([binary, arg], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise HelpError("cannot run %s %s: %s" % (binary, arg, e))
    if p.returncode != 0:
        raise HelpError("%s %s exited with %d %s" % (binary, arg, p.returncode,
                                                      p.stderr.strip()))
    return p.stdout


# Roff text -----------------------------------------------------------------------------

def escape(text):
    """@text with roff's escape character written as itself."""
    return text.replace("\\", "\\e")


def protect(line):
    """@line (already escaped) safe as a text line: a leading . or ' is no request."""
    return "\\&" + line if line[:1] in (".", "'") else line


def literal(text):
    """@text as typed by the user (already escaped): every hyphen a minus sign."""
    return text.replace("-", "\\-")


SYNTAX_TOKEN = re.compile(r"(?P<opt>--?[A-Za-z][\w-]*|--)"
                          r"|(?P<word>\.?[A-Za-z][\w-]*(?:\.[A-Za-z][\w-]*)*)"
                          r"|(?P<other>\S)|(?P<space>\s+)")


def syntax(text):
    """A usage form or option tag: options, commands in bold, metavariables in italics
    and never hyphenated."""
    out = []
    for m in SYNTAX_TOKEN.finditer(text):
        tok = escape(m.group())
        if m.lastgroup == "opt":
            out.append("\\fB\\%%%s\\fR" % literal(tok))
        elif m.lastgroup == "word":
            bold = tok[0].islower() and tok != "options"
            out.append("\\f%s\\%%%s\\fR" % ("B" if bold else "I", literal(tok)))
        elif m.lastgroup == "space":
            out.append(" ")
        else:
            out.append(tok)
    return protect("".join(out))


PROSE_OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")


def prose(lines):
    """Help text lines as roff text lines: options in bold and never hyphenated, the rest
    as written."""
    out = []
    for line in lines:
        line = escape(" ".join(line.split()))
        line = PROSE_OPTION.sub(lambda m: "\\fB\\%%%s\\fR" % literal(m.group(1)), line)
        out.append(protect(line))
    return out


def wrapped(text):
    """@text as lines of the help's width, for the page's source to read like it."""
    return textwrap.wrap(text, 88, break_long_words=False, break_on_hyphens=False)


def capitalized(lines):
    """@lines with the first letter a capital, as a paragraph whose label was cut off."""
    if lines and lines[0]:
        lines = [lines[0][0].upper() + lines[0][1:]] + lines[1:]
    return lines


# Reading the help ----------------------------------------------------------------------

HEADING = re.compile(r"^([A-Za-z][\w -]*):$")
LABEL = re.compile(r"^([A-Za-z][\w-]*(?: [A-Za-z][\w-]*)?): +(\S.*)$")


def blocks(text):
    """The help's paragraphs: lists of lines, split at blank lines."""
    out, cur = [], []
    for line in text.splitlines():
        if line.strip():
            cur.append(line.rstrip())
        elif cur:
            out.append(cur)
            cur = []
    if cur:
        out.append(cur)
    return out


def usage_forms(block):
    """[(form, purpose lines)] from the usage lines."""
    if not block[0].startswith("usage: "):
        raise HelpError("the help does not start with 'usage: '")
    forms = []
    for line in [block[0][len("usage: "):]] + block[1:]:
        line = line.strip()
        if line.startswith(PROG + " ") or line == PROG:
            parts = re.split(r"\s{2,}", line, 1)
            forms.append((parts[0], parts[1:]))
        elif forms:
            forms[-1][1].append(line)
        else:
            raise HelpError("usage line without %s: %r" % (PROG, line))
    return forms


def options(block):
    """[(tag, description lines)] from the lines under a heading."""
    opts = []
    for line in block:
        indent = len(line) - len(line.lstrip())
        if line.lstrip().startswith("-") and indent <= 8:
            parts = re.split(r"\s{2,}", line.strip(), 1)
            opts.append((parts[0], parts[1:]))
        elif opts:
            opts[-1][1].append(line.strip())
        else:
            raise HelpError("option text before any option: %r" % line)
    return opts


def parse(text):
    """The help as {forms, description, groups, notes, options_intro, labelled}."""
    bl = blocks(text)
    if len(bl) < 2 or HEADING.match(bl[1][0]):
        raise HelpError("the help has no paragraph after its usage lines")
    help_ = {"forms": usage_forms(bl[0]), "description": bl[1], "groups": [],
             "notes": [], "options_intro": [], "labelled": []}
    heads = [i for i, b in enumerate(bl) if HEADING.match(b[0])]
    if not heads:
        raise HelpError("the help has no option headings ('output:' ...)")
    for i, b in enumerate(bl[2:], 2):
        head, label = HEADING.match(b[0]), LABEL.match(b[0])
        if head:
            help_["groups"].append((head.group(1), options(b[1:])))
        elif label:
            help_["labelled"].append((label.group(1), [label.group(2)] + b[1:]))
        elif heads[0] < i < heads[-1]:
            help_["options_intro"].append(b)
        else:
            help_["notes"].append(b)
    return help_


# Writing the page ----------------------------------------------------------------------

def exit_status(lines):
    """The exit status paragraph: its list of "N meaning" items as .TP entries."""
    text = " ".join(" ".join(lines).split())
    m = re.match(r"^(.*):\s+(\d+ [^:]*?)\.?$", text)
    items = []
    if m:
        depth, start = 0, 0
        for i, ch in enumerate(m.group(2)):
            depth += {"(": 1, ")": -1}.get(ch, 0)
            if depth == 0 and re.match(r",\s+\d+ ", m.group(2)[i:]):
                items.append(m.group(2)[start:i].strip())
                start = i + 1
        items.append(m.group(2)[start:].strip())
    if not m or not all(re.match(r"^\d+ \S", it) for it in items):
        return [".PP"] + prose(lines)
    out = [".PP"] + prose(wrapped(m.group(1) + ":"))
    for it in items:
        status, meaning = it.split(" ", 1)
        out += [".TP", ".B %s" % status] + prose([meaning])
    return out


def section(title):
    return ['.SH "%s"' % title if " " in title else ".SH %s" % title]


def render(help_, version):
    out = ['.\\" Generated by tools/gen-man.py from `%s --help`: do not edit.' % PROG,
           '.\\" Change the help text in cli/main.c, then run `make man`.',
           '.TH %s 1 "" "%s %s" "User Commands"' % (PROG.upper(), PROG, version)]
    out += section("NAME") + ["%s \\- %s" % (literal(PROG), SUMMARY)]
    out += section("SYNOPSIS")
    for i, (form, _) in enumerate(help_["forms"]):
        out += ([".br"] if i else []) + [syntax(form)]

    out += section("DESCRIPTION") + prose(help_["description"])
    for form, purpose in help_["forms"]:
        if purpose:
            out += [".TP", syntax(form)] + prose(purpose)
    for note in help_["notes"]:
        out += [".PP"] + prose(note)
    own = {}
    for label, lines in help_["labelled"]:
        if label.lower() in OWN_SECTIONS:
            own.setdefault(label.lower(), []).append(capitalized(lines))
        else:
            out += ['.SS "%s"' % escape(label[0].upper() + label[1:])] + prose(capitalized(lines))

    out += section("OPTIONS")
    for note in help_["options_intro"]:
        out += [".PP"] + prose(note)
    for heading, opts in help_["groups"]:
        out += ['.SS "%s"' % escape(heading[0].upper() + heading[1:])]
        for tag, desc in opts:
            out += [".TP", syntax(tag)] + prose(desc)

    if "exit status" in own:
        out += section("EXIT STATUS")
        for lines in own["exit status"]:
            out += exit_status(lines)
    out += section("ENVIRONMENT")
    for lines in own.get("environment", []):
        out += [".PP"] + prose(lines)
    for name, what in ENVIRONMENT:
        out += [".TP", ".B %s" % escape(name)] + prose(wrapped(what))
    if "files" in own:
        out += section("FILES")
        for lines in own["files"]:
            out += [".PP"] + prose(lines)

    out += section("EXAMPLES")
    for i, (what, cmd) in enumerate(EXAMPLES):
        out += ([".PP"] if i else []) + prose(wrapped(what))
        out += [".PP", ".RS 4", ".nf"]
        out += [protect(literal(escape(c))) for c in cmd.splitlines()]
        out += [".fi", ".RE"]
    out += section("SEE ALSO")
    out += [".BR %s (%s)%s" % (literal(escape(name)), sec, "," if i < len(SEE_ALSO) - 1 else "")
            for i, (name, sec) in enumerate(SEE_ALSO)]
    return "\n".join(out) + "\n"


def write(path, text):
    """@text into @path, whole or not at all."""
    fd, tmp = tempfile.mkstemp(prefix=".gen-man-", dir=os.path.dirname(path) or ".")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.rename(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def main():
    if len(sys.argv) not in (2, 3):
        sys.stderr.write("usage: %s BINARY [OUTPUT]\n" % sys.argv[0])
        return 64
    binary = sys.argv[1]
    if os.sep not in binary:
        binary = os.path.join(".", binary)
    try:
        version = (run(binary, "--version").split() or [""])[-1]
        if not re.match(r"^\d[\w.+~-]*$", version):
            raise HelpError("%s --version does not end with a version number" % binary)
        page = render(parse(run(binary, "--help")), version)
    except HelpError as e:
        sys.stderr.write("gen-man.py: %s\n" % e)
        return 1
    if len(sys.argv) == 3:
        write(sys.argv[2], page)
    else:
        sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
