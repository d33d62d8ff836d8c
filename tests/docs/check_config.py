#!/usr/bin/env python3
"""The README's configuration table and `boardd --help` say the same: the same flags, each
with the same value name, environment variable and default. --help is rendered from the one
flag table in server/config.c, so a flag added there shows up in --help by itself; this test
then asks for its README row, and for its entry in the man page (flag, value name, variable
and the default it states: equal, or for a worded default such as "number of cores" the same
first word); and every default the prose of README.md and docs/*.md states in passing
("`--max-body` (1 MiB)", "`--reaper-interval-ms` (60 s)") is the flag's default.

usage: check_config.py path/to/boardd path/to/README.md path/to/boardd.1
"""
import os
import re
import subprocess
import sys

HELP_ROW = re.compile(r'^  --([a-z0-9-]+)=(\S+)  \((\S+); default (.*)\)$')


def help_rows(boardd):
    r = subprocess.run([boardd, '--help'], capture_output=True, text=True, timeout=10)
    if r.returncode != 0:
        sys.exit('boardd --help exited %d: %s' % (r.returncode, r.stderr))
    rows = [m.groups() for m in map(HELP_ROW.match, r.stdout.splitlines()) if m]
    flags = re.findall(r'^  --([a-z0-9-]+)', r.stdout, re.M)
    # Every option line but --help/--version must have the machine-readable shape.
    odd = [f for f in flags if f not in ('help', 'version') and f not in [x[0] for x in rows]]
    if odd:
        sys.exit('--help lines without "--flag=ARG  (ENV; default D)": %s' % odd)
    return rows


def cells(line):
    # Split a Markdown table row on unescaped pipes; `\|` is a pipe inside a cell.
    parts = re.split(r'(?<!\\)\|', line.strip())[1:-1]
    return [p.strip().replace('\\|', '|') for p in parts]


def unquote(c):
    return c[1:-1] if len(c) >= 2 and c[0] == '`' and c[-1] == '`' else c


def readme_rows(path):
    text = open(path, encoding='utf-8').read()
    m = re.search(r'^## Configuration\n(.*?)(?=^## |\Z)', text, re.M | re.S)
    if not m:
        sys.exit('%s: no "## Configuration" section' % path)
    rows = []
    for line in m.group(1).splitlines():
        if not line.startswith('| `--'):
            continue
        c = cells(line)
        if len(c) < 3:
            sys.exit('%s: a configuration row with fewer than 3 cells: %s' % (path, line))
        fm = re.fullmatch(r'--([a-z0-9-]+)=(\S+)', unquote(c[0]))
        if not fm:
            sys.exit('%s: flag cell is not `--flag=ARG`: %s' % (path, c[0]))
        rows.append((fm.group(1), fm.group(2), unquote(c[1]), unquote(c[2])))
    return rows


def man_rows(path):
    text = open(path, encoding='utf-8').read().replace('\\-', '-')
    return [m.groups() for m in re.finditer(
        r'^\.BI --([a-z0-9-]+) " (\S+)"\n\.RB \( (BOARDD_[A-Z0-9_]+) ,', text, re.M)]


def man_defaults(path):
    """{flag: the default its entry states} ("default 900000)", "default\n.BR fs:./data )",
    ".IB DATADIR /tokens.json )"), font macros and their spacing removed."""
    text = open(path, encoding='utf-8').read().replace('\\-', '-')
    out = {}
    for m in re.finditer(r'^\.BI --([a-z0-9-]+) " \S+"\n\.RB \( BOARDD_[A-Z0-9_]+ ,\n'
                         r'default:?((?:.|\n)*?)\)\s*$', text, re.M):
        d = m.group(2).strip()
        if d.startswith('.'):  # "\n.BR value )": the macro's arguments, joined
            d = ''.join(d.split()[1:])
        out[m.group(1)] = d
    return out


def first_word(s):
    words = [w for w in re.findall(r'[a-z0-9./:_-]+', s.lower()) if w != 'the']
    return words[0].rstrip(':') if words else ''


UNITS = {'': 1, 'ms': 1, 's': 1000, 'min': 60000, 'h': 3600000, 'KiB': 1024,
         'MiB': 1048576}


def prose_defaults(paths):
    """[(file, line, flag, value)] for each "`--flag` (15 s)" the prose writes: a flag
    followed (perhaps after one word: "`--max-comments` comments (1000)") by its default in parentheses (a number, a unit: ms, s, min, h, KiB, MiB)."""
    out = []
    for path in paths:
        text = open(path, encoding='utf-8').read()
        for m in re.finditer(r'`--([a-z0-9-]+)`(?:\s+[a-z]+)?\s+\((\d[\d ]*)\s*(ms|s|min|h|KiB|MiB)?\)',
                             text):
            val = int(m.group(2).replace(' ', '')) * UNITS[m.group(3) or '']
            out.append((path, text.count('\n', 0, m.start()) + 1, m.group(1), val))
    return out


def main():
    boardd, readme, man = sys.argv[1], sys.argv[2], sys.argv[3]
    h, r = help_rows(boardd), readme_rows(readme)
    failed = 0
    docs = os.path.join(os.path.dirname(readme), 'docs')
    hd_vals = {f: d for f, _, _, d in h}
    prose = prose_defaults([readme] + [os.path.join(docs, n) for n in sorted(os.listdir(docs))
                                       if n.endswith('.md')])
    for path, line, f, val in prose:
        if f in hd_vals and hd_vals[f].isdigit() and int(hd_vals[f]) != val:
            print('FAIL: %s:%d: --%s (%d) in the prose; its default is %s'
                  % (path, line, f, val, hd_vals[f]))
            failed += 1
    md = {x[0]: x for x in man_rows(man)}
    mdef = man_defaults(man)
    for f, arg, env, dflt in h:
        if f not in md:
            print('FAIL: --%s is in --help but not in %s' % (f, man))
            failed += 1
        elif md[f] != (f, arg, env):
            print('FAIL: --%s: --help says %s, %s says %s' % (f, (arg, env), man, md[f][1:]))
            failed += 1
        elif f not in mdef:
            print('FAIL: --%s: %s states no "default ..." for it' % (f, man))
            failed += 1
        elif (mdef[f] != dflt if ' ' not in dflt else first_word(mdef[f]) != first_word(dflt)):
            print('FAIL: --%s: --help says default %s, %s says %s' % (f, dflt, man, mdef[f]))
            failed += 1
    for f in md:
        if f not in [x[0] for x in h]:
            print('FAIL: --%s is in %s but boardd does not know it' % (f, man))
            failed += 1
    hd, rd = {x[0]: x for x in h}, {x[0]: x for x in r}
    for f in hd:
        if f not in rd:
            print('FAIL: --%s is in --help but not in the README table' % f)
            failed += 1
        elif hd[f] != rd[f]:
            print('FAIL: --%s: --help says %s, the README %s' % (f, hd[f][1:], rd[f][1:]))
            failed += 1
    for f in rd:
        if f not in hd:
            print('FAIL: --%s is in the README table but boardd does not know it' % f)
            failed += 1
    print('%d flags compared with the README and the man page, %d defaults the prose states, '
          '%d mismatches' % (len(h), len(prose), failed))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
