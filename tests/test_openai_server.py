"End to end: the `openai` backend against a real OpenAI-compatible server (llama-cpp-python serving SmolLM2-135M)."
import pytest
from wordbench.lm import get_lm, GenerateRequest, Generation, LoglikelihoodRequest, TopKRequest
from wordbench.openai_lm import OpenAILM, LogprobAlignmentError

@pytest.fixture
def lm(llama_server):
    url, model = llama_server
    return get_lm('openai', model, base_url=url, timeout=120, max_retries=2, backoff=0.5)

def test_identity_has_no_key(llama_server, monkeypatch):
    url, model = llama_server
    monkeypatch.setenv('OPENAI_API_KEY', 'sk-e2e-secret')
    lm = get_lm('openai', model, base_url=url)
    assert isinstance(lm, OpenAILM) and lm.identity() == f'openai:{url}:{model}'

def test_generate(lm):
    reqs = [GenerateRequest(messages=(('user', 'Name a colour.'),), max_tokens=12, seed=1),
            GenerateRequest(messages=(('system', 'Answer in one word.'), ('user', 'What is 2+2?')), max_tokens=8, seed=2)]
    out = lm.generate(reqs)
    assert all(isinstance(o, Generation) and o.text.strip() and o.finish_reason in ('eos', 'length') for o in out), out
    assert all(o.prompt_format == 'server-chat' and o.prompt_tokens > 0 and o.completion_tokens > 0 for o in out), out
    assert lm.failures == []

def test_generate_raw_prompt_and_stop(lm):
    "A raw prompt goes to /v1/completions; a stop string ends the text before it, like the hf backend."
    count, = lm.generate([GenerateRequest(prompt='1, 2, 3, 4, 5,', max_tokens=12, stop=(', 8',))])
    assert count.prompt_format == 'raw' and count.text.startswith(' 6') and ', 8' not in count.text, count
    assert count.finish_reason == 'stop', count
    short, = lm.generate([GenerateRequest(prompt='Once upon a time', max_tokens=3)])
    assert (short.finish_reason, short.completion_tokens) == ('length', 3), short
    assert lm.failures == []

def test_echo_logprobs_refused(lm):
    "llama-cpp-python's echoed prompt log-probs are shifted by one token: the self-check must refuse them."
    with pytest.raises(LogprobAlignmentError, match='1983'):
        lm.loglikelihood([LoglikelihoodRequest('The cat sat on the', ' mat')])
    assert lm.failures == []


def test_topk_from_the_generation_path(lm):
    "`topk` reads the generation path, which the alignment check trusts, so a shifted echo does not stop it."
    (top,) = [t.words for t in lm.topk([TopKRequest("The capital of France is", k=5)])]
    assert len(top) == 5 and all(isinstance(w, str) and lp <= 0 for w, lp in top), top
    assert [lp for _, lp in top] == sorted((lp for _, lp in top), reverse=True)
    assert lm.failures == []
