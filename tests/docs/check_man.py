#!/usr/bin/env python3
"""The man pages render without a warning: groff -man -ww -z (every warning on, no output)
prints nothing and exits 0. groff is Debian's groff-base (deploy/deps.sh --test).

usage: check_man.py DIR|PAGE...     (a directory: every *.[1-9] in it)
"""
import os
import shutil
import subprocess
import sys


def main():
    groff = shutil.which('groff')
    if not groff:
        print('SKIP: no groff (deploy/deps.sh --test installs groff-base)')
        return 1 if os.environ.get('CI') == 'true' else 77
    pages = []
    for a in sys.argv[1:]:
        if os.path.isdir(a):
            pages += sorted(os.path.join(a, n) for n in os.listdir(a) if n[-2:-1] == '.'
                            and n[-1].isdigit())
        else:
            pages.append(a)
    failed = 0
    for page in pages:
        r = subprocess.run([groff, '-man', '-ww', '-z', page], capture_output=True, text=True,
                           timeout=30, env=dict(os.environ, LC_ALL='C.UTF-8'))
        if r.returncode != 0 or r.stdout or r.stderr:
            print('FAIL: %s: groff says: %s%s' % (page, r.stdout, r.stderr))
            failed += 1
    print('%d man pages rendered, %d with warnings' % (len(pages), failed))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
