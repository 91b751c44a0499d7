"""The `openai` backend against stand-ins for vLLM, SGLang and llama.cpp's `llama-server` (`engine_standins.py`,
written from their source), serving a seeded tiny Llama over gemma3-270m's tokenizer (which adds BOS) and SmolLM2's
(which does not): a few requests of every scored task get the `hf` backend's log-likelihoods to 1e-4 and its
decisions; the engines' limits (`max_logprobs`, `max_model_len`) are refused as the engines would refuse them, one
request at a time; generations state every sampling field, so a model's sampling defaults never reach a reply; top-k
runs through llama-server, whose log-probs come in the chat API's shape, and scoring there is refused up front."""
import pytest
from wordbench.models.lm import get_lm, LoglikelihoodRequest, LMFailure, TopKRequest, GenerateRequest
from wordbench.models.openai_endpoint import LogprobAlignmentError
from wordbench.core import UserError
from engine_standins import EngineStandIn, READS

# small options per task: a few items each
OPTIONS = {'winodict': dict(pairs=2, buckets=['prob3_of_5']),
           'wscplus': dict(n=2), 'probes-cloze': dict(datasets=['ROLE-88'], pairs=2, k=1, whole_word=1)}

@pytest.fixture(scope='module')
def groups():
    ("One decision (its log-likelihood requests) of every registered task that scores log-likelihoods, but "
     "winodict-foreign: its requests are WinoDict's over another word table, and loading it takes 50 s.")
    import wordbench.winodict.task, wordbench.wscplus.task, wordbench.probes.task, wordbench.newterm.task  # noqa: F401
    from wordbench.evaluate.tasks import TASKS
    out = []
    for name, task in TASKS.items():
        if name == 'winodict-foreign': continue
        items, pool = task.load(**OPTIONS.get(name, dict(sample=2)))
        jobs = [tuple(r for r in j.requests or () if isinstance(r, LoglikelihoodRequest))
                for j in task.jobs(items[:4], task.settings(), pool)]
        out += [(name, g) for g in [g for g in jobs if g][:1]]
    assert {n for n, _ in out} >= {'winodict', 'wscplus', 'probes-cloze', 'newterm-coma-ll'}
    return out

@pytest.fixture(scope='module', params=['gemma3-270m', 'smollm2-135m'])
def hf(request):
    "The `hf` backend on a seeded 2-layer Llama over the tokenizer named (float32), which the stand-ins serve too."
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM
    from wordbench.resources import model_path
    tok = AutoTokenizer.from_pretrained(model_path(request.param))
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(num_hidden_layers=2, vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=2048))
    with torch.no_grad(): model.lm_head.weight *= 40   # peaked next-token distributions, as a trained model has
    return request.param, get_lm('hf', model.eval(), tokenizer=tok, batch_size=4)

def decisions(scores, groups):
    "Index of the best-scored request of each group."
    it = iter(scores)
    return [max(range(len(g)), key=[next(it)[0] for _ in g].__getitem__) for _, g in groups]

@pytest.mark.parametrize('engine', ['vllm', 'sglang'])
def test_scores_equal_hf(hf, groups, engine):
    "Every scored task, both tokenizers: each request's log-likelihood within 1e-4 of `hf`'s, the same decisions."
    name, ref_lm = hf
    reqs = [r for _, g in groups for r in g]
    ref = ref_lm.loglikelihood(reqs)
    with EngineStandIn(ref_lm.model, ref_lm.tokenizer, engine=engine, max_batch=2, max_model_len=1024) as srv:
        lm = get_lm('openai', 'standin', base_url=srv.base_url, tokenizer=name, batch_size=4, max_concurrency=2)
        lm.require({LoglikelihoodRequest})
        out = lm.loglikelihood(reqs)
    mode = 'prompt_logprobs' if engine == 'vllm' else 'echo'   # vLLM: its prompt log-probs once, without echo
    assert (lm.endpoint.server, lm.endpoint.prompt_logprobs, lm.failures) == (engine, mode, [])
    assert max(abs(a[0] - b[0]) for a, b in zip(out, ref)) < 1e-4
    assert [a[1] for a in out] == [b[1] for b in ref]
    assert decisions(out, groups) == decisions(ref, groups)

@pytest.mark.parametrize('engine', ['vllm', 'sglang'])
def test_text_prompts_trusted(hf, engine):
    "Without a tokenizer (text prompts, the server's BOS echoed first or offsets of -1), the self-check passes."
    name, ref_lm = hf
    reqs = [LoglikelihoodRequest('The cat sat on', ' the mat'), LoglikelihoodRequest('Once upon a', ' time')]
    with EngineStandIn(ref_lm.model, ref_lm.tokenizer, engine=engine, max_batch=2) as srv:
        lm = get_lm('openai', 'standin', base_url=srv.base_url, tokenizer='none')
        out = lm.loglikelihood(reqs)
    assert lm.endpoint.prompt_logprobs == 'echo-text' and not lm.failures
    assert max(abs(a[0] - b[0]) for a, b in zip(out, ref_lm.loglikelihood(reqs))) < 1e-4

