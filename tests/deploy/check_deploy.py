#!/usr/bin/env python3
"""deploy/ checked offline, as far as a machine without a container engine or a cluster can:

- deploy/k8s/*.yaml: valid against the Kubernetes API schemas (kubernetes-validate, strict),
  and shaped as promised: startup/readiness/liveness probes on routes boardd serves, CPU and
  memory requests and limits, a PodDisruptionBudget selecting the pods and leaving one to
  drain, a non-root pod (runAsNonRoot, a non-zero uid, no privilege escalation, a read-only
  root, every capability dropped), the tokens Secret mounted where --tokens points, the
  Service's selector and port; and boardd itself started with the Deployment's arguments
  and environment answers its probes.
- deploy/docker-compose.yml: `docker-compose config` (the Compose file's schema and
  references; no engine needed), and each boardd service's command started the same way.
- deploy/boardd.service: `systemd-analyze verify`, and its ExecStart started the same way.
- deploy/Dockerfile: Debian images and packages only; the build stage installs what
  deploy/deps.sh installs, and the runtime stage every Debian package the boardd binary's
  shared libraries come from (or a package those depend on).

"Started the same way": the store becomes a temporary fs: directory, the address 127.0.0.1:0,
the tokens file a copy (of the Secret's, in Kubernetes) and a TLS pair one made here with the
openssl CLI; everything else is as written, so an unknown flag, a bad value or a misspelt
BOARDD_* variable fails here, and probes are made with the scheme the manifest's use (an HTTP
probe of an HTTPS-only boardd never succeeds).

usage: check_deploy.py path/to/boardd REPO_ROOT     (run by tests/tools/vpython)
"""
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import tempfile
import urllib.request

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'common'))
import boardd_test as bt  # noqa: E402
from boardd_test import CI, check  # noqa: E402

BOARDD, ROOT = sys.argv[1], os.path.realpath(sys.argv[2])
DEPLOY = os.path.join(ROOT, 'deploy')


def boardd_env_names():
    out = subprocess.run([BOARDD, '--help'], capture_output=True, text=True, timeout=10).stdout
    return set(re.findall(r'\((BOARDD_[A-Z0-9_]+);', out)) | {'ITERION_BOARD_CLAIM_REAPER'}


def uses_tls(args, env):
    return bool(env.get('BOARDD_TLS_CERT')) or any(a.split('=')[0] == '--tls-cert' for a in args)


def run_boardd(what, args, env, tokens_json, scheme='http'):
    """Starts boardd with `args`/`env` as a deployment gives them, but on a temporary FS
    store, 127.0.0.1:0, a copy of the tokens and (when it asks for TLS) a self-signed pair
    made here; checks /healthz and /readyz answer 200 over `scheme`."""
    with tempfile.TemporaryDirectory() as tmp:
        tok = os.path.join(tmp, 'tokens.json')
        with open(tok, 'w') as f:
            f.write(tokens_json)
        swaps = [('--store', 'fs:' + tmp + '/data'), ('--listen', '127.0.0.1:0'),
                 ('--tokens', tok)]
        tls_env = {}
        if uses_tls(args, env):
            crt, key = bt.make_pair(tmp, 'tls', '127.0.0.1')
            swaps += [('--tls-cert', crt), ('--tls-key', key)]
            tls_env = {'BOARDD_TLS_CERT': crt, 'BOARDD_TLS_KEY': key}
        args = list(args)
        for flag, value in swaps:
            for i, a in enumerate(args):
                if a == flag and i + 1 < len(args):
                    args[i + 1] = value
                elif a.startswith(flag + '='):
                    args[i] = flag + '=' + value
        e = dict(env)
        e.update({'BOARDD_STORE': 'fs:' + tmp + '/data', 'BOARDD_LISTEN': '127.0.0.1:0',
                  'BOARDD_TOKENS': tok}, **tls_env)
        known = boardd_env_names()
        for k in env:
            check(k in known, '%s: %s is not a variable boardd reads' % (what, k))
        srv = bt.Server(BOARDD, logdir=tmp, env=e, argv=args)
        ok, detail = srv.start(timeout=15, readyz=False)  # the probes below are the checks
        if not check(ok, '%s: boardd did not start with %s: %s' % (what, args, detail)):
            return
        port = srv.port
        # Like the kubelet's HTTPS probe: the certificate is not verified.
        ctx = ssl._create_unverified_context() if scheme == 'https' else None
        for path in ('/healthz', '/readyz'):
            try:
                with urllib.request.urlopen('%s://127.0.0.1:%d%s' % (scheme, port, path),
                                            timeout=5, context=ctx) as r:
                    st = r.status
            except OSError as ex:
                st = ex
            check(st == 200, '%s: %s over %s answered %s' % (what, path, scheme, st))
        check(srv.stop(timeout=20) == 0, '%s: boardd did not exit 0 on SIGTERM' % what)


