"""The `openai` backend speaking vLLM's completions protocol (token-id prompts, batches, `echo`, `prompt_logprobs`)
against a local stand-in that answers with what a fixed-weight tiny Llama over SmolLM2's tokenizer computes: scores
equal the `hf` backend's on the same model; a slow one-slot server computes every request once. Against a stand-in
of fixed capacity (S slots, sleep per token): the pool is sized from the slots and keeps them busy, a queue wait is
never a timeout, and a run stopped half-way keeps what finished."""
import json, time
import pytest
from wordbench.models.lm import get_lm, LoglikelihoodRequest, LMFailure
import wordbench.models.openai_endpoint as openai_endpoint
from wordbench.models.openai_endpoint import Endpoint
from wordbench.models.openai_transport import json_replies
from fixtures.vllm_standin import StandIn
from fixtures.capacity_standin import CapacityStandIn

@pytest.fixture(scope='module')
def smol():
    "The `hf` backend on a seeded 2-layer Llama over SmolLM2's tokenizer (float32), which the stand-in serves too."
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM
    from wordbench.resources import model_path
    tok = AutoTokenizer.from_pretrained(model_path('smollm2-135m'))
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(num_hidden_layers=2, vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=2048))
    with torch.no_grad(): model.lm_head.weight *= 40   # peaked next-token distributions, as a trained model has
    return get_lm('hf', model.eval(), tokenizer=tok, batch_size=8)

@pytest.fixture(scope='module')
def winodict_requests():
    "The log-likelihood requests of 4 WinoDict twin pairs (zero-shot), grouped per decision."
    from wordbench.winodict.task import WINODICT
    items, pool = WINODICT.load(pairs=4, buckets=['prob3_of_5'])
    jobs = list(WINODICT.jobs(items, WINODICT.settings(shots=[0], seeds=[0]), pool))
    return [tuple(j.requests) for j in jobs if j.requests]

def decisions(scores, groups):
    "Index of the best-scored request of each group."
    it = iter(scores)
    return [max(range(len(g)), key=[next(it)[0] for _ in g].__getitem__) for g in groups]