def test_engine_limits(hf):
    "vLLM's log-prob cap refuses a larger k before any request; a prompt over the window fails alone."
    name, ref_lm = hf
    with EngineStandIn(ref_lm.model, ref_lm.tokenizer, engine='vllm', max_batch=2, max_model_len=64) as srv:
        lm = get_lm('openai', 'standin', base_url=srv.base_url, tokenizer=name, batch_size=4)
        assert (lm.endpoint.max_logprobs, lm.endpoint.max_model_len) == (20, 64)
        sent = len(srv.bodies)
        with pytest.raises(UserError, match='--max-logprobs 21'): lm.topk([TopKRequest('The cat', k=21)])
        assert len(srv.bodies) == sent
        long = LoglikelihoodRequest('word ' * 80, ' end')
        out = lm.loglikelihood([LoglikelihoodRequest('The cat sat on', ' the mat'), long])
    assert not isinstance(out[0], LMFailure) and isinstance(out[1], LMFailure)
    assert "does not fit the server's window of 64 tokens" in out[1].error

# Qwen2.5-Instruct's generation_config.json: what vLLM fills in for a field a request leaves out
GENERATION_CONFIG = dict(repetition_penalty=1.05, temperature=0.7, top_p=0.8, top_k=20)
PROMPTS = ('The cat sat on the', 'Once upon a time there was', 'One two three four')

@pytest.mark.parametrize('engine', ['vllm', 'sglang', 'llama.cpp'])
def test_generation_leaves_nothing_to_the_server(hf, engine, monkeypatch):
    ("Every generation and top-k request states every sampling field the engine reads, so greedy replies equal the "
     "`hf` backend's though the model's generation_config (vLLM) or the server's defaults (llama.cpp) set a "
     "repetition penalty; without those fields they differ (SGLang's completions use its own defaults).")
    import wordbench.models.openai_client as openai_client
    name, ref_lm = hf
    # prompts that already hold the words the model writes next, as few-shot prompts do: a repetition penalty bites
    first = ref_lm.generate([GenerateRequest(prompt=p, max_tokens=12) for p in PROMPTS])
    reqs = [GenerateRequest(prompt=g.text + ' ' + p, max_tokens=12) for g, p in zip(first, PROMPTS)]
    ref = [g.text for g in ref_lm.generate(reqs)]
    with EngineStandIn(ref_lm.model, ref_lm.tokenizer, engine=engine, max_batch=2,
                       generation_config=GENERATION_CONFIG) as srv:
        lm = get_lm('openai', 'standin', base_url=srv.base_url, tokenizer=name)
        lm.require({GenerateRequest, TopKRequest})
        probed = len(srv.bodies)
        out = lm.generate(reqs + [GenerateRequest(prompt=PROMPTS[0], max_tokens=4, temperature=1.0, seed=3)])
        lm.topk([TopKRequest(PROMPTS[0], k=3)])
        sent = srv.bodies[probed:]
        monkeypatch.setattr(openai_client, 'sampling_fields', lambda *a: {})   # what the client sent before
        bare = [g.text for g in lm.generate(reqs)]
    assert lm.endpoint.server == engine and not lm.failures, lm.failures
    assert len(sent) == len(reqs) + 2 and all(set(READS[engine]) <= set(b) for b in sent), sent
    assert [g.text for g in out[:len(reqs)]] == ref
    assert (bare != ref) == (engine != 'sglang'), (bare, ref)

def test_topk_through_llama_server(hf):
    ("llama-server (stand-in): whole-word scores are refused before any request, naming what still runs; "
     "probes-cloze top-k, read from its chat-shaped log-probs, gives the `hf` backend's words and decisions.")
    from wordbench.probes.task import CLOZE
    from wordbench.evaluate.tasks import run_task
    name, ref_lm = hf
    items, _ = CLOZE.load(datasets=['ROLE-88'], pairs=2, k=5, whole_word=0)
    ref = run_task(CLOZE, ref_lm, CLOZE.settings(), items)
    with EngineStandIn(ref_lm.model, ref_lm.tokenizer, engine='llama.cpp', max_batch=2) as srv:
        lm = get_lm('openai', 'standin', base_url=srv.base_url, tokenizer=name)
        with pytest.raises(LogprobAlignmentError, match=r'no prompt log-probs.*probes-cloze --whole-word 0'):
            run_task(CLOZE, lm, CLOZE.settings(), [dict(i, whole_word=True) for i in items])
        out = run_task(CLOZE, lm, CLOZE.settings(), items)
        sent = list(srv.bodies)
    assert lm.endpoint.server == 'llama.cpp' and not lm.failures and not any(b.get('echo') for b in sent)
    assert not out.failed.any() and len(out) == len(ref) == len(items)
    assert (out.words.tolist(), out.correct.tolist()) == (ref.words.tolist(), ref.correct.tolist())
    assert out.logprobs.tolist() == ref.logprobs.tolist()
