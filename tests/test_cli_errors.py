"""Every mistake a user can make ends in one line on stderr (the problem, then `fix: ...`), a non-zero exit status and
no traceback; `--debug` shows the traceback."""
import http.server, json, os, shutil, sqlite3, subprocess, sys, threading, time
from pathlib import Path
import pytest

FIXTURES = Path(__file__).parent/'fixtures'


def wordbench(*args, env):
    return subprocess.run([sys.executable, '-m', 'wordbench.cli', *map(str, args)], env=env, capture_output=True,
                          text=True, timeout=120)


class Reply(http.server.BaseHTTPRequestHandler):
    "A fake OpenAI-compatible server: `body` after `delay` seconds."
    body, delay = b'{}', 0.0
    def do_POST(self):
        time.sleep(self.delay)
        self.send_response(200)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(self.body)))
        self.end_headers()
        try: self.wfile.write(self.body)
        except OSError: pass   # the client gave up waiting (the timeout case)
    def log_message(self, *args): pass


@pytest.fixture(scope='module')
def urls():
    "Base URLs of local servers: one slow (5 s), one sending a body that is not JSON, one sending `{}`."
    servers = {}
    for name, body, delay in (('slow', b'{}', 5.0), ('junk', b'this is not json {', 0.0), ('empty', b'{}', 0.0)):
        s = http.server.ThreadingHTTPServer(('127.0.0.1', 0), type('R', (Reply,), {'body': body, 'delay': delay}))
        s.daemon_threads = True
        threading.Thread(target=s.serve_forever, daemon=True).start()
        servers[name] = s
    yield {name: f'http://127.0.0.1:{s.server_address[1]}/v1' for name, s in servers.items()}
    for s in servers.values(): s.shutdown()


@pytest.fixture(scope='module')
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp('cli_errors')
    (d/'in.jsonl').write_text('{"context": "a", "continuation": " b"}\n')
    (d/'gen.jsonl').write_text('{"prompt": "hi", "max_tokens": 3}\n')
    (d/'bad.jsonl').write_text('{"context": "a", "continuation": " b"}\n{"context": 1, "continuation": " c"}\n')
    (d/'binary.jsonl').write_bytes(b'{"context": "\xff"}\n')
    (d/'notjson.jsonl').write_text('{"context": "a",\n')
    (d/'junk.sqlite').write_text('this is not a database ' * 50)
    (d/'results').mkdir()
    (d/'results'/'tiny-arith_m.csv.gz').write_bytes(b'garbage, not gzip')
    (d/'wd.jsonl').write_text('{"id": 1}\n')
    (d/'a_file').write_text('x')
    env = {**os.environ, 'WORDBENCH_PLUGINS': str(FIXTURES/'tiny_plugin.py'), 'TINY_ITEMS': str(d/'items.jsonl'),
           'WORDBENCH_CACHE': str(d/'cache')}
    assert wordbench('build', 'tiny-arith', '--n', '3', env=env).returncode == 0
    assert wordbench(*EVAL, '--n', '3', '--out', d/'parts', '--shard', '0/2', env=env).returncode == 0   # 1/2 missing
    asks = [{'context': f'ctx {i}', 'continuation': ' x'} for i in range(3)]
    (d/'req.jsonl').write_text(''.join(json.dumps(a) + '\n' for a in asks))
    assert wordbench('score', '--model', 'm', '--backend', 'dummy', '--input', d/'req.jsonl', '--output', d/'o.jsonl',
                     '--cache', d/'c1.sqlite', env=env).returncode == 0
    shutil.copy(d/'c1.sqlite', d/'c2.sqlite')   # the same requests, answered otherwise in the second cache
    with sqlite3.connect(d/'c2.sqlite') as con: con.execute("UPDATE results SET result = '[-1.0, false]'")
    return d, env


