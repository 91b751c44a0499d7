"""Every model-calling builder end to end from the CLI against llama.cpp's real server (gemma3-270m GGUF) as a chat
endpoint, with a local scorer; each builder, killed mid-run, resumes without repeating a call."""
import json, os, re, signal, subprocess, sys, time
from pathlib import Path
import pytest
from wordbench.core import cache_dir, read_jsonl

ROOT = Path(__file__).resolve().parents[1]
POSTS = re.compile(r'"POST /v1/(?:chat/)?completions HTTP')


@pytest.fixture(scope='module')
def gemma_chat(llama_server, tmp_path_factory):
    "`(base_url, model_id, log_path)` of llama-cpp-python's server on the packaged Gemma 3 270M GGUF."
    from wordbench.resources import LOCAL_MODELS
    from wordbench.bench.servers import LlamaCppServer
    log = tmp_path_factory.mktemp('gemma_chat')/'server.log'
    server = LlamaCppServer(LOCAL_MODELS['gemma3-270m'].gguf(), n_ctx=2048, log_path=log)
    try: server.start()
    except RuntimeError as e: pytest.fail(str(e), pytrace=False)
    try: yield server.base_url, server.model, log
    finally: server.stop()


@pytest.fixture
def env(tmp_path):
    "A private response cache; converted models, WordNet and the rest linked from the real cache."
    real, mine = cache_dir(), tmp_path/'cache'
    mine.mkdir()
    for entry in real.iterdir():
        if entry.name != 'lm': (mine/entry.name).symlink_to(entry)
    return {**os.environ, 'PYTHONPATH': str(ROOT), 'WORDBENCH_CACHE': str(mine), 'HF_HUB_OFFLINE': '1'}


def posts(log: Path) -> int:
    "Completion requests the server has logged so far."
    return len(POSTS.findall(log.read_text(errors='replace')))


def build(builder: str, *args, env: dict, timeout: int=420) -> dict:
    "`wordbench build BUILDER ARGS`: its JSON summary (the test fails with stderr when it fails)."
    p = subprocess.run([sys.executable, '-m', 'wordbench.cli', 'build', builder, *map(str, args)],
                       capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout)


def one_term(path: Path) -> Path:
    "A new_terms.jsonl with one term (the smallest NewTerm build)."
    path.write_text(json.dumps(dict(term='doomscrolling', meaning='Spending a long time reading bad news online.',
                                    type='new words not deduced')) + '\n')
    return path


def newterm_args(url, model, terms, out):
    return ['--model', model, '--backend', 'openai', '--base-url', url, '--scorer', 'smollm2-135m', '--terms', terms,
            '--tasks', 'CSJ', '--max-tries', '1', '--max-tokens', '24', '--out', out]


def test_wscplus_on_a_chat_endpoint(gemma_chat, env, tmp_path):
    url, model, log = gemma_chat
    before = posts(log)
    rep = build('wscplus', '--models', model, '--backend', 'openai', '--base-url', url, '--templates', 'cot',
                '--queries', 'wdq', '--calls', '1', '--pairs', '1', '--max-tokens', '48', '--out', tmp_path, env=env)
    assert rep['calls'] == 1, rep
    calls = [r for _, r in read_jsonl(tmp_path/'calls.jsonl')]
    assert [c['method'] for c in calls] == ['generate'] and 'error' not in calls[0], calls
    assert 1 <= posts(log) - before <= 2   # the call, and the capability probe of a new process
    assert (tmp_path/'yield.csv').exists()


def test_probes_generate_on_a_chat_endpoint(gemma_chat, env, tmp_path):
    url, model, _ = gemma_chat
    rep = build('probes-generate', '--kind', 'neg-gen', '--model', model, '--backend', 'openai', '--base-url', url,
                '--prompts', '2', '--max-tokens', '24', '--protocol', 'auto', '--out', tmp_path, env=env)
    assert (rep['prompts'], rep['failed'], rep['chat'], rep['base_url']) == (2, 0, True, url), rep
    assert len(list(read_jsonl(tmp_path/'calls.jsonl'))) == 2


