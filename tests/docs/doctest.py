#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Runs what a guide tells its reader to run (tests/docs/README.md).

usage: doctest.py --source DIR --build DIR [--work DIR] [--only LINE] GUIDE.md
       doctest.py --source DIR --build DIR --static-only|--flags-and-links FILE...

A guide's fenced blocks in sh (bash, shell, console) or python must each
carry an annotation, an HTML comment right before the fence (invisible on
GitHub):

    <!-- doc-test: run
         sub: --max_step 4000 -> --max_step 20
         expect: Test average MRR :
    -->

kinds: run (the block is run), output (the block is what the run block
before it printed, checked line by line), skip: REASON (not run, e.g. a
command that needs a cluster), setup (the comment's own lines are a hidden
bash script, run in order with the blocks). A section between
<!-- doc-test: pending-begin REASON --> and <!-- doc-test: pending-end -->
documents a feature that has not landed yet: nothing in it is run or
checked; the summary lists it.

Static checks, on every file: each `rdps COMMAND ... --flag` in a code
span or block (skipped ones too) names a command of `rdps --help` and flags
of `rdps COMMAND --help`; each relative link reaches a file, and its
#anchor a heading of it.
"""
import argparse
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time

SH_LANGS = {"sh", "bash", "shell", "console"}
PY_LANGS = {"python", "py"}
ANNOT_RE = re.compile(r"<!--\s*doc-test:\s*(.*?)-->", re.S)
FENCE_RE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)\s*$")
DEFAULT_TIMEOUT = 180
# Ports the guides' examples use (ip_configs, --port): each run gets its own
# free base instead, so guides run in parallel with each other and with
# other tests.
DOC_PORTS = range(30050, 30060)


class Block:
    def __init__(self, path, line, lang, text, annot, pending):
        self.path, self.line, self.lang, self.text = path, line, lang, text
        self.kind, self.arg, self.opts = parse_annot(annot, path, line) if annot else (None, "", [])
        self.pending = pending
        self.output = None

    @property
    def where(self):
        return "%s:%d" % (self.path, self.line)

    def opt(self, key, default=None):
        for k, v in self.opts:
            if k == key:
                return v
        return default

    def opts_of(self, key):
        return [v for k, v in self.opts if k == key]


class Failure(Exception):
    pass


def parse_annot(text, path, line):
    """'run\n sub: a -> b' -> ('run', '', [('sub', 'a -> b')]). A setup's
    lines are its script (('script', text))."""
    lines = text.strip("\n").split("\n")
    head = lines[0].strip()
    kind, _, arg = head.partition(" ")
    kind = kind.rstrip(":")
    if kind == "skip":
        arg = head[len("skip"):].lstrip(": ").strip()
    if kind == "setup":
        return kind, arg, [("script", "\n".join(lines[1:]))]
    opts = []
    for raw in lines[1:]:
        s = raw.strip()
        if not s:
            continue
        m = re.match(r"([a-z-]+):\s?(.*)$", s)
        if not m:
            raise Failure("%s:%d: doc-test annotation: '%s' is not 'key: value'" % (path, line, s))
        opts.append((m.group(1), m.group(2)))
    if kind not in ("run", "output", "skip", "setup", "pending-begin", "pending-end"):
        raise Failure("%s:%d: unknown doc-test kind '%s'" % (path, line, kind))
    if kind == "skip" and not arg:
        raise Failure("%s:%d: doc-test: skip needs its reason (skip: WHY)" % (path, line))
    for k, _ in opts:
        if k not in ("sub", "expect", "expect-re", "file", "timeout", "exit", "env", "id",
                     "of", "ignore", "cwd", "keep", "python"):
            raise Failure("%s:%d: doc-test: unknown key '%s'" % (path, line, k))
    return kind, arg, opts


def parse_md(path, rel):
    """The file's blocks (fenced, and hidden setups) in order, its code
    spans outside pending sections, its links and its headings' anchors."""
    text = open(path, encoding="utf-8").read()
    lines = text.split("\n")
    items, spans, links, anchors = [], [], [], {}
    pending = None
    annot = None
    annot_line = 0
    i = 0
    while i < len(lines):
        ln = lines[i]
        if "<!--" in ln and "doc-test:" in ln:
            j = i
            chunk = ln
            while "-->" not in chunk:
                j += 1
                chunk += "\n" + lines[j]
            m = ANNOT_RE.search(chunk)
            body = m.group(1)
            kind = body.strip().split()[0].rstrip(":")
            if kind == "pending-begin":
                pending = body.strip()[len("pending-begin"):].strip() or "pending"
                items.append(Block(rel, i + 1, "", "", None, pending))
            elif kind == "pending-end":
                pending = None
            elif kind == "setup":
                b = Block(rel, i + 1, "sh", "", body, pending)
                b.text = b.opt("script")
                items.append(b)
            else:
                annot, annot_line = body, i + 1
            i = j + 1
            continue
        m = FENCE_RE.match(ln)
        if m:
            fence, lang = m.group(2), m.group(3).lower()
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith(fence):
                j += 1
            body = "\n".join(lines[i + 1:j]) + "\n"
            items.append(Block(rel, i + 1, lang, body, annot, pending))
            annot = None
            i = j + 1
            continue
        if ln.strip():
            annot = None  # an annotation belongs to the fence right after it
        h = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", ln)
        if h:
            slug = github_slug(h.group(2))
            n = anchors.get(slug, 0)
            anchors[slug] = n + 1
            if n:
                anchors[slug + "-%d" % n] = 1
        if pending is None:
            for s in re.findall(r"(?<!`)`([^`]+)`(?!`)", ln):
                spans.append((i + 1, s))
        if pending is None:
            for t in re.findall(r"\]\(([^)\s]+)\)", ln):
                links.append((i + 1, t))
        i += 1
    return items, spans, links, anchors