EVAL = ['eval', 'tiny-arith', '--model', 'm', '--backend', 'dummy', '--no-cache']
SCORE = ['score', '--model', 'm', '--backend', 'dummy', '--output', '{d}/out.jsonl']
OPENAI = ['score', '--model', 'm', '--backend', 'openai', '--backend-arg', 'max_retries=0',
          '--backend-arg', 'read_timeout=1',
          '--output', '{d}/out.jsonl', '--no-cache']

CASES = {  # name: (arguments, text the one line must contain)
    'unknown task': (['eval', 'nosuch', '--model', 'm'], "invalid choice: 'nosuch'"),
    'unknown grid': (EVAL + ['--grid', 'huge'], "has no grid 'huge'"),
    'unknown strategy': (EVAL + ['--strategies', 'bogus'], 'unknown strategy bogus'),
    'unknown model': (['eval', 'tiny-arith', '--model', '/no/such/model', '--no-cache'],
                      "unknown model '/no/such/model'"),
    'unknown backend': (EVAL + ['--backend', 'nobackend'], "unknown backend 'nobackend'"),
    'unknown backend option': (EVAL + ['--backend-arg', 'bogus=1'], "takes no option 'bogus'"),
    'malformed backend option': (EVAL + ['--backend-arg', 'bogus'], 'expects KEY=VALUE'),
    'bad option value': (EVAL + ['--shots', 'many'], "invalid int value: 'many'"),
    'bad choice value': (EVAL + ['--dtype', 'float8'], "invalid choice: 'float8'"),
    'missing input': (SCORE + ['--input', '{d}/nosuch.jsonl'], 'nosuch.jsonl: No such file or directory'),
    'unreadable input (a folder)': (SCORE + ['--input', '{d}'], 'Is a directory'),
    'corrupt input (a bad field)': (SCORE + ['--input', '{d}/bad.jsonl'], "bad.jsonl:2: field 'context': expected str"),
    'corrupt input (not JSON)': (SCORE + ['--input', '{d}/notjson.jsonl'], 'notjson.jsonl:1: invalid JSON'),
    'corrupt input (not UTF-8)': (SCORE + ['--input', '{d}/binary.jsonl'], 'binary.jsonl:1: not UTF-8'),
    'missing dataset': (['eval', 'winodict', '--model', 'm', '--backend', 'dummy', '--no-cache', '--dataset',
                         '{d}/nosuch.jsonl'], 'no WinoDict dataset at'),
    'corrupt dataset': (['eval', 'winodict', '--model', 'm', '--backend', 'dummy', '--no-cache', '--dataset',
                         '{d}/wd.jsonl'], "wd.jsonl:1: field 'id'"),
    'corrupt results file': (EVAL + ['--out', '{d}/results'], 'tiny-arith_m.csv.gz is unreadable or corrupt'),
    'corrupt cache file': (SCORE + ['--input', '{d}/in.jsonl', '--cache', '{d}/junk.sqlite'],
                           'junk.sqlite is not a usable SQLite database'),
    'unwritable results folder': (EVAL + ['--out', '{d}/a_file/results'], 'cannot write'),
    'unwritable output file': (['score', '--model', 'm', '--backend', 'dummy', '--input', '{d}/in.jsonl', '--output',
                                '{d}/a_file/out.jsonl'], 'cannot write'),
    'unwritable figures folder': (['regenerate', 'raw_sources', '--out', '{d}/a_file/figs'], 'Not a directory'),
    'server refuses': (OPENAI + ['--input', '{d}/gen.jsonl', '--base-url', 'http://127.0.0.1:9/v1'],
                       'APIConnectionError'),
    'server times out': (OPENAI + ['--input', '{d}/gen.jsonl', '--base-url', '{slow}'], 'APITimeoutError'),
    'server sends a malformed body': (OPENAI + ['--input', '{d}/gen.jsonl', '--base-url', '{junk}'], 'JSONDecodeError'),
    'server sends a wrong-shaped body': (OPENAI + ['--input', '{d}/in.jsonl', '--base-url', '{empty}'],
                                         'not what the OpenAI API returns'),
    'merge with a part missing': (['merge', 'tiny-arith', '--results', '{d}/parts'],
                                  'tiny-arith_m.part-1-of-2.csv.gz is missing; fix: run that shard to its end'),
    'merge of a missing cache': (['cache', 'merge', '{d}/nosuch.sqlite', '--into', '{d}/merged.sqlite'],
                                 'nosuch.sqlite: no response cache there'),
    'cache merge of caches that disagree': (['cache', 'merge', '{d}/c1.sqlite', '{d}/c2.sqlite', '--into',
                                             '{d}/merged.sqlite'], '3 request(s) have other answers in'),
}
LAUNCHED = {  # name: (the launcher's variables, arguments, text the one line must contain)
    'a stray WORLD_SIZE': (dict(WORLD_SIZE='4'), EVAL, 'WORLD_SIZE=4 is set without RANK and LOCAL_RANK'),
    'one GPU for every rank': (dict(RANK='1', WORLD_SIZE='2', LOCAL_RANK='1'), EVAL + ['--device', 'cuda:0'],
                               '--device cuda:0 would put all 2 processes of the launcher on one GPU'),
    'report under srun': (dict(SLURM_PROCID='1', SLURM_NTASKS='2', SLURM_LOCALID='0', SLURM_STEP_ID='0'),
                          ['report', '--model', 'm', '--backend', 'dummy'], 'this is process 1/2 of a launcher'),
}


