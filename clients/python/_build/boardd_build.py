"""A PEP 517 build backend for the boardd package, standard library only, so that
`pip install ./clients/python` needs nothing from a package index (no setuptools, no wheel):
it writes a pure-Python wheel of boardd/*.py with METADATA, WHEEL and RECORD, and an sdist of
the tree. Name, version, summary and the Python bound are read from pyproject.toml's [project]
table (by pattern: Python 3.10 has no tomllib)."""
import base64
import hashlib
import os
import re
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _project():
    text = open(os.path.join(ROOT, 'pyproject.toml'), encoding='utf-8').read()
    proj = text.split('[project]', 1)[1].split('\n[', 1)[0]

    def field(k):
        m = re.search(r'^%s\s*=\s*"([^"]*)"' % k, proj, re.M)
        return m.group(1) if m else ''
    return field('name'), field('version'), field('description'), field('requires-python')


def _metadata():
    name, version, summary, requires = _project()
    readme = open(os.path.join(ROOT, 'README.md'), encoding='utf-8').read()
    return name, version, ('Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: %s\n'
                           'Requires-Python: %s\nDescription-Content-Type: text/markdown\n\n%s'
                           % (name, version, summary, requires, readme))


def _sources():
    pkg = os.path.join(ROOT, 'boardd')
    return sorted('boardd/' + f for f in os.listdir(pkg) if f.endswith('.py'))


def _digest(data):
    return 'sha256=' + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(
        b'=').decode()


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    name, version, meta = _metadata()
    di = '%s-%s.dist-info' % (name, version)
    os.makedirs(os.path.join(metadata_directory, di), exist_ok=True)
    with open(os.path.join(metadata_directory, di, 'METADATA'), 'w', encoding='utf-8') as f:
        f.write(meta)
    return di


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    name, version, meta = _metadata()
    di = '%s-%s.dist-info' % (name, version)
    wheel_name = '%s-%s-py3-none-any.whl' % (name, version)
    files = [(p, open(os.path.join(ROOT, p), 'rb').read()) for p in _sources()]
    files.append((di + '/METADATA', meta.encode()))
    files.append((di + '/WHEEL', b'Wheel-Version: 1.0\nGenerator: boardd_build\n'
                                 b'Root-Is-Purelib: true\nTag: py3-none-any\n'))
    record = ''.join('%s,%s,%d\n' % (p, _digest(d), len(d)) for p, d in files)
    record += di + '/RECORD,,\n'
    files.append((di + '/RECORD', record.encode()))
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), 'w',
                         zipfile.ZIP_DEFLATED) as z:
        for p, d in files:
            z.writestr(p, d)
    return wheel_name


def build_sdist(sdist_directory, config_settings=None):
    name, version, _ = _metadata()
    base = '%s-%s' % (name, version)
    with tarfile.open(os.path.join(sdist_directory, base + '.tar.gz'), 'w:gz') as t:
        for p in ['pyproject.toml', 'README.md', '_build/boardd_build.py'] + _sources():
            t.add(os.path.join(ROOT, p), arcname=base + '/' + p)
    return base + '.tar.gz'