def github_slug(title):
    s = title.strip().lower()
    s = re.sub(r"`", "", s)
    s = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", s)
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


# ---------------------------------------------------------------------------
# Static checks: commands and flags, links.

class Help:
    def __init__(self, rdps):
        self.rdps = rdps
        self.cache = {}
        top = self.text([])
        sect = top.split("commands:", 1)[1].split("\n\n", 1)[0]
        self.commands = {l.split()[0] for l in sect.strip().split("\n")}

    def text(self, args):
        key = tuple(args)
        if key not in self.cache:
            r = subprocess.run([self.rdps] + list(args) + ["--help"], capture_output=True,
                               text=True)
            self.cache[key] = r.stdout + r.stderr if r.returncode == 0 else None
        return self.cache[key]


def flag_problems(help, tokens):
    """Problems of one command line's rdps invocations: unknown commands or
    flags. tokens: shlex tokens of one line (continuations joined)."""
    out = []
    for i, t in enumerate(tokens):
        if os.path.basename(t) != "rdps" or i + 1 >= len(tokens):
            continue
        cmd = tokens[i + 1]
        if cmd.startswith("-") or cmd in ("COMMAND", "<command>"):
            continue
        if cmd not in help.commands:
            out.append("'rdps %s': no such command (rdps --help lists %s)" %
                       (cmd, ", ".join(sorted(help.commands))))
            continue
        args = [cmd]
        j = i + 2
        if cmd == "bench" and j < len(tokens) and not tokens[j].startswith("-"):
            args.append(tokens[j])
        target = args
        exec_mode = False
        while j < len(tokens):
            t = tokens[j]
            if t in ("|", "&&", "||", ";", "&", ">", "2>&1", ")") or t.startswith(">"):
                break
            if t == "--" and cmd == "launch":
                if exec_mode:  # a program and its own arguments
                    break
                target = ["train"]
                j += 1
                continue
            if t == "--exec":
                exec_mode = True
            if t in ("--mpi_arg", "--srun_arg", "--wrapper"):
                out += check_flag(help, target, t)
                j += 2
                continue
            if t.startswith("--mpi_arg=") or t.startswith("--srun_arg="):
                j += 1
                continue
            if t == "--server_arg" or t.startswith("--server_arg="):
                val = tokens[j + 1] if t == "--server_arg" and j + 1 < len(tokens) else t[13:]
                if val.startswith("-"):
                    out += check_flag(help, ["server"], val)
                j += 2 if t == "--server_arg" else 1
                continue
            if re.match(r"^--?[A-Za-z][\w-]*(=.*)?$", t):
                out += check_flag(help, target, t)
            j += 1
    return out


