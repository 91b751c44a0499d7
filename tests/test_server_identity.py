"""What a server run is named by: the engine, its version, the weights, the precision and the chat template, never the
URL. Against the engine stand-ins (`engine_standins.py`) serving a seeded tiny Llama over SmolLM2's tokenizer: each
engine's identity names what it reports, else `unknown`; a declared dtype fills in what vLLM does not say and is refused
where the server says otherwise; the response cache is shared by the same server on another port and split by new
weights behind the same URL; a server off float32 has its close decisions named in the run record as not re-checked,
or re-checked against a float32 reference (an hf folder, or a float32 server) without a change of identity;
the probe takes only 400, 404, 422 and 501 from `/chat/completions` for "no chat", and raises on any other failure;
under a launcher, rank 0's probe serves every rank."""
import pandas as pd
import pytest
from wordbench.core import ServerError, UserError, stable_hash
from wordbench.models.lm import get_lm, LoglikelihoodRequest
from wordbench.models.open import open_lm
from wordbench.models.openai_endpoint import parse_identity
from engine_standins import EngineStandIn

TOKENIZER = 'smollm2-135m'   # has a chat template, which vLLM's `/tokenize` renders


@pytest.fixture(scope='module')
def tiny():
    "`(model, tokenizer)`: a seeded 2-layer Llama (float32) over SmolLM2's tokenizer."
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM
    from wordbench.resources import model_path
    tok = AutoTokenizer.from_pretrained(model_path(TOKENIZER))
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(num_hidden_layers=2, vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=2048))
    with torch.no_grad(): model.lm_head.weight *= 40
    return model.eval(), tok


def serve(tiny, engine, **kw):
    "An engine stand-in over the tiny model."
    return EngineStandIn(*tiny, engine=engine, max_batch=2, **kw)


def client(srv, **options):
    return get_lm('openai', 'standin', base_url=srv.base_url, tokenizer=TOKENIZER, **options)


def test_identity_names_what_each_engine_reports(tiny):
    ("vLLM: version, weights (`root`) and the rendered template, no dtype (`unknown`) unless in dev mode; SGLang: all "
     "but the template text (the name it was given is hashed); llama.cpp: all, its GGUF type as the dtype. No URL.")
    kw = dict(version='9.9.9', weights='/m/a')
    cases = {'vllm': serve(tiny, 'vllm', **kw), 'vllm-dev': serve(tiny, 'vllm', dev_mode=True, dtype='bfloat16', **kw),
             'sglang': serve(tiny, 'sglang', dtype='float32', chat_template='chatml', **kw),
             'llama.cpp': serve(tiny, 'llama.cpp', dtype='BF16', chat_template='{{ messages }}', **kw)}
    got = {}
    for name, srv in cases.items():
        with srv:
            ident = client(srv).identity()
            assert srv.base_url not in ident and f':{srv.httpd.server_port}' not in ident, ident
            got[name] = parse_identity(ident)
    for f in got.values():
        assert (f['model'], f['weights'], f['v'], f['tok']) == ('standin', '/m/a', '9.9.9', TOKENIZER)
    assert {n: (f['kind'], f['dtype']) for n, f in got.items()} == {
        'vllm': ('vllm', 'unknown'), 'vllm-dev': ('vllm', 'bfloat16'), 'sglang': ('sglang', 'float32'),
        'llama.cpp': ('llama.cpp', 'bfloat16')}
    rendered = tiny[1].encode(tiny[1].apply_chat_template([{'role': 'user', 'content': 'Hi'}, {'role': 'assistant',
        'content': 'Hello'}, {'role': 'user', 'content': 'Bye'}], tokenize=False, add_generation_prompt=True),
        add_special_tokens=False)
    assert got['vllm']['tmpl'] == got['vllm-dev']['tmpl'] == stable_hash(rendered)[:12]
    assert (got['sglang']['tmpl'], got['llama.cpp']['tmpl']) == (stable_hash('chatml')[:12],
                                                                 stable_hash('{{ messages }}')[:12])
    assert (got['vllm']['serves'], got['llama.cpp']['serves']) == ('ids+prompt_logprobs', 'ids')   # llama.cpp: none


