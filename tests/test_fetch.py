"`wordbench fetch` end to end without a network: a mirror built from the raw data folder, served on 127.0.0.1."
import hashlib, http.server, re, signal, subprocess, sys, threading, time
from pathlib import Path
import pytest
from wordbench.core import has_raw_data, raw_root
from wordbench.fetch import lay_out_mirror, manifest_problems, partial_path, read_manifest

BIN = Path(sys.executable).parent
RAW = raw_root()
needs_raw = pytest.mark.skipif(not has_raw_data(RAW), reason=f'no raw data folder at {RAW}')
SMALL = ['wsc273/WSCollection.xml', 'newterm/code/utils.py', 'wscplus/phase2/GPT4_results.csv']  # a space in its URL


def test_manifest_lists_every_file_once():
    rows = read_manifest()
    paths = [r['path'] for r in rows]
    assert len(paths) == len(set(paths)) and len(paths) > 100
    for r in rows:
        if r['url']:
            commit = r['url'].split('/')[5]
            assert re.fullmatch(r'[0-9a-f]{40}', commit) and ' ' not in r['url'], r
            assert r['source'].split(':')[0] in r['url'], r


@needs_raw
def test_manifest_matches_the_raw_data_folder():
    "Every file of the raw data folder is listed, every listed file is there, and every hash is equal."
    assert manifest_problems(RAW) == []


class Mirror(http.server.BaseHTTPRequestHandler):
    "Serves a folder; honours `Range`; can end one file's body halfway once, or stall in it."
    root, drop, stall, seen = Path('.'), set(), set(), []

    def do_GET(self):
        from urllib.parse import unquote
        path = unquote(self.path)
        self.seen.append((path, self.headers.get('Range')))
        f = self.root/path.lstrip('/')
        if not f.is_file(): return self.send_error(404)
        body = f.read_bytes()
        start = int(m.group(1)) if (m := re.match(r'bytes=(\d+)-', self.headers.get('Range') or '')) else 0
        self.send_response(206 if start else 200)
        self.send_header('Content-Length', str(len(body) - start))
        self.end_headers()
        cut = len(body) - (len(body) - start) // 2 if path in self.drop | self.stall else len(body)
        stall = path in self.stall
        self.drop.discard(path)
        self.stall.discard(path)
        self.wfile.write(body[start:cut])
        self.wfile.flush()
        if stall: time.sleep(30)   # the client is killed meanwhile
        self.close_connection = cut < len(body)

    def log_message(self, *args): pass


@pytest.fixture(scope='module')
def mirror(tmp_path_factory):
    root = tmp_path_factory.mktemp('mirror')
    lay_out_mirror(RAW, root)
    Mirror.root = root
    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Mirror)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield root, f'http://127.0.0.1:{server.server_port}'
    server.shutdown()


def mirror_path(path: str) -> str:
    from urllib.parse import unquote
    url = next(r['url'] for r in read_manifest() if r['path'] == path)
    return '/' + unquote(url.split('://', 1)[1])


def fetch(base, to, *args, **kw):
    return subprocess.run([BIN/'wordbench', 'fetch', '--mirror', base, '--to', str(to), *args], capture_output=True,
                          text=True, timeout=300, **kw)


def same(a: Path, b: Path) -> bool: return a.read_bytes() == b.read_bytes()


@needs_raw
def test_fetch_everything_then_nothing(mirror, tmp_path):
    root, base = mirror
    out = fetch(base, tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = read_manifest()
    public = [r['path'] for r in rows if r['url']]
    assert f'fetch: {len(public)} downloaded, 0 already present, 1 skipped, 0 failed' in out.stdout, out.stdout
    assert 'winodict/foreign_words.jsonl: skipped, no public file' in out.stderr
    assert all(same(tmp_path/p, RAW/p) for p in public)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob('*') if p.is_file()) == sorted(public)
    n = len(Mirror.seen)
    again = fetch(base, tmp_path)
    assert again.returncode == 0 and f'0 downloaded, {len(public)} already present' in again.stdout, again.stdout
    assert len(Mirror.seen) == n   # the second run asked the mirror for nothing


@needs_raw
def test_a_tampered_file_is_refused_in_one_line(mirror, tmp_path):
    root, base = mirror
    f = root/mirror_path(SMALL[1]).lstrip('/')
    good = f.read_bytes()
    try:
        f.write_bytes(good + b'# tampered\n')
        out = fetch(base, tmp_path, '--only', *SMALL)
    finally: f.write_bytes(good)
    assert out.returncode == 1, out.stdout + out.stderr
    errors = [l for l in out.stderr.splitlines() if l.startswith('wordbench: error:')]
    want = next(r['sha256'] for r in read_manifest() if r['path'] == SMALL[1])
    assert len(errors) == 1 and SMALL[1] in errors[0] and want in errors[0], out.stderr
    assert hashlib.sha256(good + b'# tampered\n').hexdigest() in errors[0]
    assert not (tmp_path/SMALL[1]).exists() and not partial_path(tmp_path/SMALL[1]).exists()
    assert same(tmp_path/SMALL[0], RAW/SMALL[0]) and same(tmp_path/SMALL[2], RAW/SMALL[2])   # the others came
    assert 'Traceback' not in out.stderr


@needs_raw
def test_a_dropped_connection_is_resumed(mirror, tmp_path):
    root, base = mirror
    p = mirror_path(SMALL[0])
    Mirror.drop.add(p)
    out = fetch(base, tmp_path, '--only', SMALL[0])
    assert out.returncode == 0, out.stderr[-3000:]
    size = (RAW/SMALL[0]).stat().st_size
    assert [s for s in Mirror.seen if s[0] == p][-2:] == [(p, None), (p, f'bytes={size - size // 2}-')]
    assert same(tmp_path/SMALL[0], RAW/SMALL[0])


@needs_raw
def test_a_killed_download_resumes_on_the_next_run(mirror, tmp_path):
    root, base = mirror
    p, dest = mirror_path(SMALL[2]), tmp_path/SMALL[2]
    Mirror.stall.add(p)
    proc = subprocess.Popen([BIN/'wordbench', 'fetch', '--mirror', base, '--to', str(tmp_path), '--only', SMALL[2]],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    part, t0, size = partial_path(dest), time.time(), (RAW/SMALL[2]).stat().st_size
    got = size - size // 2   # what the mirror sends before it stalls
    while not (part.exists() and part.stat().st_size == got) and time.time() - t0 < 120: time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert part.stat().st_size == got and not dest.exists()
    out = fetch(base, tmp_path, '--only', SMALL[2])
    assert out.returncode == 0, out.stderr[-3000:]
    assert [s for s in Mirror.seen if s[0] == p][-1] == (p, f'bytes={got}-')
    assert same(dest, RAW/SMALL[2]) and not part.exists()


def test_main_job_fetches_before_it_checks():
    "`make figures` fetches missing raw inputs before `wordbench setup` checks every resource, then builds; one check."
    root = Path(__file__).parents[1]
    lines = subprocess.run(['make', '-n', 'figures'], cwd=root, check=True, capture_output=True, text=True).stdout
    lines = lines.splitlines()
    at = lambda text: next(i for i, line in enumerate(lines) if text in line)
    assert at('wordbench fetch') < at('wordbench setup') < at('wordbench list builders --main')
    assert not any('wordbench doctor' in line for line in lines)