def check_flag(help, cmd, tok):
    flag = tok.split("=", 1)[0]
    text = help.text(cmd)
    if text is None:
        return ["'rdps %s --help' fails" % " ".join(cmd)]
    if re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(flag), text):
        return []
    return ["'rdps %s' has no option %s (not in rdps %s --help)" %
            (" ".join(cmd), flag, " ".join(cmd))]


def shell_lines(text):
    """A block's command lines, continuations joined, comments dropped."""
    out, cur = [], ""
    for ln in text.split("\n"):
        s = ln.rstrip()
        if s.endswith("\\"):
            cur += s[:-1] + " "
            continue
        cur += s
        out.append(cur)
        cur = ""
    res = []
    for ln in out:
        try:
            toks = shlex.split(ln, comments=True)
        except ValueError:
            toks = ln.split()
        if toks:
            res.append(toks)
    return res


def static_checks(src, help, rel, items, spans, links, annotations=True):
    problems = []
    for b in items:
        # A block that shows an error (exit: N) may misspell on purpose.
        if b.pending or b.lang not in SH_LANGS or int(b.opt("exit", 0)):
            continue
        for toks in shell_lines(b.text):
            problems += ["%s: %s" % (b.where, p) for p in flag_problems(help, toks)]
    for line, s in spans:
        if re.match(r"^(build/)?rdps \S", s):
            try:
                toks = shlex.split(s)
            except ValueError:
                toks = s.split()
            problems += ["%s:%d: `%s`: %s" % (rel, line, s, p) for p in flag_problems(help, toks)]
    here = os.path.dirname(os.path.join(src, rel))
    for line, t in links:
        if re.match(r"^[a-z]+:", t):
            continue
        path, _, anchor = t.partition("#")
        target = os.path.normpath(os.path.join(here, path)) if path else os.path.join(src, rel)
        if not os.path.exists(target):
            problems.append("%s:%d: link %s: no such file %s" %
                            (rel, line, t, os.path.relpath(target, src)))
            continue
        if anchor and target.endswith(".md"):
            _, _, _, anchors = parse_md(target, os.path.relpath(target, src))
            if anchor not in anchors:
                problems.append("%s:%d: link %s: %s has no heading with anchor #%s" %
                                (rel, line, t, os.path.relpath(target, src), anchor))
    for b in items:
        if not annotations:
            break
        if b.kind is None and b.lang in SH_LANGS | PY_LANGS and not b.pending:
            problems.append("%s: a %s block without a doc-test annotation (run, output, "
                            "skip: WHY; tests/docs/README.md)" % (b.where, b.lang))
    return problems


# ---------------------------------------------------------------------------
# Running a guide.

def free_port_base(n=len(DOC_PORTS) + 8):
    for _ in range(200):
        base = 20000 + (os.getpid() * 37 + int(time.time() * 1000)) % 30000
        base += _ * 97
        ok = True
        for p in range(base, base + n):
            s = socket.socket()
            try:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind(("", p))
            except OSError:
                ok = False
            finally:
                s.close()
            if not ok:
                break
        if ok:
            return base
    raise Failure("no free range of %d ports" % n)


