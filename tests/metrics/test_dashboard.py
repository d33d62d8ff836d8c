#!/usr/bin/env python3
"""The Grafana dashboard (deploy/grafana/boardd.json) and the alerting rules
(deploy/prometheus/boardd-alerts.yml) against the one metrics table (metrics/metrics.h):
valid JSON, `promtool check rules`, every query names metric families that exist (a
histogram through its _bucket/_sum/_count series) and groups or matches only on labels those
families have; a family on no panel is noted. openapi.yaml's /metrics description names only
families of the table (one it does not name yet is noted).

usage: test_dashboard.py deploy/grafana/boardd.json metrics/metrics.h deploy/prometheus/boardd-alerts.yml
"""
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'common'))
import boardd_test as bt  # noqa: E402
from boardd_test import check  # noqa: E402

DASH, TABLE, RULES = sys.argv[1], sys.argv[2], sys.argv[3]


def family_of(series, fams):
    """The table family a series name belongs to, or None."""
    if series in fams and fams[series][0] != 'histogram':
        return series
    for suffix in ('_bucket', '_sum', '_count'):
        base = series[:-len(suffix)]
        if series.endswith(suffix) and base in fams and fams[base][0] == 'histogram':
            return base
    return None


def panels(d):
    for p in d.get('panels', []):
        yield p
        yield from panels(p)


def main():
    fams = bt.metrics_table(TABLE)
    check(len(fams) > 20, 'the table was read (%d families)' % len(fams))
    try:
        d = json.load(open(DASH))
    except ValueError as e:
        check(False, 'valid JSON: %s' % e)
        return
    check(isinstance(d.get('title'), str) and d.get('uid'), 'a title and a uid')
    used = set()
    ids = set()
    for p in panels(d):
        check(p.get('id') not in ids, 'panel ids are unique (%s)' % p.get('id'))
        ids.add(p.get('id'))
        if p.get('type') == 'row':
            continue
        targets = p.get('targets') or []
        check(targets, 'panel %r has a query' % p.get('title'))
        for t in targets:
            used |= expr_check('panel %r' % p.get('title'), t.get('expr', ''), fams)
    # A family added to the table without a panel yet is told, not failed: adding a counter
    # stays one table line.
    for f in sorted(fams):
        if f not in used:
            print('note: family %s is on no panel of the dashboard' % f)

    # openapi.yaml's /metrics description names families of the table (one missing: a note).
    api = open(os.path.join(os.path.dirname(os.path.abspath(TABLE)), '..', 'openapi',
                            'openapi.yaml')).read()
    m = re.search(r'^  /metrics:\n(.*?)^  /', api, re.M | re.S)
    named = set(re.findall(r'\b((?:boardd|process)_[a-z0-9_]+)', m.group(1) if m else ''))
    check(named, 'openapi.yaml: /metrics names the families')
    for n in sorted(named):
        check(n in fams, 'openapi.yaml /metrics names %s, not a family of the table' % n)
    for f in sorted(set(fams) - named):
        print('note: family %s is not named in openapi.yaml\'s /metrics' % f)

    r = subprocess.run(['promtool', 'check', 'rules', RULES], capture_output=True, text=True,
                       timeout=60)
    check(r.returncode == 0, 'promtool check rules: %s' % (r.stdout + r.stderr).strip())
    exprs = re.findall(r'^\s+expr:\s*(.+)$', open(RULES).read(), re.M)
    check(len(exprs) >= 10, 'the rules file has its alerts (%d)' % len(exprs))
    for e in exprs:
        expr_check('rule', e, fams)


def expr_check(where, expr, fams):
    """Checks one PromQL expression; returns the families it names."""
    names = re.findall(r'\b((?:boardd|process)_[a-zA-Z0-9_]+)\b', expr)
    check(names, '%s: %r names a metric' % (where, expr))
    labels, used = set(), set()
    for n in names:
        f = family_of(n, fams)
        check(f is not None, '%s: %s is not a metric of the table' % (where, n))
        if f:
            used.add(f)
            labels |= fams[f][1] | ({'le'} if n.endswith('_bucket') else set())
    # Grouping and matchers may use the family's labels and the scrape's own.
    labels |= {'job', 'instance'}
    for grp in re.findall(r'\b(?:by|without)\s*\(([^)]*)\)', expr):
        for lab in (x.strip() for x in grp.split(',') if x.strip()):
            check(lab in labels, '%s: groups by %r, not a label of %s' % (where, lab, names))
    for lab in re.findall(r'[{,]\s*([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)', expr):
        check(lab in labels, '%s: matches on %r, not a label of %s' % (where, lab, names))
    return used


if __name__ == '__main__':
    bt.need_promtool()
    main()
    sys.exit(bt.summary('dashboard'))