def test_declared_dtype(tiny):
    "What the server does not say (vLLM), or says as `auto` (SGLang's default), is declared; a contradiction refused."
    with serve(tiny, 'vllm') as srv:
        lm = client(srv, dtype='bfloat16')
        assert (lm.dtype, lm.endpoint.declared, parse_identity(lm.identity())['dtype']) == ('bfloat16', ('dtype',),
                                                                                              'bfloat16')
    with serve(tiny, 'sglang') as srv:
        assert (client(srv).dtype, client(srv, dtype='bf16').dtype) == ('auto', 'bfloat16')
    with serve(tiny, 'sglang', dtype='float32') as srv:
        with pytest.raises(UserError, match='dtype=bfloat16 was declared, but the server reports dtype=float32'):
            client(srv, dtype='bfloat16').identity()


def test_cache_follows_what_is_served_not_where(tiny, tmp_path):
    ("The same server on another port answers from the cache; new weights behind the same URL and model name are "
     "computed again.")
    reqs = [LoglikelihoodRequest('The cat sat on', ' the mat'), LoglikelihoodRequest('Once upon a', ' time')]
    def run(srv):
        lm = open_lm('standin', 'openai', srv.base_url, cache=tmp_path/'cache.sqlite', options={'tokenizer': TOKENIZER})
        lm.require({LoglikelihoodRequest})   # the probe's own requests are not counted below
        asked = srv.counts['completions']
        out = lm.loglikelihood(reqs)
        return lm.identity(), out, srv.counts['completions'] - asked
    with serve(tiny, 'vllm') as a, serve(tiny, 'vllm') as b:
        assert a.base_url != b.base_url
        first, moved = run(a), run(b)
        b.weights = '/models/standin-v2'   # the server restarted on new weights: same URL, same model name
        renewed = run(b)
    assert first[2] > 0 and moved == (first[0], first[1], 0)
    assert renewed[0] != first[0] and renewed[2] > 0
    assert parse_identity(renewed[0])['weights'] == '/models/standin-v2'


def test_low_precision_server_not_rechecked_in_the_record(tiny):
    "A bfloat16 server's decisions: the run record's `recheck` says they were not re-checked; a float32 one's: nothing."
    from wordbench.evaluate.choices import score_choices
    from wordbench.evaluate.run_record import run_config
    decision = [[LoglikelihoodRequest('The cat sat on', ' the mat'), LoglikelihoodRequest('The cat sat on', ' a dog')]]
    configs = {}
    for dtype in ('bfloat16', 'float32'):
        with serve(tiny, 'sglang', dtype=dtype) as srv:
            lm = open_lm('standin', 'openai', srv.base_url, cache=False, options={'tokenizer': TOKENIZER})
            assert score_choices(lm, decision).rechecked == []
            configs[dtype] = run_config('standin', 'openai', lm, None, {'tokenizer': TOKENIZER}, {})
    assert configs['bfloat16']['recheck'] == dict(decisions=1, rechecked=0, share=0.0, margin=0.0,
                                                  note='server in bfloat16: decisions not re-checked')
    assert configs['bfloat16']['capabilities']['dtype'] == configs['bfloat16']['model_dtype'] == 'bfloat16'
    assert 'recheck' not in configs['float32']