def number_re(line):
    """A documented output line as a pattern: numbers and durations match
    any, runs of blanks any run, <placeholders> anything."""
    dur = r"(?:\d+h \d+m|\d+m \d+s|\d+(?:\.\d+)? s|\?)"
    num = r"-?\d+(?:[.,]\d+)*(?:e[-+]?\d+)?"
    out, i = "", 0
    token = re.compile(r"(\d+h \d+m|\d+m \d+s|\d+(?:\.\d+)? s(?![\w/])|<[^<>\s][^<>]*>|-?\d+(?:[.,]\d+)*(?:e[-+]?\d+)?|\s+)")
    for m in token.finditer(line):
        out += re.escape(line[i:m.start()])
        t = m.group(0)
        if t.isspace():
            out += r"\s+"
        elif t.startswith("<"):
            out += ".*"
        elif re.match(r"^(\d+h \d+m|\d+m \d+s|\d+(?:\.\d+)? s)$", t):
            out += dur
        else:
            out += num
        i = m.end()
    out += re.escape(line[i:])
    return out


def check_output(b, shown, ran):
    """Every line of an output block appears in ran's output, in order
    (numbers and durations may differ); '...' lines stand for any."""
    actual = ran.output.split("\n")
    ignores = [re.compile(x) for x in b.opts_of("ignore")]
    at = 0
    for ln in shown.split("\n"):
        s = ln.strip()
        if not s or s == "..." or any(r.search(ln) for r in ignores):
            continue
        pat = re.compile(number_re(s))
        k = at
        while k < len(actual) and not pat.search(actual[k]):
            k += 1
        if k == len(actual):
            raise Failure("%s: output block: the line\n    %s\nis not in the output of the "
                          "block at %s (after its line %d); it printed:\n%s" %
                          (b.where, s, ran.where, at + 1, tail(ran.output, 60)))
        at = k + 1


def tail(text, n):
    lines = text.rstrip("\n").split("\n")
    cut = lines[-n:]
    pre = "    [... %d lines]\n" % (len(lines) - n) if len(lines) > n else ""
    return pre + "\n".join("    " + l for l in cut)