def routes():
    text = open(os.path.join(ROOT, 'api', 'router.c')).read()
    return set(re.findall(r'X\("GET", "([^"]+)"', text))


# ---- Kubernetes ---------------------------------------------------------------------------

def check_k8s():
    files = sorted(os.path.join(DEPLOY, 'k8s', f) for f in os.listdir(os.path.join(DEPLOY, 'k8s'))
                   if f.endswith(('.yaml', '.yml')))
    r = subprocess.run([sys.executable, '-m', 'kubernetes_validate', '--strict', '--quiet']
                       + files, capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, 'kubernetes-validate: %s%s' % (r.stdout, r.stderr))
    docs = [d for f in files for d in yaml.safe_load_all(open(f)) if d]
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d['kind'], []).append(d)
    for kind in ('Secret', 'Deployment', 'PodDisruptionBudget', 'Service'):
        check(kind in by_kind, 'k8s: no %s' % kind)
    if not check(len(by_kind.get('Deployment', [])) == 1, 'k8s: one Deployment'):
        return
    dep = by_kind['Deployment'][0]
    spec, pod = dep['spec'], dep['spec']['template']['spec']
    labels = dep['spec']['template']['metadata']['labels']
    replicas = spec.get('replicas', 1)
    served = routes()

    psc = pod.get('securityContext', {})
    check(psc.get('runAsNonRoot') is True, 'k8s: pod runAsNonRoot')
    check(psc.get('runAsUser', 0) > 0, 'k8s: pod runAsUser non-zero')
    check(pod.get('terminationGracePeriodSeconds', 30) >= 15, 'k8s: a grace period to drain')
    check(len(pod['containers']) == 1, 'k8s: one container')
    c = pod['containers'][0]
    csc = c.get('securityContext', {})
    check(csc.get('allowPrivilegeEscalation') is False, 'k8s: allowPrivilegeEscalation false')
    check(csc.get('readOnlyRootFilesystem') is True, 'k8s: readOnlyRootFilesystem')
    check('ALL' in csc.get('capabilities', {}).get('drop', []), 'k8s: capabilities drop ALL')
    res = c.get('resources', {})
    for k in ('requests', 'limits'):
        for r_ in ('cpu', 'memory'):
            check(r_ in res.get(k, {}), 'k8s: resources.%s.%s' % (k, r_))
    ports = {p.get('name'): p['containerPort'] for p in c.get('ports', [])}
    for probe in ('startupProbe', 'readinessProbe', 'livenessProbe'):
        pr = c.get(probe)
        if not check(pr and 'httpGet' in pr, 'k8s: %s (httpGet)' % probe):
            continue
        check(pr['httpGet']['path'] in served, 'k8s: %s path %s is a route boardd serves'
              % (probe, pr['httpGet']['path']))
        port = pr['httpGet']['port']
        check(port in ports or port in ports.values(), 'k8s: %s port %s is a container port'
              % (probe, port))
    check(c['readinessProbe']['httpGet']['path'] == '/readyz',
          'k8s: readiness asks /readyz (the store is reachable)')
    check(c['livenessProbe']['httpGet']['path'] == '/healthz',
          'k8s: liveness asks /healthz (a database outage must not restart every pod)')

    env = {e['name']: e['value'] for e in c.get('env', [])}
    args = c.get('args', [])
    listen = env.get('BOARDD_LISTEN')
    for i, a in enumerate(args):
        if a == '--listen':
            listen = args[i + 1]
    check(listen and int(listen.rsplit(':', 1)[1]) in ports.values()
          and not listen.startswith('127.'), 'k8s: boardd listens on the container port (%s)'
          % listen)
    store = env.get('BOARDD_STORE', '')
    check(replicas == 1 or store.startswith('mongodb'),
          'k8s: %d replicas need the shared Mongo store, not %r' % (replicas, store))

    # the tokens Secret, mounted where --tokens points
    secrets = {s['metadata']['name']: s for s in by_kind.get('Secret', [])}
    tokens = env.get('BOARDD_TOKENS')
    for i, a in enumerate(args):
        if a == '--tokens':
            tokens = args[i + 1]
    tokens_json = None
    vols = {v['name']: v for v in pod.get('volumes', [])}
    for m in c.get('volumeMounts', []):
        v = vols.get(m['name'], {})
        sec = secrets.get(v.get('secret', {}).get('secretName'))
        if not sec or not tokens or not tokens.startswith(m['mountPath'].rstrip('/') + '/'):
            continue
        key = tokens[len(m['mountPath'].rstrip('/')) + 1:]
        data = dict(sec.get('stringData', {}))
        tokens_json = data.get(key)
        check(m.get('readOnly') is True, 'k8s: the tokens Secret is mounted read-only')
    if check(tokens_json is not None, 'k8s: --tokens (%s) is a key of a mounted Secret' % tokens):
        check(isinstance(json.loads(tokens_json).get('tokens'), list),
              'k8s: the Secret holds a tokens file ({"tokens": [...]})')

    pdbs = by_kind.get('PodDisruptionBudget', [])
    for pdb in pdbs:
        sel = pdb['spec']['selector'].get('matchLabels', {})
        check(sel and all(labels.get(k) == v for k, v in sel.items()),
              'k8s: the PodDisruptionBudget selects the pods')
        ma = pdb['spec'].get('minAvailable')
        check(isinstance(ma, int) and 1 <= ma < replicas or 'maxUnavailable' in pdb['spec'],
              'k8s: the PodDisruptionBudget leaves a pod to drain and keeps one serving')
    for svc in by_kind.get('Service', []):
        sel = svc['spec'].get('selector', {})
        check(sel and all(labels.get(k) == v for k, v in sel.items()),
              'k8s: the Service selects the pods')
        for p in svc['spec']['ports']:
            tp = p.get('targetPort', p['port'])
            check(tp in ports or tp in ports.values(), 'k8s: Service targetPort %s' % tp)
    schemes = {c[p]['httpGet'].get('scheme', 'HTTP').lower()
               for p in ('startupProbe', 'readinessProbe', 'livenessProbe') if c.get(p)}
    want = 'https' if uses_tls(args, env) else 'http'
    check(schemes == {want}, 'k8s: the probes use %s, boardd serves %s' % (sorted(schemes), want))
    if uses_tls(args, env):
        mounted = [m['mountPath'].rstrip('/') + '/' for m in c.get('volumeMounts', [])]
        for var in ('BOARDD_TLS_CERT', 'BOARDD_TLS_KEY'):
            check(any(env.get(var, '').startswith(m) for m in mounted),
                  'k8s: %s (%s) lies in a mounted volume' % (var, env.get(var)))
    paths = sorted(m['mountPath'] for m in c.get('volumeMounts', []))
    check(not any(b.startswith(a.rstrip('/') + '/') for a in paths for b in paths if a != b),
          'k8s: no volume is mounted inside another (read-only) one: %s' % paths)
    if tokens_json is not None:
        run_boardd('k8s Deployment', args, env, tokens_json, want)