@pytest.mark.parametrize('case', list(CASES))
def test_user_error_is_one_line(case, files, urls):
    d, env = files
    args, expected = CASES[case]
    args = [a.format(d=d, **urls) for a in args]
    p = wordbench(*args, env=env)
    errors = [line for line in p.stderr.splitlines() if ': error: ' in line]
    assert p.returncode != 0, p.stderr[-2000:]
    assert 'Traceback' not in p.stderr, p.stderr[-3000:]
    assert len(errors) == 1 and expected in errors[0], p.stderr[-2000:]
    assert '; fix: ' in errors[0] or 'Fix: ' in errors[0], errors[0]
    print(f'{case}: {errors[0]}')


@pytest.mark.parametrize('case', list(LAUNCHED))
def test_launcher_error_is_one_line(case, files):
    "A launcher's variables that cannot make a run (a stray WORLD_SIZE, one GPU for every rank) are one line too."
    d, env = files
    ranks, args, expected = LAUNCHED[case]
    keep = {k: v for k, v in env.items() if k not in ('RANK', 'WORLD_SIZE', 'LOCAL_RANK') and 'SLURM' not in k}
    p = wordbench(*args, env={**keep, **ranks})
    errors = [line for line in p.stderr.splitlines() if ': error: ' in line]
    assert p.returncode == 2 and 'Traceback' not in p.stderr, p.stderr[-2000:]
    assert len(errors) == 1 and expected in errors[0] and '; fix: ' in errors[0], p.stderr[-2000:]


def test_debug_shows_the_traceback(files):
    d, env = files
    p = wordbench('--debug', *EVAL, '--grid', 'huge', env=env)
    assert p.returncode != 0 and 'Traceback' in p.stderr and 'UserError' in p.stderr


def test_missing_papers_is_one_line(files):
    "No system reads a paper when it loads; a command that needs one (the probes' generation) says so in one line."
    d, env = files
    env = {**env, 'WORDBENCH_SEEDS': str(d/'no-papers')}
    assert wordbench('list', 'tasks', env=env).returncode == 0
    p = wordbench('build', 'probes-generate', '--backend', 'dummy', '--model', 'm', '--prompts', 1, '--out', d/'gen',
                  env=env)
    errors = [line for line in p.stderr.splitlines() if ': error: ' in line]
    assert p.returncode == 2 and 'Traceback' not in p.stderr, p.stderr[-3000:]
    assert len(errors) == 1 and 'not found' in errors[0] and 'fix: set WORDBENCH_SEEDS' in errors[0], p.stderr
    assert 'arXiv:2303.16445' in errors[0], errors[0]