class Runner:
    def __init__(self, src, build, work, rel):
        self.src, self.build, self.work, self.rel = src, build, work, rel
        self.port = free_port_base()
        self.groups = []
        self.env = dict(os.environ)
        home = os.path.join(work, "home")
        bindir = os.path.join(work, "bin")
        os.makedirs(home)
        os.makedirs(bindir)
        os.symlink(os.path.join(build, "rdps"), os.path.join(bindir, "rdps"))
        for name in os.listdir(src):
            if name.startswith(".") or name == "build" or os.path.exists(os.path.join(work, name)):
                continue
            os.symlink(os.path.join(src, name), os.path.join(work, name))
        os.symlink(build, os.path.join(work, "build"))
        for k in ("RDPS_SECRET", "RDPS_IP_CONFIG", "RDPS_LOG_LEVEL", "PYTHONPATH"):
            self.env.pop(k, None)
        self.env.update({
            "HOME": home,
            "PATH": bindir + ":" + self.env.get("PATH", "/usr/bin:/bin"),
            "PYTHONPATH": os.path.join(src, "python"),
            "RDPS_BUILD_DIR": build,
            "DOCTEST_SCRATCH": work,
            "DOCTEST_SOURCE": src,
            "PYTHONDONTWRITEBYTECODE": "1",
        })

    def ports(self, text):
        return re.sub(r"\b(3005\d)\b", lambda m: str(self.port + int(m.group(1)) - 30050), text)

    def prepare(self, b):
        text = b.text
        for sub in b.opts_of("sub"):
            old, sep, new = sub.partition(" -> ")
            if not sep:
                raise Failure("%s: sub: '%s' is not 'OLD -> NEW'" % (b.where, sub))
            if old not in text:
                raise Failure("%s: sub: '%s' is not in the block (did the block change?)" %
                              (b.where, old))
            text = text.replace(old, new)
        return self.ports(text)

    def run(self, b):
        text = self.prepare(b)
        env = dict(self.env)
        for e in b.opts_of("env"):
            k, _, v = e.partition("=")
            env[k.strip()] = self.ports(v.strip())
        py = b.lang in PY_LANGS
        script = os.path.join(self.work, ".block-%d.%s" % (b.line, "py" if py else "sh"))
        with open(script, "w") as f:
            if not py:
                f.write("set -eo pipefail\n")
            f.write(text)
        if py:
            interp = b.opt("python", "/usr/bin/python3")
            argv = [interp, script]
        else:
            argv = ["bash", script]
        cwd = self.src if b.opt("cwd") == "source" else self.work
        timeout = int(b.opt("timeout", DEFAULT_TIMEOUT))
        t0 = time.monotonic()
        # Output to a file, not a pipe: processes a block leaves running
        # (servers started with &) keep writing to it without holding the
        # block up.
        log = script + ".out"
        with open(log, "wb") as out:
            p = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill_group(p.pid)
            p.wait()
            b.output = open(log, "rb").read().decode(errors="replace")
            raise Failure("%s: timed out after %d s (timeout: %d); it printed:\n%s" %
                          (b.where, timeout, timeout, tail(b.output, 40)))
        b.output = open(log, "rb").read().decode(errors="replace")
        if b.opt("keep"):
            self.groups.append(p.pid)
        else:
            self.kill_group(p.pid)
        want = int(b.opt("exit", 0))
        secs = time.monotonic() - t0
        if rc != want:
            raise Failure("%s: exit status %d%s; the block as run:\n%s\nit printed:\n%s" %
                          (b.where, rc, " (expected %d)" % want if want else "",
                           "\n".join("    " + l for l in text.rstrip().split("\n")),
                           tail(b.output, 60)))
        for e in b.opts_of("expect"):
            if self.ports(e) not in b.output:
                raise Failure("%s: expected output '%s' is not there; it printed:\n%s" %
                              (b.where, e, tail(b.output, 60)))
        for e in b.opts_of("expect-re"):
            if not re.search(self.ports(e), b.output, re.M):
                raise Failure("%s: expected output /%s/ is not there; it printed:\n%s" %
                              (b.where, e, tail(b.output, 60)))
        for fpath in b.opts_of("file"):
            full = os.path.join(cwd, os.path.expanduser(fpath.replace("~", env["HOME"], 1)))
            if not os.path.exists(full):
                raise Failure("%s: the block made no %s" % (b.where, fpath))
        return secs

    def kill_group(self, pgid):
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                return
            for _ in range(50):
                try:
                    os.killpg(pgid, 0)
                except ProcessLookupError:
                    return
                time.sleep(0.1)

    def close(self):
        for g in self.groups:
            self.kill_group(g)


