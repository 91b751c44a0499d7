"""llama.cpp's own `llama-server` (built by `make test-env` from the wheel's vendored source) against llama-cpp-python's
server on the same GGUF: greedy replies and top-k lists agree, top-k runs the probes, scoring is refused in one line."""
import subprocess, sys
from pathlib import Path
import pytest
from server_fixtures import serving
from wordbench.bench.servers import LlamaServer, llama_server_binary
from wordbench.models.lm import GenerateRequest, LMFailure, TopKRequest, get_lm
from wordbench.resources import LOCAL_MODELS

PROMPTS = ('The capital of France is', 'A robin is a kind of', 'Once upon a time', 'Water boils at')


@pytest.fixture(scope='module')
def real_server(tmp_path_factory):
    "`(base_url, model_id)` of `llama-server` for SmolLM2-135M's GGUF on 127.0.0.1; skipped without the binary."
    if llama_server_binary() is None: pytest.skip('llama-server is not installed (make test-env builds it)')
    yield from serving(LlamaServer(LOCAL_MODELS['smollm2-135m'].gguf(), n_ctx=2048,
                                   log_path=tmp_path_factory.mktemp('llama_server_real')/'server.log'))


def both(real_server, llama_server):
    return [get_lm('openai', model, base_url=url) for url, model in (real_server, llama_server)]


def test_greedy_replies_equal_llama_cpp_python(real_server, llama_server):
    real, python = both(real_server, llama_server)
    reqs = [GenerateRequest(prompt=p, max_tokens=24, temperature=0.0) for p in PROMPTS]
    got, want = real.generate(reqs), python.generate(reqs)
    assert not any(isinstance(x, LMFailure) for x in got + want), (got, want)
    assert [g.text for g in got] == [w.text for w in want]
    assert all(len(g.text.split()) >= 3 for g in got)


def test_top_k_lists_are_full_and_agree(real_server, llama_server):
    real, python = both(real_server, llama_server)
    reqs = [TopKRequest(p, k=5) for p in PROMPTS]
    got, want = real.topk(reqs), python.topk(reqs)
    assert all(len(g.words) == 5 for g in got), got
    assert [[w for w, _ in g.words] for g in got] == [[w for w, _ in x.words] for x in want]
    assert max(abs(a - b) for g, x in zip(got, want) for (_, a), (_, b) in zip(g.words, x.words)) < 1e-3


def cloze(real_server, out: Path, *extra) -> subprocess.CompletedProcess:
    url, model = real_server
    return subprocess.run([Path(sys.executable).parent/'wordbench', 'eval', 'probes-cloze', '--backend', 'openai',
                           '--base-url', url, '--model', model, '--datasets', 'NEG-136-SIMP', '--pairs', '2',
                           '--out', str(out), '--no-cache', *extra], capture_output=True, text=True, timeout=600)


def test_probes_run_on_top_k(real_server, tmp_path):
    "The probes' cloze task needs only next-token top-k with `--whole-word 0`: it runs, and no row failed."
    import pandas as pd
    p = cloze(real_server, tmp_path, '--whole-word', '0')
    assert p.returncode == 0, p.stderr[-2000:]
    rows = pd.read_csv(next(tmp_path.glob('probes-cloze_*.csv.gz')))
    assert len(rows) > 0 and not rows.failed.any(), rows.head()


def test_scoring_is_refused_in_one_line(real_server, tmp_path):
    "Whole-word scoring needs prompt log-probs, which llama-server does not serve: one line, naming the way out."
    p = cloze(real_server, tmp_path)
    errors = [line for line in p.stderr.splitlines() if ': error: ' in line]
    assert p.returncode == 2 and 'Traceback' not in p.stderr, p.stderr[-2000:]
    assert len(errors) == 1 and 'returns no prompt log-probs' in errors[0] and '--whole-word 0' in errors[0], errors


def test_identity_names_build_weights_and_type(real_server):
    "llama-server reports its build, the GGUF it loaded, its weight type and its chat template: all in the identity."
    from wordbench.models.openai_endpoint import parse_identity
    from wordbench.core import stable_hash
    import httpx
    url, model = real_server
    lm = get_lm('openai', model, base_url=url)
    fields = parse_identity(lm.identity())
    props = httpx.get(url.removesuffix('/v1') + '/props').json()
    assert url not in lm.identity() and fields['kind'] == 'llama.cpp', fields
    assert (fields['v'], fields['weights']) == (props['build_info'], str(LOCAL_MODELS['smollm2-135m'].gguf()))
    assert (fields['dtype'], fields['tmpl']) == ('q4_1', stable_hash(props['chat_template'])[:12])
    assert lm.recheck_note == 'server in q4_1: decisions not re-checked'