# ---- Compose -------------------------------------------------------------------------------

def check_compose():
    path = os.path.join(DEPLOY, 'docker-compose.yml')
    dc = shutil.which('docker-compose')
    if not dc:
        print('%s: no docker-compose (deploy/deps.sh --test installs it)'
              % ('FAIL' if CI else 'SKIP compose'))
        check(not CI, 'docker-compose is installed')
        return
    r = subprocess.run([dc, '-f', path, 'config'], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, DOCKER_HOST='unix:///nonexistent'))
    if not check(r.returncode == 0, 'docker-compose config: %s' % r.stderr.strip()):
        return
    cfg = yaml.safe_load(r.stdout)
    boardds = {n: s for n, s in cfg['services'].items() if 'build' in s}
    check(len(boardds) >= 2, 'compose: several boardd services (got %s)' % sorted(boardds))
    for name, s in boardds.items():
        check(str(s.get('user', '0')).split(':')[0] not in ('0', 'root'),
              'compose %s: runs as a non-root user' % name)
        cmd = s.get('command', [])
        store = cmd[cmd.index('--store') + 1] if '--store' in cmd else ''
        check(store.startswith('mongodb'), 'compose %s: replicas share the Mongo store' % name)
    name, s = sorted(boardds.items())[0]
    env = {k: str(v) for k, v in (s.get('environment') or {}).items()}
    run_boardd('compose ' + name, s.get('command', []), env, '{"tokens": []}')


