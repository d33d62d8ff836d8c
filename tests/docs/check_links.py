#!/usr/bin/env python3
"""README.md and every Markdown file under docs/ point only into the repository, and every
relative link resolves: the target file exists, and a #fragment names a heading of the target
(GitHub's anchors: lower case, punctuation dropped, spaces to hyphens). Links to other sites
(http:, https:, mailto:, //host) and paths that climb out of the repository (../shared/...)
fail, written as a Markdown link or as a bare path in the text. The man pages (docs/man/*.1)
are checked for paths outside the repository too.

usage: check_links.py REPO_ROOT
"""
import os
import re
import sys

LINK = re.compile(r'(?<!!)\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)|!\[[^\]]*\]\(\s*([^)\s]+)')
REF_DEF = re.compile(r'^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$', re.M)
AUTOLINK = re.compile(r'<((?:https?|mailto|ftp):[^>\s]+)>')
BARE_URL = re.compile(r'\b(?:https?|ftp)://[^\s)>\]`\'"]+')
OUTSIDE = re.compile(r'(?<![\w./-])((?:\.\./)+[\w.-][^\s)`\'"]*)')


def strip_code(text):
    # Fenced blocks and inline code are examples, not links; outside paths are still looked
    # for in the raw text separately.
    text = re.sub(r'^[ \t]*(```|~~~).*?^[ \t]*\1', '', text, flags=re.M | re.S)
    return re.sub(r'`[^`\n]*`', '', text)


def anchors(path):
    out, seen = set(), {}
    in_code = False
    for line in open(path, encoding='utf-8'):
        if line.lstrip().startswith(('```', '~~~')):
            in_code = not in_code
            continue
        m = None if in_code else re.match(r'^#{1,6}\s+(.*?)\s*#*\s*$', line)
        if not m:
            for a in re.findall(r'<a\s+(?:name|id)="([^"]+)"', line):
                out.add(a)
            continue
        h = re.sub(r'`|\*|_(?=\w)|(?<=\w)_', '', m.group(1)).strip().lower()
        h = re.sub(r'[^\w\- ]', '', h).replace(' ', '-')
        n = seen.get(h, 0)
        seen[h] = n + 1
        out.add(h if n == 0 else '%s-%d' % (h, n))
    return out


def files(root):
    yield os.path.join(root, 'README.md')
    for d, _, names in os.walk(os.path.join(root, 'docs')):
        for n in sorted(names):
            if n.endswith('.md') or re.search(r'\.\d$', n):
                yield os.path.join(d, n)


def main():
    root = os.path.realpath(sys.argv[1])
    problems, links = [], 0
    for path in files(root):
        rel = os.path.relpath(path, root)
        raw = open(path, encoding='utf-8').read()
        # Anything climbing out of the repository, wherever it is written.
        for m in OUTSIDE.finditer(raw):
            target = os.path.realpath(os.path.join(os.path.dirname(path), m.group(1)))
            if not (target + os.sep).startswith(root + os.sep):
                problems.append('%s: points outside the repository: %s' % (rel, m.group(1)))
        if not path.endswith('.md'):
            for m in BARE_URL.finditer(raw):
                problems.append('%s: points outside the repository: %s' % (rel, m.group(0)))
            continue
        text = strip_code(raw)
        targets = [a or b for a, b in LINK.findall(text)] + REF_DEF.findall(text)
        targets += AUTOLINK.findall(text) + BARE_URL.findall(text)
        for t in dict.fromkeys(targets):
            links += 1
            if re.match(r'^[a-z][a-z0-9+.-]*:', t, re.I) or t.startswith('//'):
                problems.append('%s: link outside the repository: %s' % (rel, t))
                continue
            file_part, _, frag = t.partition('#')
            target = path if not file_part else os.path.realpath(
                os.path.join(os.path.dirname(path), file_part))
            if not (target + os.sep).startswith(root + os.sep) and target != root:
                problems.append('%s: link outside the repository: %s' % (rel, t))
            elif not os.path.exists(target):
                problems.append('%s: link to a missing file: %s' % (rel, t))
            elif frag and target.endswith('.md') and frag not in anchors(target):
                problems.append('%s: no heading for #%s in %s' % (rel, frag,
                                                                  os.path.relpath(target, root)))
    for p in problems:
        print('FAIL:', p)
    print('%d links checked, %d problems' % (links, len(problems)))
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
