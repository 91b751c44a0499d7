"End to end: the `openai` backend against a real OpenAI-compatible server (llama-cpp-python serving SmolLM2-135M)."
import pytest
from server_fixtures import serving
from wordbench.models.lm import get_lm, GenerateRequest, Generation, LoglikelihoodRequest, TopKRequest
from wordbench.models.openai_client import OpenAILM
from wordbench.models.openai_endpoint import LogprobAlignmentError

@pytest.fixture
def lm(llama_server):
    url, model = llama_server
    return get_lm('openai', model, base_url=url, timeout=120, max_retries=2, backoff=0.5)

def test_identity_names_what_is_served(llama_server, monkeypatch):
    "llama-cpp-python's identity: its kind, version and model (its alias: the GGUF's path); no key, no URL."
    from wordbench.models.openai_endpoint import parse_identity
    url, model = llama_server
    monkeypatch.setenv('OPENAI_API_KEY', 'sk-e2e-secret')
    lm = get_lm('openai', model, base_url=url)
    ident = lm.identity()
    assert isinstance(lm, OpenAILM) and 'sk-e2e' not in ident and url not in ident, ident
    fields = parse_identity(ident)
    assert (fields['kind'], fields['weights'], fields['dtype'], fields['tmpl']) == ('llama-cpp-python', model,
                                                                                     'unknown', 'unknown'), fields
    import llama_cpp
    assert fields['v'] == llama_cpp.__version__

def test_generate(lm):
    reqs = [GenerateRequest(messages=(('user', 'Name a colour.'),), max_tokens=12, seed=1),
            GenerateRequest(messages=(('system', 'Answer in one word.'), ('user', 'What is 2+2?')), max_tokens=8,
                            seed=2)]
    out = lm.generate(reqs)
    assert all(isinstance(o, Generation) and o.text.strip() and o.finish_reason in ('eos', 'length') for o in out), out
    assert all(o.prompt_format == 'server-chat' and o.prompt_tokens > 0 and o.completion_tokens > 0 for o in out), out
    assert lm.failures == []
    assert lm.supports_chat is True   # the server answers /chat/completions

def test_generate_raw_prompt_and_stop(lm):
    "A raw prompt goes to /v1/completions; a stop string ends the text before it, like the hf backend."
    count, = lm.generate([GenerateRequest(prompt='1, 2, 3, 4, 5,', max_tokens=12, stop=(', 8',))])
    assert count.prompt_format == 'raw' and count.text.startswith(' 6') and ', 8' not in count.text, count
    assert count.finish_reason == 'stop', count
    short, = lm.generate([GenerateRequest(prompt='Once upon a time', max_tokens=3)])
    assert (short.finish_reason, short.completion_tokens) == ('length', 3), short
    assert lm.failures == []

def test_echo_logprobs_refused(lm):
    "llama-cpp-python's echoed prompt log-probs are shifted by one token: refused by name, before any completion."
    with pytest.raises(LogprobAlignmentError, match='1983'):
        lm.loglikelihood([LoglikelihoodRequest('The cat sat on the', ' mat')])
    assert lm.failures == []


def test_topk_from_the_generation_path(lm):
    "`topk` reads the generation path, which the alignment check trusts, so a shifted echo does not stop it."
    (top,) = [t.words for t in lm.topk([TopKRequest("The capital of France is", k=5)])]
    assert len(top) == 5 and all(isinstance(w, str) and lp <= 0 for w, lp in top), top
    assert [lp for _, lp in top] == sorted((lp for _, lp in top), reverse=True)
    assert lm.failures == []


def test_topk_reads_both_reply_shapes(lm):
    ("The server's completions reply (`top_logprobs` dicts) and its chat reply (`content[].top_logprobs` rows, the "
     "shape llama.cpp's llama-server writes on /completions too) give the same kind of top-k.")
    from wordbench.models.openai_endpoint import next_top_logprobs
    legacy = lm.client.completions.create(model=lm.model, prompt='The capital of France is', max_tokens=1,
                                          logprobs=5, temperature=0.0)
    chat = lm.client.chat.completions.create(model=lm.model, messages=[{'role': 'user', 'content': 'Name a colour.'}],
                                             max_tokens=1, logprobs=True, top_logprobs=5, temperature=0.0)
    tops = [next_top_logprobs(r.choices[0].logprobs) for r in (legacy, chat)]
    assert all(0 < len(t) <= 5 and all(lp <= 0 for lp in t.values()) for t in tops), tops
    assert set(tops[1]) == {t.token for t in chat.choices[0].logprobs.content[0].top_logprobs}, tops


def _eval_wscplus(url, model, strategy, out):
    "`wordbench eval wscplus` on 3 items against the server: `(completed process, seconds)`."
    import os, subprocess, sys, time
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, '-m', 'wordbench.cli', 'eval', 'wscplus', '--model', model,
                        '--backend', 'openai', '--base-url', url, '--strategies', strategy, '--n', '3',
                        '--out', str(out), '--no-cache'],
                       capture_output=True, text=True, timeout=300, env={**os.environ, 'HF_HUB_OFFLINE': '1'})
    return p, time.monotonic() - t0

@pytest.fixture(scope='module')
def gemma_server(llama_server, tmp_path_factory):
    "`(base_url, model_id)` of the same server on the packaged Gemma 3 270M GGUF (where issue 20's run hung)."
    from wordbench.resources import LOCAL_MODELS
    from wordbench.bench.servers import LlamaCppServer
    yield from serving(LlamaCppServer(LOCAL_MODELS['gemma3-270m'].gguf(), n_ctx=2048,
                                      log_path=tmp_path_factory.mktemp('gemma_server')/'server.log'))

def test_cli_refuses_scored_protocol_up_front(gemma_server, tmp_path):
    "A scored protocol on llama-cpp-python: one line naming the bug and the fix within seconds, not a 20-minute hang."
    url, model = gemma_server
    p, took = _eval_wscplus(url, model, 'zero-shot-scored', tmp_path)
    errors = [line for line in p.stderr.splitlines() if ': error: ' in line]
    assert p.returncode == 2 and 'Traceback' not in p.stderr, p.stderr[-3000:]
    assert len(errors) == 1 and '1983' in errors[0] and 'vLLM' in errors[0], errors
    assert took < 60, took
    assert not list(tmp_path.glob('wscplus_*.csv.gz'))   # nothing scored, nothing written

def test_cli_runs_chat_protocol(gemma_server, tmp_path):
    "The chat protocol on the same server runs."
    url, model = gemma_server
    p, took = _eval_wscplus(url, model, 'zero-shot', tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    assert list(tmp_path.glob('wscplus_*.csv.gz')), p.stdout