# ---- systemd -------------------------------------------------------------------------------

def check_systemd():
    unit = os.path.join(DEPLOY, 'boardd.service')
    sa = shutil.which('systemd-analyze')
    if not sa:
        print('%s: no systemd-analyze' % ('FAIL' if CI else 'SKIP systemd'))
        check(not CI, 'systemd-analyze is installed')
        return
    text = open(unit).read()
    m = re.search(r'^ExecStart=(\S+)(.*)$', text, re.M)
    if not check(m, 'systemd: an ExecStart line'):
        return
    # The unit names the installed path; verify checks the binary exists, so point it at the
    # one just built (nothing else changes). --man=no: the man page is there once installed.
    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, 'boardd.service')
        with open(copy, 'w') as f:
            f.write(text.replace('ExecStart=' + m.group(1),
                                 'ExecStart=' + os.path.realpath(BOARDD)))
        r = subprocess.run([sa, 'verify', '--man=no', copy], capture_output=True, text=True, timeout=60)
        mine = [l for l in (r.stdout + r.stderr).splitlines() if 'boardd.service' in l]
        check(r.returncode == 0 and not mine, 'systemd-analyze verify: rc %d %s'
              % (r.returncode, mine))
    env = dict(re.findall(r'^Environment=([A-Z0-9_]+)=(\S*)$', text, re.M))
    run_boardd('systemd ExecStart', m.group(2).split(), env, '{"tokens": []}')


# ---- Dockerfile ----------------------------------------------------------------------------

def apt_lists(stage_text):
    pkgs = []
    for cmd in re.findall(r'apt-get install ([^&]*)', stage_text.replace('\\\n', ' ')):
        pkgs += [w for w in cmd.split() if not w.startswith('-')]
    return set(pkgs)


def pkg_closure(pkgs):
    """The installed packages reachable from pkgs through Depends/Pre-Depends."""
    seen, todo = set(), list(pkgs)
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        r = subprocess.run(['dpkg-query', '-W', '-f', '${Depends},${Pre-Depends}', p],
                           capture_output=True, text=True)
        for alt in r.stdout.split(','):
            for dep in alt.split('|'):
                name = dep.strip().split(' ')[0].split(':')[0]
                if name:
                    todo.append(name)
    return seen


def check_dockerfile():
    text = open(os.path.join(DEPLOY, 'Dockerfile')).read()
    froms = re.findall(r'^FROM\s+(\S+)', text, re.M)
    check(froms and all(f.startswith('debian:') for f in froms),
          'Dockerfile: Debian base images only (%s)' % froms)
    check(not re.search(r'\b(curl|wget)\b|^ADD\s+https?:', text, re.M),
          'Dockerfile: nothing downloaded but Debian packages')
    stages = re.split(r'^FROM\s', text, flags=re.M)[1:]
    if not check(len(stages) == 2, 'Dockerfile: a build and a runtime stage'):
        return
    build, runtime = apt_lists(stages[0]), apt_lists(stages[1])
    deps = open(os.path.join(DEPLOY, 'deps.sh')).read()
    m = re.search(r'^pkgs=\(([^)]*)\)', deps, re.M)
    want = set(m.group(1).split()) if m else set()
    check(want and want <= build, 'Dockerfile: the build stage lacks %s (deploy/deps.sh)'
          % sorted(want - build))
    # The runtime stage: each shared library of boardd comes from a listed package or one
    # they pull in (the C library and the sanitizers' runtimes aside).
    if not shutil.which('dpkg-query'):
        return
    closure = pkg_closure(runtime) | {'libc6', 'libgcc-s1'}
    out = subprocess.run(['ldd', os.path.realpath(BOARDD)], capture_output=True, text=True).stdout
    for lib in re.findall(r'=>\s+(/\S+)', out):
        r = subprocess.run(['dpkg', '-S', os.path.realpath(lib)], capture_output=True, text=True)
        if r.returncode != 0:
            r = subprocess.run(['dpkg', '-S', lib], capture_output=True, text=True)
        pkg = r.stdout.split(':')[0].strip() if r.returncode == 0 else None
        if pkg is None or re.match(r'lib(asan|ubsan|tsan|lsan)\d', pkg):
            continue
        check(pkg in closure, 'Dockerfile: the runtime stage lacks %s (for %s)' % (pkg, lib))


def main():
    check_k8s()
    check_compose()
    check_systemd()
    check_dockerfile()
    return bt.summary()


if __name__ == '__main__':
    sys.exit(main())