def test_low_precision_server_rechecked_against_a_reference(tiny, tmp_path):
    "A bfloat16 server with a float32 reference: the close decision is re-scored there, the far one not; same identity."
    from wordbench.evaluate.choices import score_choices
    from wordbench.evaluate.run_record import run_config
    for part in tiny: part.save_pretrained(tmp_path/'tiny')   # the reference, as an hf folder
    decisions = [[LoglikelihoodRequest('The cat sat on', c) for c in (' the mat', ' a dog')],
                 [LoglikelihoodRequest('She drank a cup of', c) for c in (' tea', ' stone')]]
    with serve(tiny, 'sglang', dtype='bfloat16') as srv, serve(tiny, 'sglang', dtype='float32') as ref:
        plain = client(srv)
        first = score_choices(plain, decisions).scores
        gaps = [abs(a[0] - b[0]) for a, b in first]
        near = gaps.index(min(gaps))
        margin = sum(gaps) / 2   # between the two decisions' margins
        for given in ({'reference': str(tmp_path/'tiny')}, {'reference_url': ref.base_url}):
            options = {'tokenizer': TOKENIZER, 'recheck_margin': margin, **given}
            lm = open_lm('standin', 'openai', srv.base_url, cache=False, options=options)
            got = score_choices(lm, decisions)
            assert got.rechecked == [near] and lm.identity() == plain.identity(), given
            assert all(abs(x[0] - y[0]) < 1e-4 for d, e in zip(got.scores, first) for x, y in zip(d, e))
            recheck = run_config('standin', 'openai', lm, None, options, {})['recheck']
            assert (recheck['rechecked'], recheck['margin']) == (1, margin)
            named = f'hf:{tmp_path/"tiny"}:float32' if 'reference' in given else lm.exact().identity()
            assert recheck['note'] == (f'server in bfloat16: decisions closer than {margin:g} nats re-checked '
                                       f'against {named}')
        assert 'dtype=float32' in named and named != plain.identity()

def test_probe_takes_only_refusals_as_no_chat(tiny):
    "400, 404, 422 and 501 from /chat/completions: no chat; 500 or 503 after the retries: the probe fails, naming it."
    for status in (400, 404, 422, 501):
        with serve(tiny, 'vllm', chat_status=status) as srv:
            assert client(srv, max_retries=1, backoff=0.01).endpoint.chat is False
    for status in (500, 503):
        with serve(tiny, 'vllm', chat_status=status) as srv:
            lm = client(srv, max_retries=1, backoff=0.01)
            with pytest.raises(ServerError, match=f'scripted {status}'): lm.endpoint


def test_one_rank_probes_for_the_whole_launch(tiny, tmp_path, monkeypatch):
    ("Two processes of one torchrun launch (in turn, in one interpreter): rank 0 probes the server and rank 1 takes "
     "its probe from beside the shared cache, asking the server nothing about itself, so both parts carry one "
     "identity even though the server changed its weights between them; the parts then merge.")
    from wordbench.evaluate.results import results_path
    from wordbench.evaluate.shards import merge_parts
    from wordbench.evaluate.tasks import Shard, run_eval
    from wordbench.testing import ToyChoice
    task, out, seen = ToyChoice(), tmp_path/'results', []
    with serve(tiny, 'vllm') as srv:
        described = srv.get   # the routes a probe reads: /version, /v1/models, ...
        srv.get = lambda path: seen.append(path) or described(path)
        for k in range(2):
            launched = dict(RANK=k, WORLD_SIZE=2, LOCAL_RANK=k, MASTER_ADDR='127.0.0.1', MASTER_PORT=29500,
                            TORCHELASTIC_RUN_ID='job-1')
            for name, value in launched.items(): monkeypatch.setenv(name, str(value))
            run_eval(task, 'standin', 'openai', out=out, cache=tmp_path/'cache'/'results.sqlite',
                     lm_options={'base_url': srv.base_url, 'tokenizer': TOKENIZER}, shard=Shard(k, 2))
            if k == 0: by_rank0, srv.weights = len(seen), '/models/standin-v2'   # new weights under rank 1
    assert by_rank0 > 0 and len(seen) == by_rank0, seen   # rank 1 read no route of the server's
    assert len(list((tmp_path/'cache'/'probes').glob('*.json'))) == 1
    merged = merge_parts(results_path(task.name, 'standin', out), task.schema, task.name)
    identities = pd.read_csv(merged).identity.unique()
    assert len(identities) == 1 and parse_identity(identities[0])['weights'] == '/models/standin'