def test_newterm_on_a_chat_endpoint_killed_and_resumed_repeats_no_call(gemma_chat, env, tmp_path):
    url, model, log = gemma_chat
    out, start = tmp_path/'out', posts(log)
    cmd = [sys.executable, '-m', 'wordbench.cli', 'build', 'newterm',
           *map(str, newterm_args(url, model, one_term(tmp_path/'terms.jsonl'), out))]
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    while not (out/'stages'/'terms.json').exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert proc.poll() is None, f'the build ended before it could be killed: {proc.stderr.read()[-2000:]}'
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    first = [r['key'] for _, r in read_jsonl(out/'calls.jsonl')]
    asked_first = posts(log) - start
    rep = build('newterm', *newterm_args(url, model, tmp_path/'terms.jsonl', out), env=env)
    assert rep['resumed_stages'][:1] == ['terms'], rep
    assert rep['n_terms'] == 1 and rep['model'].startswith('openai:') and rep['scorer'].startswith('hf'), rep
    report = json.loads((out/'report.json').read_text())
    assert report['chat'] is True and report['scorer_backend'] == 'hf' and not (out/'stages').exists()
    keys = [r['key'] for _, r in read_jsonl(out/'calls.jsonl')]
    assert len(set(keys)) == len(keys) and len(keys) > len(first)   # no computed call repeated
    generated = sum(1 for _, r in read_jsonl(out/'calls.jsonl') if r['method'] == 'generate')
    # the server saw each generation once, plus one capability probe per process and at most one call in flight
    assert generated <= posts(log) - start <= generated + 2 + 1, (generated, posts(log) - start, asked_first)


def killed_after_first_call(cmd: list, calls: Path, env: dict, timeout: int=300) -> int:
    "Run `cmd`, SIGKILL it once `calls` (its calls.jsonl) holds a computed call; the number of calls it had logged."
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + timeout
    while not (calls.exists() and calls.stat().st_size) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, f'the build ended before it could be killed: {proc.stderr.read()[-2000:]}'
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return len(list(read_jsonl(calls)))


def assert_resumed_without_repeats(calls: Path, first: int, total: int, log: Path, start: int):
    "Every call computed once across both runs, and the server asked at most once more per process (its probe)."
    keys = [r['key'] for _, r in read_jsonl(calls)]
    assert len(keys) == len(set(keys)) == total and first < total, (first, keys)
    assert total <= posts(log) - start <= total + 2 + 1, (total, posts(log) - start)


def test_wscplus_killed_and_resumed_repeats_no_call(gemma_chat, env, tmp_path):
    url, model, log = gemma_chat
    args = ['--models', model, '--backend', 'openai', '--base-url', url, '--templates', 'cot', '--queries', 'wdq',
            '--calls', '4', '--pairs', '1', '--max-tokens', '48', '--out', tmp_path]
    start = posts(log)
    first = killed_after_first_call([sys.executable, '-m', 'wordbench.cli', 'build', 'wscplus', *map(str, args)],
                                    tmp_path/'calls.jsonl', env)
    rep = build('wscplus', *args, env=env)
    assert rep['calls'] == 4, rep
    assert_resumed_without_repeats(tmp_path/'calls.jsonl', first, 4, log, start)


def test_probes_generate_killed_and_resumed_repeats_no_call(gemma_chat, env, tmp_path):
    url, model, log = gemma_chat
    args = ['--kind', 'neg-gen', '--model', model, '--backend', 'openai', '--base-url', url, '--prompts', '4',
            '--max-tokens', '24', '--protocol', 'auto', '--out', tmp_path]
    start = posts(log)
    first = killed_after_first_call([sys.executable, '-m', 'wordbench.cli', 'build', 'probes-generate',
                                     *map(str, args)], tmp_path/'calls.jsonl', env)
    rep = build('probes-generate', *args, env=env)
    assert (rep['prompts'], rep['failed']) == (4, 0), rep
    assert_resumed_without_repeats(tmp_path/'calls.jsonl', first, 4, log, start)