def duplicates(src, files):
    """Sentences of 10 words or more (prose, outside code and comments)
    that two of the files share: the guides link each other and the files
    they lean on instead of repeating them."""
    seen = {}
    for f in files:
        t = open(os.path.join(src, f), encoding="utf-8").read()
        t = re.sub(r"<!--.*?-->", "", t, flags=re.S)
        t = re.sub(r"(?ms)^\s*(`{3,}|~{3,}).*?^\s*\1\s*$", "", t)
        t = re.sub(r"\s+", " ", t)
        for sent in re.split(r"(?<=[.;:])\s+", t):
            words = sent.split()
            if len(words) >= 10:
                seen.setdefault(" ".join(words), set()).add(f)
    return ["text in %s: \"%s\"" % (" and ".join(sorted(fs)), s[:160])
            for s, fs in seen.items() if len(fs) > 1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--work")
    ap.add_argument("--static-only", action="store_true")
    ap.add_argument("--flags-and-links", action="store_true",
                    help="only commands, flags and links (files the guides link, whose "
                         "blocks are not theirs to run: deploy/README.md, perf/report.md)")
    ap.add_argument("--duplicates", action="store_true",
                    help="also fail on a sentence two of the files share")
    ap.add_argument("--only", type=int, help="run the blocks up to this line only")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    src, build = os.path.abspath(a.source), os.path.abspath(a.build)
    help = Help(os.path.join(build, "rdps"))
    failures = 0
    for f in a.files:
        rel = os.path.relpath(os.path.abspath(f), src)
        try:
            items, spans, links, _ = parse_md(os.path.join(src, rel), rel)
        except Failure as e:
            print("docs: FAIL: %s" % e)
            failures += 1
            continue
        problems = static_checks(src, help, rel, items, spans, links,
                                 annotations=not a.flags_and_links)
        for p in problems:
            print("docs: FAIL: %s" % p)
        failures += len(problems)
        nspan = sum(1 for _, s in spans if re.match(r"^(build/)?rdps \S", s))
        print("docs: %s: %d rdps command spans and the blocks' command lines checked against "
              "--help, %d links" % (rel, nspan, len(links)))
        if a.static_only or a.flags_and_links:
            continue
        failures += run_file(a, src, build, rel, items)
    if a.duplicates:
        rels = [os.path.relpath(os.path.abspath(f), src) for f in a.files]
        dups = duplicates(src, rels)
        for d in dups:
            print("docs: FAIL: %s" % d)
        failures += len(dups)
        print("docs: no sentence shared by two of %d files" % len(rels) if not dups else
              "docs: %d sentence(s) shared" % len(dups))
    if failures:
        print("docs: %d failure(s)" % failures)
        return 1
    print("docs: all checks passed")
    return 0


def run_file(a, src, build, rel, items):
    name = re.sub(r"[^\w.-]", "_", rel)
    work = os.path.abspath(a.work or os.path.join(build, "docs-test", name))
    if os.path.exists(work):
        shutil.rmtree(work)
    os.makedirs(work)
    r = Runner(src, build, work, rel)
    counts = {"run": 0, "output": 0, "skip": 0, "setup": 0}
    pending = {}
    last_run = None
    by_id = {}
    failures = 0
    try:
        for b in items:
            if a.only and b.line > a.only:
                break
            if b.pending:
                pending[b.pending] = pending.get(b.pending, 0) + (1 if b.lang else 0)
                continue
            if b.kind in ("run", "setup"):
                secs = r.run(b)
                counts[b.kind] += 1
                if b.kind == "run":
                    last_run = b
                    if b.opt("id"):
                        by_id[b.opt("id")] = b
                    print("docs: ok   %s (%s, %.1f s)" % (b.where, b.lang, secs))
            elif b.kind == "output":
                ran = by_id.get(b.opt("of")) if b.opt("of") else last_run
                if ran is None:
                    raise Failure("%s: output block with no run block before it" % b.where)
                check_output(b, b.text, ran)
                counts["output"] += 1
                print("docs: ok   %s (output of %s)" % (b.where, ran.where))
            elif b.kind == "skip":
                counts["skip"] += 1
                print("docs: skip %s: %s" % (b.where, b.arg))
    except Failure as e:
        print("docs: FAIL: %s" % e)
        failures += 1
    finally:
        r.close()
    print("docs: %s: %d blocks run, %d hidden setups, %d outputs checked, %d skipped%s" %
          (rel, counts["run"], counts["setup"], counts["output"], counts["skip"],
           "".join("; pending (%s): %d block(s)" % (k, v) for k, v in pending.items())))
    if not failures:
        shutil.rmtree(work, ignore_errors=True)
    return failures


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Failure as e:
        print("docs: FAIL: %s" % e)
        sys.exit(1)