@pytest.mark.parametrize('mode', ['echo', 'prompt_logprobs'])
def test_scores_equal_hf(smol, winodict_requests, mode, monkeypatch):
    "Token-id prompts, batched and concurrent, give the `hf` backend's log-likelihoods to 1e-4 and its decisions."
    reqs = [r for g in winodict_requests for r in g] + [LoglikelihoodRequest('', ' The cat sat.')]
    ref = smol.loglikelihood(reqs)
    with StandIn(smol.model, smol.tokenizer) as srv:
        lm = get_lm('openai', 'standin', base_url=srv.base_url, tokenizer='smollm2-135m', batch_size=5,
                    max_concurrency=3)
        if mode == 'prompt_logprobs':   # a server that refuses echo on token ids: vLLM's own field is used
            monkeypatch.setattr(openai_endpoint, '_probe_ids', lambda p, server=None: 'prompt_logprobs')
        assert lm.endpoint.prompt_logprobs == mode   # probed first: its self-check on token ids sends a batch too
        probed = len(srv.bodies)
        out = lm.loglikelihood(reqs)
        assert not lm.failures
        scoring = srv.bodies[probed:]   # the scoring requests only
    assert max(abs(a[0] - b[0]) for a, b in zip(out, ref)) < 1e-4
    assert [a[1] for a in out] == [b[1] for b in ref]
    assert decisions(out, winodict_requests) == decisions(ref, winodict_requests)
    assert len(scoring) == -(-len(reqs) // 5) and all(len(b['prompt']) <= 5 for b in scoring)
    assert all(b['temperature'] == 0 and b['max_tokens'] == 1 for b in scoring)
    assert all(b.get('echo') is True for b in scoring) if mode == 'echo' else all(b['prompt_logprobs'] == 1
                                                                                 for b in scoring)

@pytest.mark.parametrize('engine,mode', [('vllm', 'echo'), ('vllm', 'prompt_logprobs'), ('sglang', 'echo')])
def test_raw_json_equals_sdk(smol, winodict_requests, engine, mode):
    "Scoring replies read as plain JSON (`json_replies`) give the very `(logprob, is_greedy)` the SDK's objects give."
    from engine_standins import EngineStandIn
    from wordbench.models.hf_common import encode_pair
    from wordbench.models.openai_endpoint import batch_logprobs
    import torch
    prompts = [sum(encode_pair(smol.tokenizer, r.context, r.continuation), []) for g in winodict_requests for r in g]
    greedy = smol.model.generate(torch.tensor([prompts[0][:6]]), max_new_tokens=6, do_sample=False)[0].tolist()
    prompts.insert(3, greedy)   # a prompt whose last 6 tokens are each the model's first choice
    with EngineStandIn(smol.model, smol.tokenizer, engine=engine, max_batch=8, max_model_len=1024) as srv:
        lm = get_lm('openai', 'standin', base_url=srv.base_url, tokenizer='smollm2-135m', max_retries=0,
                    endpoint=Endpoint(server=engine, prompt_logprobs=mode, token_ids=True))
        send_json = lambda **f: lm._retry(json_replies(lm.client.completions), model=lm.model, **f)
        reply = send_json(prompt=prompts[:2], max_tokens=1, temperature=0.0, echo=True, logprobs=1)
        sdk = [batch_logprobs(lm._send, prompts[i:i + 8], mode) for i in range(0, len(prompts), 8)]
        raw = [batch_logprobs(send_json, prompts[i:i + 8], mode) for i in range(0, len(prompts), 8)]
    assert type(reply) is dict and type(reply['choices'][0]['logprobs']['token_logprobs'][1]) is float
    assert raw == sdk and len(raw) == -(-len(prompts) // 8)
    flags = [g for rows in raw for row in rows for _, g in row[1:]]
    assert sum(flags) and not all(flags) and len(flags) == sum(len(p) - 1 for p in prompts)   # both kinds, each token

@pytest.mark.parametrize('engine', ['vllm', 'sglang'])
def test_vllm_scores_without_echo(smol, engine):
    ("The probe picks vLLM's `prompt_logprobs` (no echo: each log-prob sent once, a smaller reply) and SGLang's echo; "
     "both engines get `BATCHING_CONCURRENCY` requests in flight, not the 64 of an unknown server.")
    from engine_standins import EngineStandIn
    from wordbench.models.openai_client import BATCHING_CONCURRENCY, DEFAULT_CONCURRENCY
    reqs = [LoglikelihoodRequest('The cat sat on', ' the mat'), LoglikelihoodRequest('Once upon a', ' time')]
    with EngineStandIn(smol.model, smol.tokenizer, engine=engine, max_model_len=1024) as srv:
        lm = get_lm('openai', 'standin', base_url=srv.base_url, tokenizer='smollm2-135m', batch_size=2)
        lm.require({LoglikelihoodRequest})
        probed = len(srv.bodies)
        out = lm.loglikelihood(reqs)
        body, = srv.bodies[probed:]
        ids = body['prompt']
        send_json = lambda **f: lm._retry(json_replies(lm.client.completions), model=lm.model, **f)
        sizes = [len(json.dumps(send_json(prompt=ids, max_tokens=1, temperature=0.0, **kw)))
                 for kw in (dict(extra_body={'prompt_logprobs': 1}), dict(echo=True, logprobs=1))]
    want = 'prompt_logprobs' if engine == 'vllm' else 'echo'
    assert lm.endpoint.prompt_logprobs == want and not lm.failures
    assert max(abs(a[0] - b[0]) for a, b in zip(out, smol.loglikelihood(reqs))) < 1e-4
    assert ('echo' in body, 'prompt_logprobs' in body) == ((False, True) if engine == 'vllm' else (True, False))
    assert lm._workers() == BATCHING_CONCURRENCY > DEFAULT_CONCURRENCY
    if engine == 'vllm': assert sizes[0] < 0.75 * sizes[1]   # vLLM's echo reply carries prompt_logprobs as well

def test_count_tokens_matches_hf(smol):
    lm = get_lm('openai', 'x', base_url='http://127.0.0.1:9/v1', tokenizer='smollm2-135m')
    for text, ctx in ((' a robin', ''), ('redbreast', 'A robin is a '), ('', 'x')):
        assert lm.count_tokens(text, ctx) == smol.count_tokens(text, ctx)

def test_slow_server_computes_each_request_once(smol):
    "A one-slot server slower than the connect timeout: 6 requests, 3 in flight, each computed exactly once."
    reqs = [LoglikelihoodRequest(f'Number {i} is', ' odd') for i in range(6)]
    with StandIn(smol.model, smol.tokenizer, delay=0.6) as srv:
        lm = get_lm('openai', 'standin', base_url=srv.base_url, tokenizer='smollm2-135m', batch_size=1,
                    max_concurrency=3, timeout=0.2)
        # probed elsewhere: the Endpoint is given, so only the scoring requests reach the server
        lm._endpoint = Endpoint(prompt_logprobs='echo', token_ids=True)
        out = lm.loglikelihood(reqs)
        bodies = list(srv.bodies)
    assert not any(isinstance(o, LMFailure) for o in out), lm.failures
    sent = sorted(smol.tokenizer.decode(b['prompt'][0]) for b in bodies)   # counted on the server side
    assert sent == sorted(r.context + r.continuation for r in reqs)
    assert len(bodies) == 6 and lm.counters['retries'] == 0 and lm.counters['http_calls'] == 6

def test_reported_slots_bound_concurrency(smol):
    "A server reporting one slot (llama.cpp's /props) gets one request at a time, however many are allowed."
    with StandIn(smol.model, smol.tokenizer, slots=1) as srv:
        lm = get_lm('openai', 'standin', base_url=srv.base_url, max_concurrency=8)
        assert lm._workers() == 1 and lm.endpoint.slots == 1

def test_probe_recorded_in_identity(smol):
    ("The endpoint is probed once, by the identity or by `require`; the identity names what it serves, never the URL "
     "(the hf backend's is unchanged).")
    from wordbench.models.lm import GenerateRequest
    hf_identity = smol.identity()
    with StandIn(smol.model, smol.tokenizer) as srv:
        lm = get_lm('openai', 'standin', base_url=srv.base_url, tokenizer='smollm2-135m')
        first = lm.identity()   # a generative task's too: scoring is probed as well, so every run's keys agree
        calls = lm.counters['http_calls']
        lm.require({GenerateRequest})
        lm.require({LoglikelihoodRequest})
        assert lm.counters['http_calls'] == calls   # probed once
    # a server of no known kind reports nothing of itself; the stand-in has no /chat/completions
    assert first == lm.identity() == ('openai:unknown:standin:weights=unknown:dtype=unknown:v=unknown:tmpl=unknown:'
                                      'tok=smollm2-135m:serves=ids+echo')
    # the probe also reads the window and the log-prob cap, which this stand-in does not state
    assert lm.endpoint.record() == {'server': None, 'prompt_logprobs': 'echo', 'token_ids': True, 'chat': False,
                                    'slots': None, 'max_model_len': None, 'max_logprobs': None, 'version': None,
                                    'weights': None, 'dtype': None, 'quantization': None, 'kv_cache_dtype': None,
                                    'template': None, 'declared': ()}
    assert smol.identity() == hf_identity and smol.identity().startswith('hf:')

def test_refusal_recorded_and_raised(smol, monkeypatch):
    "An endpoint that cannot score: the probe records why; a scoring task is refused with it, a generative one runs."
    from wordbench.models.lm import GenerateRequest
    from wordbench.models.openai_endpoint import LogprobAlignmentError
    with StandIn(smol.model, smol.tokenizer) as srv:
        lm = get_lm('openai', 'standin', base_url=srv.base_url, tokenizer='none')
        def failed(p, prompts=None): raise LogprobAlignmentError('no echo here', 'use vLLM')
        # as if the self-check had failed (the probe runs it once)
        monkeypatch.setattr(openai_endpoint, 'check_logprob_alignment', failed)
        lm.require({GenerateRequest})
        with pytest.raises(LogprobAlignmentError, match='no echo here'): lm.require({LoglikelihoodRequest})
    assert lm.endpoint.prompt_logprobs is None
    assert lm.endpoint.scoring_refused == 'no echo here; fix: use vLLM'
    assert lm.identity().endswith(':tmpl=unknown:serves=-')

def test_generate_token_id_prompts(smol):
    "Raw prompts go as token ids, built as the hf backend builds them, where the endpoint takes them: the same text."
    from wordbench.models.lm import GenerateRequest
    from wordbench.models.hf_common import encode_text
    reqs = [GenerateRequest(prompt='The cat sat on', max_tokens=5), GenerateRequest(prompt='Once upon a', max_tokens=3)]
    ref = smol.generate(reqs)
    with StandIn(smol.model, smol.tokenizer) as srv:
        lm = get_lm('openai', 'standin', base_url=srv.base_url, tokenizer='smollm2-135m')
        out = lm.generate(reqs)
        sent = sorted(b['prompt'] for b in srv.bodies if b['max_tokens'] > 1)
    assert lm.endpoint.token_ids is True and not lm.failures
    assert sent == sorted(encode_text(smol.tokenizer, r.prompt) for r in reqs)
    assert [o.text for o in out] == [o.text for o in ref], (out, ref)
    assert [o.completion_tokens for o in out] == [5, 3]

def _gen(n: int, tokens: int=5) -> list:
    from wordbench.models.lm import GenerateRequest
    return [GenerateRequest(prompt=f'request {i}', max_tokens=tokens) for i in range(n)]

def _client(srv, **kw):
    "The openai backend on a capacity stand-in (text prompts), probed: llama.cpp by its /props, with its slots."
    from wordbench.models.lm import GenerateRequest
    lm = get_lm('openai', 'standin', base_url=srv.base_url, tokenizer='none', max_retries=0, **kw)
    lm.require({GenerateRequest})
    return lm

def test_pool_sized_from_slots_keeps_server_busy(tmp_path):
    "Slots reported on /props size the pool: every slot busy, none queued; the old 4-in-flight client uses 4."
    from wordbench.models.cache import CachedLM
    with CapacityStandIn(8, 0.01) as srv:
        lm = _client(srv)
        assert lm.endpoint.slots == 8 and lm._workers() == 8
        before, t0 = srv.stats(), time.perf_counter()
        out = CachedLM(lm, tmp_path/'a.sqlite').generate(_gen(64, 10))
        wall, after = time.perf_counter() - t0, srv.stats()
        assert not lm.failures and all(o.completion_tokens == 10 for o in out)
        assert after['requests'] - before['requests'] == 64 and after['max_active'] == 8
        assert (after['busy_s'] - before['busy_s']) / (8 * wall) > 0.5   # >= 0.9 on an idle machine
        old = _client(srv, max_concurrency=4)
        CachedLM(old, tmp_path/'b.sqlite', streaming=False).generate(_gen(16))
    with CapacityStandIn(64, 0.01) as srv:
        CachedLM(_client(srv, max_concurrency=4), tmp_path/'c.sqlite', streaming=False).generate(_gen(16))
        assert srv.stats()['max_active'] == 4

def test_queue_wait_is_not_a_timeout():
    "One slot, six requests of 0.2 s and a 0.5 s read timeout: they wait their turn in the client, none times out."
    with CapacityStandIn(1, 0.05) as srv:
        lm = _client(srv, read_timeout=0.5)
        t0 = time.perf_counter()
        out = lm.generate(_gen(6, 4))
        assert time.perf_counter() - t0 > 1.0 and not lm.failures, lm.failures
        assert [o.completion_tokens for o in out] == [4] * 6 and srv.stats()['max_active'] == 1

def test_stopped_run_keeps_what_finished(tmp_path):
    "A run that breaks half-way keeps every answer that arrived; the rerun asks the server only for the rest."
    from wordbench.models.cache import CachedLM
    reqs = _gen(40)
    with CapacityStandIn(4, 0.01) as srv:
        lm = _client(srv)
        chat = lm._chat
        def breaking(r):
            if r.prompt == 'request 20':
                time.sleep(0.3)
                raise RuntimeError('killed')
            return chat(r)
        lm._chat = breaking
        cache = CachedLM(lm, tmp_path/'c.sqlite', chunk_size=1000, commit_s=1000)
        with pytest.raises(RuntimeError, match='killed'): cache.generate(reqs)
        kept = cache.con.execute('SELECT COUNT(*) FROM results').fetchone()[0]
        assert 10 < kept < 40
        while srv.stats()['active']: time.sleep(0.05)   # requests in flight when it broke finish, unkept
        lm._chat, sent = chat, srv.stats()['requests']
        out = cache.generate(reqs)
        assert cache.last == {'computed': 40 - kept, 'cached': kept, 'failed': 0}
        assert srv.stats()['requests'] - sent == 40 - kept and all(o.completion_tokens == 5 for o in out)
